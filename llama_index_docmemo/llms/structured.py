"""How to ask an OpenAI-compatible server for JSON that follows a schema, server by server.

Servers disagree on the request field: OpenAI, vLLM and Ollama take ``response_format`` of type
``json_schema``; vLLM also has its own ``structured_outputs`` (and, before 0.12, ``guided_json``)
fields; llama.cpp's servers take ``{"type": "json_object", "schema": ...}`` and refuse
``json_schema`` (llama-cpp-python with an HTTP 500 carrying a validation message). The last resort,
"prompt", puts the schema in the system turn and relies on the caller's repair step.

"auto" walks :data:`AUTO_ORDER` and moves on only when an error reply names the response format
(status codes alone cannot tell: llama-cpp-python refuses with 500); the client remembers the
mode that worked per server (``llms/servers.py``). Pure: no I/O.
"""

from __future__ import annotations

import json
import re
from collections.abc import Sequence
from typing import Any, Literal, get_args

from llama_index.core.base.llms.types import ChatMessage, MessageRole, TextBlock

StructuredMode = Literal[
    "auto", "json_schema", "structured_outputs", "guided_json", "json_object", "prompt"
]
"""The ``structured_mode`` setting: "auto" or one concrete request form."""

CONCRETE_MODES: tuple[str, ...] = tuple(m for m in get_args(StructuredMode) if m != "auto")
AUTO_ORDER: tuple[str, ...] = ("json_schema", "json_object", "prompt")
"""What "auto" tries, in order: OpenAI/vLLM/Ollama, then llama.cpp, then the prompt."""

LEGACY_NAMES = {"response_format": "json_schema"}
"""0.1.0 called the ``json_schema`` mode "response_format"; still accepted."""

_FORMAT_WORDS = re.compile(
    r"response_format|response format|json_schema|json_object|guided_json|guided_decoding|"
    r"structured_outputs|structured output|grammar|'text' or",
    re.IGNORECASE,
)


def normalise_mode(mode: str) -> str:
    """``mode`` as one of :data:`StructuredMode` (legacy names mapped); ValueError otherwise."""
    mode = LEGACY_NAMES.get(mode, mode)
    if mode != "auto" and mode not in CONCRETE_MODES:
        allowed = ", ".join(("auto", *CONCRETE_MODES))
        raise ValueError(f"structured_mode {mode!r} is not one of: {allowed}")
    return mode


def request_options(mode: str, schema: dict[str, Any], name: str) -> dict[str, Any]:
    """Keyword arguments of ``chat.completions.create`` asking for ``schema`` in ``mode``."""
    if mode == "json_schema":
        return {
            "response_format": {
                "type": "json_schema",
                "json_schema": {"name": name, "schema": schema, "strict": True},
            }
        }
    if mode == "json_object":
        return {"response_format": {"type": "json_object", "schema": schema}}
    if mode == "structured_outputs":
        return {"extra_body": {"structured_outputs": {"json": schema}}}
    if mode == "guided_json":
        return {"extra_body": {"guided_json": schema}}
    if mode == "prompt":
        return {}
    raise ValueError(f"no request options for structured_mode {mode!r}")


def schema_instruction(schema: dict[str, Any]) -> str:
    """The system-turn text of "prompt" mode: the schema itself, compact."""
    return (
        "Your reply must be one JSON object, with no text before or after it, that validates "
        f"against this JSON schema:\n{json.dumps(schema, separators=(',', ':'))}"
    )


def with_schema_in_prompt(
    messages: Sequence[ChatMessage], schema: dict[str, Any]
) -> list[ChatMessage]:
    """``messages`` with :func:`schema_instruction` appended to the system turn (or added)."""
    instruction = schema_instruction(schema)
    out = list(messages)
    for i, message in enumerate(out):
        if message.role == MessageRole.SYSTEM:
            blocks = [*message.blocks, TextBlock(text="\n\n" + instruction)]
            out[i] = message.model_copy(update={"blocks": blocks})
            return out
    return [ChatMessage(role=MessageRole.SYSTEM, content=instruction), *out]


def names_response_format(status: int | None, message: str) -> bool:
    """Whether an error reply is a refusal of the request's structured-output form.

    A 4xx or 5xx whose text names the response format / schema field (llama-cpp-python:
    ``HTTP 500 ... Input should be 'text' or 'json_object'``; vLLM: ``400 ... guided_json``).
    Connection errors and timeouts (no status) never are.
    """
    if status is None or status < 400:
        return False
    return bool(_FORMAT_WORDS.search(message))


def next_mode(mode: str) -> str | None:
    """The mode "auto" tries after ``mode`` was refused; None when nothing is left."""
    if mode not in AUTO_ORDER:
        return None
    i = AUTO_ORDER.index(mode)
    return AUTO_ORDER[i + 1] if i + 1 < len(AUTO_ORDER) else None
