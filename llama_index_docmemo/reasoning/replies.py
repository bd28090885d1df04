"""The JSON a VLM sends back, read as untrusted data: extract, validate, bound, map page numbers.

Prompts number the pages they show [1]..[n]; replies name pages by those local numbers, which
are mapped back to :class:`PageRef` here. Numbers outside 1..n are dropped, lists are cut to
fixed lengths, strings are clipped; nothing in a reply is ever executed or obeyed. Pure: no I/O.
"""

from __future__ import annotations

import copy
import json
import re
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Annotated, Any, Literal

from llama_index.core.output_parsers.base import OutputParserException
from llama_index.core.output_parsers.utils import extract_json_str, parse_json_markdown
from pydantic import BaseModel, BeforeValidator, ValidationError, WithJsonSchema

from llama_index_docmemo.reasoning.base import EvidenceNote, Feedback
from llama_index_docmemo.types import PageRef


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


_LOCAL_NUMBER = re.compile(r"^\s*\[?\s*(?:page\s*)?(\d{1,6})\s*\]?\s*$", re.IGNORECASE)


def _local_number(value: Any) -> int | None:
    """A page number as the model may write it (3, "3", "[3]", "page 3"); None otherwise."""
    if isinstance(value, bool):
        return None
    if isinstance(value, int):
        return value
    if isinstance(value, float) and value.is_integer():
        return int(value)
    if isinstance(value, str):
        match = _LOCAL_NUMBER.match(value)
        return int(match.group(1)) if match else None
    return None


def _text(value: Any) -> Any:
    """Numbers where text is expected become text; other types are left for validation."""
    if isinstance(value, (int, float)) and not isinstance(value, bool):
        return str(value)
    return value


LocalNumber = Annotated[
    int | None, BeforeValidator(_local_number), WithJsonSchema({"type": "integer"})
]
"""A page number [1]..[n] as shown; lenient on input, a plain integer in the schema."""
Text = Annotated[str, BeforeValidator(_text)]
OptionalText = Annotated[str | None, BeforeValidator(_text)]


class _Model(BaseModel):
    model_config = {"extra": "ignore"}


class _NoteReply(_Model):
    page: LocalNumber = None
    fact: Text = ""


class FeedbackReply(_Model):
    """A reading round's reply before page numbers are mapped."""

    notes: list[_NoteReply] = []
    useful_pages: list[LocalNumber] = []
    irrelevant_pages: list[LocalNumber] = []
    missing: list[Text] = []
    status: Literal["answered", "need_more", "unanswerable"] = "need_more"
    answer: OptionalText = None
    refined_query: OptionalText = None


class RerankReply(_Model):
    pages: list[LocalNumber]


class _SummaryItem(_Model):
    page: LocalNumber = None
    summary: Text = ""


class SummaryReply(_Model):
    summaries: list[_SummaryItem]


def reply_schema(model: type[BaseModel]) -> dict[str, Any]:
    """The JSON schema sent with a request, generated from the reply model.

    Self-contained and strict, as OpenAI's ``strict`` mode, vLLM's and llama.cpp's grammar
    compilers all accept: references inlined, every property required (in the model's field
    order, which is the order the model should write them), no extra properties, no titles or
    defaults.
    """
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


FEEDBACK_SCHEMA = reply_schema(FeedbackReply)
"""Reply schema of one reading round (facts first, verdict last)."""
RERANK_SCHEMA = reply_schema(RerankReply)
SUMMARY_SCHEMA = reply_schema(SummaryReply)


@dataclass(frozen=True)
class ReplyLimits:
    """Bounds on what one reply can put into the memories (and into later prompts)."""

    max_notes: int = 20
    max_missing: int = 8
    answer_chars: int = 4000
    fact_chars: int = 500
    missing_chars: int = 300
    query_chars: int = 500
    summary_chars: int = 400


def clip(text: str, limit: int) -> str:
    """``text`` whitespace-normalised and cut to ``limit`` characters at a word boundary."""
    text = " ".join(text.split())
    if len(text) <= limit:
        return text
    cut = text[:limit].rsplit(" ", 1)[0] if " " in text[:limit] else text[:limit]
    return cut.rstrip() + "…"


def _validate(model: type[_Model], text: str) -> Any:
    data = extract_json(text)
    try:
        return model.model_validate(data)
    except ValidationError as exc:
        problems = "; ".join(
            f"{'.'.join(str(p) for p in e['loc']) or 'reply'}: {e['msg']}" for e in exc.errors()[:5]
        )
        raise ReplyError(f"the reply does not match the schema ({problems})") from exc


def _resolve(numbers: Sequence[int | None], refs: Sequence[PageRef]) -> list[PageRef]:
    """Shown pages named by local numbers, in order, without repeats; other numbers dropped."""
    picked = dict.fromkeys(refs[n - 1] for n in numbers if n is not None and 1 <= n <= len(refs))
    return list(picked)


def parse_feedback(
    text: str, refs: Sequence[PageRef], limits: ReplyLimits, llm_calls: int
) -> Feedback:
    """A :class:`Feedback` from a reading reply about pages ``refs`` (shown as [1]..[n]).

    A page named both useful and irrelevant keeps neither label; "answered" without an answer
    is "need_more". Raises :class:`ReplyError` for a reply that is not the object asked for.
    """
    reply: FeedbackReply = _validate(FeedbackReply, text)
    useful = _resolve(reply.useful_pages, refs)
    irrelevant = _resolve(reply.irrelevant_pages, refs)
    both = set(useful) & set(irrelevant)
    notes: list[EvidenceNote] = []
    for note in reply.notes:
        page = _resolve([note.page], refs)
        fact = clip(note.fact, limits.fact_chars)
        if page and fact:
            notes.append(EvidenceNote(page=page[0], fact=fact))
        if len(notes) >= limits.max_notes:
            break
    wanted = [m for m in reply.missing if m.strip()][: limits.max_missing]
    missing = [clip(m, limits.missing_chars) for m in wanted]
    answer = clip(reply.answer, limits.answer_chars) if reply.answer else None
    refined = clip(reply.refined_query, limits.query_chars) if reply.refined_query else None
    status = reply.status if answer or reply.status != "answered" else "need_more"
    return Feedback(
        answer=answer or None,
        useful_pages=[r for r in useful if r not in both],
        irrelevant_pages=[r for r in irrelevant if r not in both],
        notes=notes,
        missing=missing,
        refined_query=refined or None,
        status=status,
        llm_calls=llm_calls,
    )


def parse_rerank(text: str, refs: Sequence[PageRef], k: int) -> list[PageRef]:
    """At most ``k`` of the candidate pages ``refs`` (shown as [1]..[n]), best first."""
    reply: RerankReply = _validate(RerankReply, text)
    return _resolve(reply.pages, refs)[:k]


def parse_summaries(text: str, pages: Sequence[int], limits: ReplyLimits) -> dict[int, str]:
    """Page number -> summary for the pages shown as [1]..[n] (``pages`` are their numbers)."""
    reply: SummaryReply = _validate(SummaryReply, text)
    out: dict[int, str] = {}
    for item in reply.summaries:
        n = item.page
        summary = clip(item.summary, limits.summary_chars)
        if n is not None and 1 <= n <= len(pages) and summary:
            out.setdefault(pages[n - 1], summary)
    return out
