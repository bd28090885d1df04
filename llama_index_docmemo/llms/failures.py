"""What a failed request to an OpenAI-compatible server becomes: an ``LLMError`` naming the URL.

A context overflow becomes a :class:`~llama_index_docmemo.llms.context.ContextWindowError`
carrying the server's window and the prompt's size, which the caller learns from; a refusal of
the structured-output form is told by the field its error names, else by its text (see
``llms/structured.py``). Pure: no I/O.
"""

from __future__ import annotations

import httpx
import openai

from llama_index_docmemo.errors import LLMError
from llama_index_docmemo.llms.context import ContextWindowError, parse_overflow
from llama_index_docmemo.llms.deadline import TOTAL_DEADLINE_PASSED, DeadlineExceeded
from llama_index_docmemo.llms.environment import ENV_DEADLINE
from llama_index_docmemo.llms.structured import refuses_content, refuses_form

_RETRIED_STATUS = frozenset({408, 409, 429})


def status_of(exc: BaseException | None) -> int | None:
    return exc.status_code if isinstance(exc, openai.APIStatusError) else None


def refuses_form_of(exc: BaseException | None) -> bool:
    """Whether ``exc`` is the server refusing the request's structured-output form."""
    if not isinstance(exc, openai.APIStatusError):
        return False
    param = exc.param if isinstance(exc.param, str) else None
    return refuses_form(exc.status_code, param, error_text(exc))


def error_text(exc: BaseException) -> str:
    """The server's error message, from the body when it has one."""
    if isinstance(exc, openai.APIStatusError):
        body = exc.body
        if isinstance(body, dict):
            inner = body.get("error", body)
            message = inner.get("message") if isinstance(inner, dict) else inner
            if message:
                return str(message)
        return str(exc.message)
    return str(exc)


def describe(exc: BaseException) -> str:
    if isinstance(exc, openai.APITimeoutError):
        return "timed out"
    if isinstance(exc, openai.APIConnectionError):
        return f"could not connect ({exc.__cause__ or exc})"
    if isinstance(exc, openai.APIStatusError):
        return f"HTTP {exc.status_code}: {' '.join(error_text(exc).split())[:500]}"
    return f"{type(exc).__name__}: {exc}"


def is_llm_failure(exc: BaseException) -> bool:
    """Whether ``exc`` is an LLM endpoint failing (down, refusing, timing out), as this
    package's and the ``openai``/``httpx`` clients raise it, not a fault of the caller's code."""
    return isinstance(
        exc, LLMError | openai.OpenAIError | httpx.HTTPError | ConnectionError | TimeoutError
    )


def was_retried(exc: BaseException) -> bool:
    """Whether the ``openai`` client retries this failure (so it made several attempts)."""
    if isinstance(exc, openai.APIConnectionError):
        return True
    status = status_of(exc)
    text = error_text(exc)
    if status is None or refuses_form_of(exc) or refuses_content(text):
        return False  # a refusal of the request's form is marked not-to-retry (deadline.py)
    return status in _RETRIED_STATUS or status >= 500


def llm_failure(
    exc: BaseException, *, where: str, deadline: float, max_retries: int, reply_tokens: int
) -> LLMError:
    """The :class:`LLMError` for a failed request to ``where`` (a URL and model)."""
    if isinstance(exc, DeadlineExceeded) or TOTAL_DEADLINE_PASSED in str(exc):
        return LLMError(
            f"{where} did not answer within the total request deadline of "
            f"{deadline:g}s (request_deadline / {ENV_DEADLINE})"
        )
    if isinstance(exc, openai.APIStatusError):
        overflow = parse_overflow(error_text(exc), reply_tokens)
        if overflow is not None:
            window, prompt_tokens = overflow
            return ContextWindowError(
                f"{where}: the prompt ({prompt_tokens} tokens) does not fit the context "
                f"window of {window} tokens with {reply_tokens} kept for the reply",
                window=window,
                prompt_tokens=prompt_tokens,
            )
    retried = f"(retried up to {max_retries} times)" if was_retried(exc) else "(not retried)"
    return LLMError(f"{where} {describe(exc)} {retried}")
