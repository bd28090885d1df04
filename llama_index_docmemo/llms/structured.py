"""How to ask an OpenAI-compatible server for JSON that follows a schema, server by server.

Servers disagree on the request field: OpenAI, vLLM and Ollama take ``response_format`` of type
``json_schema``; vLLM also has its own ``structured_outputs`` (and, before 0.12, ``guided_json``)
fields; llama.cpp's servers take ``{"type": "json_object", "schema": ...}`` and refuse
``json_schema`` (llama-cpp-python with an HTTP 500 carrying a validation message). The last resort,
"prompt", puts the schema in the system turn and relies on the caller's repair step.

"auto" walks the rows of :data:`FALLBACKS` and moves on only when the server refuses the form
(:func:`refuses_form`: the field its structured error names, else, for a server that gives
nothing else, its error text); the client remembers the mode that worked per server
(``llms/servers.py``).

Also here, for every pydantic reply model: the strict schema sent with a request
(:func:`reply_schema`), lenient reading of a reply (:func:`validate_reply`), and the last
resort for an LLM that has no native structured form, the schema in the system turn with one
repair request (:func:`ask_with_schema_in_prompt`, written as steps: ``step_runtime.py``). Pure: no I/O.
"""

from __future__ import annotations

import copy
import functools
import json
import logging
import re
from collections.abc import Sequence
from typing import TYPE_CHECKING, Any, Literal, TypeVar, get_args

from llama_index.core.base.llms.types import ChatMessage, MessageRole, TextBlock
from llama_index.core.output_parsers.base import OutputParserException
from llama_index.core.output_parsers.utils import extract_json_str, parse_json_markdown
from pydantic import BaseModel, ValidationError

from llama_index_docmemo.llms.context import fenced
from llama_index_docmemo.step_runtime import Steps, either

if TYPE_CHECKING:
    from llama_index.core.llms import LLM

logger = logging.getLogger(__name__)

M = TypeVar("M", bound=BaseModel)

StructuredMode = Literal[
    "auto", "json_schema", "structured_outputs", "guided_json", "json_object", "prompt"
]
"""The ``structured_mode`` setting: "auto" or one concrete request form."""

CONCRETE_MODES: tuple[str, ...] = tuple(m for m in get_args(StructuredMode) if m != "auto")
FALLBACKS: tuple[tuple[str, str], ...] = (
    ("OpenAI, vLLM, Ollama", "json_schema"),
    ("llama.cpp (llama-cpp-python's server)", "json_object"),
    ("any other server", "prompt"),
)
"""What "auto" asks a server for, in order: (the servers that take the form, the form). A server
refusing a row's form gets the next row; the row that worked is remembered per server."""

AUTO_ORDER: tuple[str, ...] = tuple(mode for _, mode in FALLBACKS)

LEGACY_NAMES = {"response_format": "json_schema"}
"""0.1.0 called the ``json_schema`` mode "response_format"; still accepted."""

FORM_FIELDS = frozenset({"response_format", "structured_outputs", "guided_json"})
"""The request fields that carry a structured-output form."""

_REFUSAL_TEXT = re.compile(
    r"'loc': \('body', 'response_format'"  # llama-cpp-python: its request validation, HTTP 500
    r"|Unrecognized request argument supplied: (?:structured_outputs|guided_json)"  # OpenAI
    r"|- 'response_format'"  # OpenAI: the field's own validation
    r"|Invalid schema for response_format",  # OpenAI: a schema its strict mode refuses
)
"""Error texts refusing the form, for servers whose error names no field; each with the real
message it matches in ``tests/test_llm_structured.py``."""


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


def refuses_form(status: int | None, param: str | None, message: str) -> bool:
    """Whether an error reply is a refusal of the request's structured-output form.

    Only a 4xx or 5xx can be (connection errors and timeouts, no status, never are). A server
    whose error names the offending field (OpenAI's and vLLM's ``param``) is taken at its word;
    the text is read only when it names none (llama-cpp-python answers ``HTTP 500`` with its
    validation error as text).
    """
    if status is None or status < 400:
        return False
    if param:
        return param.split(".")[0] in FORM_FIELDS
    return bool(_REFUSAL_TEXT.search(message))


def error_param(body: str) -> str | None:
    """The ``param`` an OpenAI-style error body names (None: not JSON, or no field named)."""
    try:
        data = json.loads(body)
    except ValueError:
        return None
    error = data.get("error", data) if isinstance(data, dict) else None
    param = error.get("param") if isinstance(error, dict) else None
    return param if isinstance(param, str) else None


_CONTENT_REFUSAL = re.compile(
    r'can only concatenate str \(not \\?"list\\?"\) to str'  # llama-cpp-python (also JSON-escaped)
    r"|is not a multimodal model"  # vLLM serving a text-only model
    r"|does not support image"  # Ollama / LM Studio, a model without vision
    r"|at most 0 image",  # older vLLM
    re.IGNORECASE,
)


def refuses_content(message: str) -> bool:
    """Whether an error reply is a refusal of list or image content (a text-only model), which
    a request rebuilt as plain text would pass. The first wording was recorded from
    llama-cpp-python 0.3.36 with SmolLM2; the others are vLLM's and Ollama's as their users
    report them."""
    return bool(_CONTENT_REFUSAL.search(message))


def next_mode(mode: str) -> str | None:
    """The form of the :data:`FALLBACKS` row after ``mode``'s; None when nothing is left."""
    if mode not in AUTO_ORDER:
        return None
    i = AUTO_ORDER.index(mode)
    return AUTO_ORDER[i + 1] if i + 1 < len(AUTO_ORDER) else None


class ReplyError(ValueError):
    """A reply that is not the JSON object asked for; the message goes into the repair prompt."""


MAX_REPLY_CHARS = 20_000_000
"""Longer replies are refused unread (far beyond any ``max_tokens``)."""

YAML_FALLBACK_CHARS = 100_000
"""Up to this length a reply that is not strict JSON is read leniently (core's YAML fallback);
longer ones must be strict JSON, which bounds the time a hostile reply can cost."""


def extract_json(text: str) -> dict[str, Any]:
    """The JSON object in a reply (bare, fenced, or surrounded by prose), through LlamaIndex's
    JSON helpers: ``parse_json_markdown`` (which also reads the near-JSON small models write),
    ``extract_json_str`` for very long replies.
    """
    if len(text) > MAX_REPLY_CHARS:
        raise ReplyError(f"the reply is {len(text)} characters long, over {MAX_REPLY_CHARS}")
    try:
        if len(text) <= YAML_FALLBACK_CHARS:
            value = parse_json_markdown(text)
        else:
            value = json.loads(extract_json_str(text))
    except (OutputParserException, ValueError) as exc:
        raise ReplyError(f"the reply is not valid JSON ({str(exc)[:200]})") from exc
    if not isinstance(value, dict):
        raise ReplyError("the reply holds no JSON object")
    return value


def validate_reply(model: type[M], text: str) -> M:
    """``text`` read as a ``model``; :class:`ReplyError` saying what is wrong otherwise."""
    data = extract_json(text)
    try:
        return model.model_validate(data)
    except ValidationError as exc:
        problems = "; ".join(
            f"{'.'.join(str(p) for p in e['loc']) or 'reply'}: {e['msg']}" for e in exc.errors()[:5]
        )
        raise ReplyError(f"the reply does not match the schema ({problems})") from exc


def reply_schema(model: type[BaseModel]) -> dict[str, Any]:
    """The JSON schema sent with a request, generated from the reply model (a copy of the one
    made for the model's first request: pydantic takes milliseconds to generate it).

    Self-contained and strict, as OpenAI's ``strict`` mode, vLLM's and llama.cpp's grammar
    compilers all accept: references inlined, every property required (in the model's field
    order, which is the order the model should write them), no extra properties, no titles or
    defaults.
    """
    return copy.deepcopy(_strict_schema(model))


@functools.cache
def _strict_schema(model: type[BaseModel]) -> dict[str, Any]:
    generated = model.model_json_schema()
    definitions = generated.pop("$defs", {})

    def strict(node: Any) -> Any:
        if isinstance(node, list):
            return [strict(item) for item in node]
        if not isinstance(node, dict):
            return node
        if "$ref" in node:
            return strict(copy.deepcopy(definitions[node["$ref"].rsplit("/", 1)[-1]]))
        out = {k: strict(v) for k, v in node.items() if k not in ("title", "default")}
        if out.get("type") == "object" and "properties" in out:
            out["required"] = list(out["properties"])
            out["additionalProperties"] = False
        return out

    return strict(generated)


REPAIR_SYSTEM = (
    "You turn a malformed reply into valid JSON matching a given schema. Keep the reply's "
    "content; fix only its form. Reply with the JSON object only."
)


def repair_messages(
    reply: str, problem: str, schema: dict[str, Any], *, reply_chars: int = 6000
) -> list[ChatMessage]:
    """The request asking to restate a malformed ``reply`` as JSON matching ``schema``."""
    text = (
        f"This reply should have been a JSON object matching the schema below, but {problem}.\n\n"
        f"Schema:\n{json.dumps(schema)}\n\nReply to fix:\n{fenced(reply[:reply_chars])}"
    )
    return [
        ChatMessage(role=MessageRole.SYSTEM, content=REPAIR_SYSTEM),
        ChatMessage(role=MessageRole.USER, content=text),
    ]


def ask_with_schema_in_prompt(
    llm: LLM, messages: Sequence[ChatMessage], model: type[M], **llm_kwargs: Any
) -> Steps[M | None]:
    """Steps: the schema in the system turn, the reply read leniently, one repair request;
    None when the repaired reply is still not a ``model``."""
    schema = reply_schema(model)
    request = with_schema_in_prompt(messages, schema)
    response = yield either(llm.chat, llm.achat, request, **llm_kwargs)
    text = response.message.content or ""
    try:
        return validate_reply(model, text)
    except ReplyError as problem:
        logger.info("%s reply malformed (%s); asking for a repair", model.__name__, problem)
        repair = with_schema_in_prompt(repair_messages(text, str(problem), schema), schema)
    response = yield either(llm.chat, llm.achat, repair, **llm_kwargs)
    try:
        return validate_reply(model, response.message.content or "")
    except ReplyError as problem:
        logger.warning(
            "%s reply still malformed after repair (%s); ignored", model.__name__, problem
        )
        return None
