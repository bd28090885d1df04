"""The reader contract: read the selected pages (and crops) with the memories, return Feedback."""

from __future__ import annotations

from abc import ABC, abstractmethod
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

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


class Reader(ABC):
    """Reads pages and labels them; implementations: the LLM reader, offline (text rules),
    simulated (evaluation).

    :meth:`read` is the reading as steps (``step_runtime.py``), which the loop runs with sync or async
    I/O; by default it runs :meth:`read` (a reader without I/O of its own) off the event
    loop. A reader that talks to a model overrides :meth:`read` and runs it from :meth:`read`.
    """

    name: str = "reader"

    @abstractmethod
    def read(self, inp: ReaderInput) -> Feedback:
        """One reading round."""

    def read_steps(self, inp: ReaderInput) -> Steps[Feedback]:
        """One reading round as steps."""
        return (yield offload(self.read, inp))

    async def aread(self, inp: ReaderInput) -> Feedback:
        """Async :meth:`read` (the event loop is never blocked)."""
        return await arun(self.read_steps(inp))

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
