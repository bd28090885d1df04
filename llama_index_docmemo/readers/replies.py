"""The replies an LLM sends back, as pydantic models, and how they are read as untrusted data.

The models are what the reader, the reranker and the summariser ask for through LlamaIndex's
structured output (``llms/exchange.py``); they are lenient on input (a page number written
"[3]" or "page 3" is 3). Prompts number the pages they show [1]..[n]; replies name pages by those
local numbers, which are mapped back to :class:`PageRef` here. Numbers outside 1..n are dropped,
lists are cut to fixed lengths, strings are clipped; nothing in a reply is ever executed or
obeyed. Pure: no I/O.
"""

from __future__ import annotations

from collections.abc import Collection, Sequence
from typing import Literal

from llama_index_docmemo.llms.exchange import (
    LocalNumber,
    OptionalText,
    ReplyLimits,
    ReplyModel,
    Text,
    clip,
)
from llama_index_docmemo.readers.base import EvidenceNote, Feedback
from llama_index_docmemo.types import PageRef


class _NoteReply(ReplyModel):
    page: LocalNumber = None
    fact: Text = ""
    quote: Text = ""


class FeedbackReply(ReplyModel):
    """What the reader found on the pages shown: facts with their page (local numbers [1]..[n])
    and the page's words they rest on (quote), which pages help and which do not, what is still
    missing, a verdict, an answer and a better search query."""

    notes: list[_NoteReply] = []
    useful_pages: list[LocalNumber] = []
    irrelevant_pages: list[LocalNumber] = []
    missing: list[Text] = []
    status: Literal["answered", "need_more", "unanswerable"] = "need_more"
    answer: OptionalText = None
    refined_query: OptionalText = None


class RerankReply(ReplyModel):
    """The candidate pages (local numbers [1]..[n]) most worth reading next, best first."""

    pages: list[LocalNumber]


def _resolve(numbers: Sequence[int | None], refs: Sequence[PageRef]) -> list[PageRef]:
    """Shown pages named by local numbers, in order, without repeats; other numbers dropped."""
    picked = dict.fromkeys(refs[n - 1] for n in numbers if n is not None and 1 <= n <= len(refs))
    return list(picked)


def exclusive_labels(
    useful: Sequence[PageRef], irrelevant: Sequence[PageRef], shown: Collection[PageRef]
) -> tuple[list[PageRef], list[PageRef]]:
    """The labels about ``shown`` pages, each page once, in order; a page labelled both useful
    and irrelevant keeps neither (the reader contradicted itself, so neither label is evidence)."""
    shown_set = set(shown)
    kept_useful = list(dict.fromkeys(r for r in useful if r in shown_set))
    kept_irrelevant = list(dict.fromkeys(r for r in irrelevant if r in shown_set))
    both = set(kept_useful) & set(kept_irrelevant)
    return [r for r in kept_useful if r not in both], [r for r in kept_irrelevant if r not in both]


def sanitize_feedback(
    feedback: Feedback,
    shown: Sequence[PageRef],
    read: Collection[PageRef],
    max_labels: int,
) -> tuple[Feedback, int]:
    """A copy of any reader's ``feedback`` that names only shown pages (labels) and read pages
    (notes): feedback may echo instructions hidden in document text.

    Labels follow :func:`exclusive_labels`; at most ``max_labels`` survive per kind, which
    bounds how far one round can move the beliefs. Returns the copy and the number of labels
    and notes dropped, here and by the reader (``feedback.dropped``).
    """
    useful, irrelevant = exclusive_labels(feedback.useful_pages, feedback.irrelevant_pages, shown)
    useful, irrelevant = useful[:max_labels], irrelevant[:max_labels]
    readable = set(shown) | set(read)
    notes = [n for n in feedback.notes if n.page in readable]
    dropped = (
        feedback.dropped  # what the reader left out already (numbers of pages never shown)
        + len(feedback.useful_pages)
        + len(feedback.irrelevant_pages)
        + len(feedback.notes)
        - len(useful)
        - len(irrelevant)
        - len(notes)
    )
    clean = feedback.model_copy(
        update={"useful_pages": useful, "irrelevant_pages": irrelevant, "notes": notes}
    )
    return clean, dropped


def feedback_of(reply: FeedbackReply, refs: Sequence[PageRef], limits: ReplyLimits) -> Feedback:
    """The :class:`Feedback` of a reading reply about pages ``refs`` (shown as [1]..[n]).

    Labels follow :func:`exclusive_labels`; "answered" without an answer is "need_more".
    """
    useful, irrelevant = exclusive_labels(
        _resolve(reply.useful_pages, refs), _resolve(reply.irrelevant_pages, refs), refs
    )
    dropped = len(reply.useful_pages) + len(reply.irrelevant_pages) - len(useful) - len(irrelevant)
    notes: list[EvidenceNote] = []
    for note in reply.notes:
        page = _resolve([note.page], refs)
        fact = clip(note.fact, limits.fact_chars)
        dropped += not page
        if page and fact and len(notes) < limits.max_notes:
            quote = clip(note.quote, limits.quote_chars)
            notes.append(EvidenceNote(page=page[0], fact=fact, quote=quote))
    wanted = [m for m in reply.missing if m.strip()][: limits.max_missing]
    missing = [clip(m, limits.missing_chars) for m in wanted]
    answer = clip(reply.answer, limits.answer_chars) if reply.answer else None
    refined = clip(reply.refined_query, limits.query_chars) if reply.refined_query else None
    status = reply.status if answer or reply.status != "answered" else "need_more"
    return Feedback(
        answer=answer or None,
        useful_pages=useful,
        irrelevant_pages=irrelevant,
        notes=notes,
        missing=missing,
        refined_query=refined or None,
        status=status,
        dropped=dropped,
    )


def picks_of(reply: RerankReply, refs: Sequence[PageRef], k: int) -> list[PageRef]:
    """At most ``k`` of the candidate pages ``refs`` (shown as [1]..[n]), best first."""
    return _resolve(reply.pages, refs)[:k]
