"""The reader's contract: what a reader is shown (:class:`ReaderInput`), what it returns
(:class:`Feedback`), and how any reply is read before the loop believes it.

A reader reads the selected pages (and crops) with the memories and labels them. The replies an
LLM sends back are pydantic models asked for through LlamaIndex's structured output
(``llms/exchange.py``); they are lenient on input (a page number written "[3]" or "page 3" is 3).
Prompts number the pages they show [1]..[n]; replies name pages by those local numbers, which are
mapped back to :class:`PageRef` here. Numbers outside 1..n are dropped, lists are cut to fixed
lengths, strings are clipped; nothing in a reply is ever executed or obeyed, and every reader's
feedback (a model's or not) passes :func:`sanitize_feedback`. Pure but for :meth:`Reader.read_steps`'s
``offload``: no I/O.
"""

from __future__ import annotations

import warnings
from abc import ABC, abstractmethod
from collections.abc import Callable, Collection, Sequence
from dataclasses import dataclass, field
from inspect import isgeneratorfunction
from typing import Any, Literal

from llama_index_docmemo.llms.exchange import (
    LocalNumber,
    OptionalText,
    ReplyLimits,
    ReplyModel,
    Text,
    clip,
)
from llama_index_docmemo.page_images import PageImage
from llama_index_docmemo.step_runtime import Steps, arun, offload
from llama_index_docmemo.types import EvidenceNote, Feedback, PageRef, Status

__all__ = [
    "CropView",
    "EvidenceNote",
    "Feedback",
    "PageView",
    "Reader",
    "ReaderInput",
    "Status",
]


@dataclass
class CropView:
    """A table/figure crop of a page shown to the reader (adaptive granularity);
    ``load_image`` gives a PIL image or a PNG file."""

    page: PageRef
    kind: str
    bbox: tuple[float, float, float, float]
    text: str = ""
    load_image: Callable[[], Any] | None = None


@dataclass
class PageView:
    """A page as the reader sees it: text, section, summary, and its image: a cached file
    (``image``, rendered once per version and page) or ``load_image`` (a PIL image or a PNG
    file on demand)."""

    ref: PageRef
    text: str
    section: str = ""
    summary: str = ""
    load_image: Callable[[], Any] | None = None
    image: PageImage | None = None

    @property
    def has_image(self) -> bool:
        return self.load_image is not None or (self.image is not None and self.image.renderable)


@dataclass
class ReaderInput:
    """Everything one round shows the reader.

    Args:
        question: the user's original question.
        query: the query this round retrieved with (refined after round 1).
        pages: the pages selected this round.
        crops: crops of tables/figures on those pages.
        evidence: notes gathered in earlier rounds (episodic memory; empty when disabled).
        missing: what earlier rounds said is still missing.
        outline: the schema memory's outline text (empty when disabled).
        round: 1-based round number; ``final_round`` asks for a best answer now.
        pages_read_total / pages_in_scope: pages read so far, and pages of the documents
            searched so far (every document in scope that appeared among the candidates).
    """

    question: str
    query: str
    pages: list[PageView]
    crops: list[CropView] = field(default_factory=list)
    evidence: list[EvidenceNote] = field(default_factory=list)
    missing: list[str] = field(default_factory=list)
    outline: str = ""
    round: int = 1
    final_round: bool = False
    pages_read_total: int = 0
    pages_in_scope: int = 0


_OLD_NAMES = {"reason": "read", "areason": "aread"}
"""A reader's methods renamed in 0.3 (0.2 name -> name); the 0.2 names go in 0.4.0."""


def _old_name(old: str, method: Callable[..., Any]) -> Callable[..., Any]:
    """``method`` under its 0.2 name ``old``: warns, then calls ``method`` itself (not the
    subclass's override, so a 0.2 subclass's ``super().reason(...)`` reaches its base's read)."""
    new = _OLD_NAMES[old]

    def renamed(self: Reader, *args: Any, **kwargs: Any) -> Any:
        warnings.warn(
            f"{type(self).__name__}.{old}() is deprecated: call {new}() (the 0.2 name goes in "
            "0.4.0)",
            DeprecationWarning,
            stacklevel=2,
        )
        return method(self, *args, **kwargs)

    renamed.__name__ = renamed.__qualname__ = old
    renamed.__doc__ = f"Deprecated: :meth:`{new}` (its 0.2 name; it goes in 0.4.0)."
    return renamed


class Reader(ABC):
    """Reads the pages a round selects and labels them (DocMemo's reader; LlamaIndex's readers,
    such as ``SimpleDirectoryReader``, load files); implementations: the LLM reader, offline (text
    rules), simulated (evaluation).

    :meth:`read` reads one round, :meth:`aread` is its async twin. :meth:`read_steps` is the
    reading as steps (``step_runtime.py``), which the loop runs with sync or async I/O; by default
    it runs :meth:`read` (a reader without I/O of its own) off the event loop. A reader that talks
    to a model overrides :meth:`read_steps` and runs it from :meth:`read`.

    Deprecated since 0.3 (they go in 0.4.0): the 0.2 names ``reason`` / ``areason`` of
    :meth:`read` / :meth:`aread` still answer, and a subclass written against 0.2 (overriding
    ``reason``, ``areason``, or the steps method under its 0.2 name ``read``) is mapped onto the
    new names, each with a :class:`DeprecationWarning`; one overriding both the steps (``read``)
    and ``reason`` (which ran ``self.read``) cannot be, and is refused with what to rename.
    """

    name: str = "reader"

    def __init_subclass__(cls, **kwargs: Any) -> None:
        super().__init_subclass__(**kwargs)
        own = dict(vars(cls))
        steps = own.get("read") if isgeneratorfunction(own.get("read")) else None
        if steps is not None and "reason" in own:  # its reason runs self.read: the steps
            raise TypeError(
                f"{cls.__qualname__} is a 0.2 reader with its own steps (read) and reason: since "
                "0.3, rename read to read_steps and reason to read"
            )
        old = [name for name in _OLD_NAMES if name in own] + ["read"] * (steps is not None)
        if old:
            warnings.warn(
                f"{cls.__qualname__} overrides {', '.join(old)}, the reader's 0.2 method names: "
                "since 0.3 they are read (was reason), aread (was areason) and read_steps (was "
                "the steps method read); rename them, the 0.2 names go in 0.4.0",
                DeprecationWarning,
                stacklevel=3,  # the class statement (through ABCMeta.__new__)
            )
        if steps is not None:
            cls.read_steps = steps  # type: ignore[method-assign]
            del cls.read  # the inherited read runs these steps
        for name, new in _OLD_NAMES.items():
            if name in own:
                setattr(cls, new, own[name])
            elif new in vars(cls):  # super().reason(...) of a 0.2 subclass reaches this read
                setattr(cls, name, _old_name(name, vars(cls)[new]))

    @abstractmethod
    def read(self, inp: ReaderInput) -> Feedback:
        """One reading round."""

    def read_steps(self, inp: ReaderInput) -> Steps[Feedback]:
        """One reading round as steps."""
        return (yield offload(self.read, inp))

    async def aread(self, inp: ReaderInput) -> Feedback:
        """Async :meth:`read` (the event loop is never blocked)."""
        return await arun(self.read_steps(inp))

    reason = _old_name("reason", read)
    areason = _old_name("areason", aread)

    def synthesize(self, question: str, evidence: list[EvidenceNote], draft: str | None) -> str:
        """Final answer from what was found when the loop ran out of rounds."""
        return summarize_evidence(evidence, draft)


def summarize_evidence(evidence: list[EvidenceNote], draft: str | None) -> str:
    """The draft answer, else the first notes with their pages, else "not found"."""
    if draft:
        return draft
    if evidence:
        return "; ".join(f"{n.fact} (p. {n.page.page})" for n in evidence[:5])
    return "Not found in the pages read."


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
