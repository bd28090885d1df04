"""What a server's reply must be before it is used, and the error for one that is not.

The ``openai`` client builds its response objects without validating them, and gives back the
body's text for a body that is not JSON (an HTML error page sent with HTTP 200). Whatever a
server sends, the reply is checked here and turned into a LlamaIndex ``ChatResponse``, or into
:class:`~llama_index_docmemo.errors.MalformedReplyError` naming the server, the model and what
was wrong (never an ``IndexError`` or ``AttributeError`` from deep inside a client). Pure: the
client that sent the request (``llms/openai_compatible.py``) supplies the ``where``.
"""

from __future__ import annotations

import json
from typing import Any

from llama_index.core.base.llms.types import ChatResponse
from llama_index.llms.openai.utils import from_openai_message
from openai.types.chat import ChatCompletion, ChatCompletionMessage
from pydantic import ValidationError

from llama_index_docmemo.errors import MalformedReplyError

EXCERPT_CHARS = 200
"""How much of an unusable body an error message quotes."""

READ_ERRORS: tuple[type[Exception], ...] = (
    json.JSONDecodeError,
    UnicodeDecodeError,
    AttributeError,
    TypeError,
    IndexError,
    KeyError,
    ValidationError,
)
"""What a client or LlamaIndex raises while reading a reply of the wrong shape (a body that is
not JSON, a field of the wrong type, an empty list indexed)."""


def excerpt(text: str, limit: int = EXCERPT_CHARS) -> str:
    """The start of ``text`` on one line, with its full length when it is cut."""
    flat = " ".join(text[: limit * 4].split())
    if len(flat) <= limit and len(text) <= limit * 4:
        return repr(flat)
    return f"{flat[:limit]!r}... ({len(text):,} characters)"


def completion_problem(response: object) -> str | None:
    """What makes ``response`` (what the ``openai`` client parsed) unusable as a chat
    completion; None when its first choice carries a message with text or nothing."""
    if isinstance(response, str | bytes):
        text = response if isinstance(response, str) else response.decode("utf-8", "replace")
        return f"a body that is not JSON: {excerpt(text)}"
    if not isinstance(response, ChatCompletion):
        return f"JSON that is not a chat completion: {excerpt(repr(response))}"
    choices = response.choices
    if not isinstance(choices, list):
        return f"'choices' is not a list but {excerpt(repr(choices))}"
    if not choices:
        return "an empty 'choices' list (no answer at all)"
    message = getattr(choices[0], "message", None)
    if not isinstance(message, ChatCompletionMessage):
        return f"choices[0] has no message object (got {excerpt(repr(choices[0]))})"
    if not isinstance(message.content, str | None):
        return f"choices[0].message.content is a {type(message.content).__name__}, not text"
    if not isinstance(message.role, str):
        return f"choices[0].message.role is a {type(message.role).__name__}, not a string"
    if not isinstance(message.tool_calls, list | None):
        return f"choices[0].message.tool_calls is a {type(message.tool_calls).__name__}"
    return None


def usage_counts(response: Any) -> dict[str, int]:
    """The reply's token counts (only those given as whole numbers)."""
    usage = getattr(response, "usage", None)
    counts = {}
    for key in ("prompt_tokens", "completion_tokens", "total_tokens"):
        value = getattr(usage, key, None)
        counts[key] = value if isinstance(value, int) and value >= 0 else 0
    return counts if usage is not None else {}


def chat_response(response: object, where: str) -> ChatResponse:
    """``response`` as a LlamaIndex ``ChatResponse``, or :class:`MalformedReplyError`."""
    problem = completion_problem(response)
    if problem is None:
        try:
            first = response.choices[0].message  # type: ignore[union-attr]
            message = from_openai_message(first, modalities=["text"])
            return ChatResponse(
                message=message, raw=response, additional_kwargs=usage_counts(response)
            )
        except READ_ERRORS as exc:
            problem = f"a message that cannot be read ({type(exc).__name__}: {exc})"
    raise malformed(where, problem)


def malformed(where: str, problem: str) -> MalformedReplyError:
    """The error for a reply from ``where`` (URL and model) that is ``problem``."""
    return MalformedReplyError(
        f"{where} sent a reply that is not a usable chat completion: {problem}"
    )


def unreadable(where: str, exc: BaseException) -> MalformedReplyError:
    """The error for a reply the client could not read at all (``exc``, one of READ_ERRORS)."""
    if isinstance(exc, json.JSONDecodeError):
        shown = f"{exc.msg} at character {exc.pos:,} of {len(exc.doc):,}"
        return malformed(where, f"a body that is not JSON ({shown}: {excerpt(exc.doc)})")
    return malformed(where, f"{type(exc).__name__}: {' '.join(str(exc).split())[:EXCERPT_CHARS]}")
