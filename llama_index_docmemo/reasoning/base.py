"""The reasoner contract: read the selected pages (and crops) with the memories, return Feedback."""

from __future__ import annotations

import asyncio
from abc import ABC, abstractmethod
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any, Literal

from pydantic import BaseModel, Field

from llama_index_docmemo.types import PageRef

Status = Literal["answered", "need_more", "unanswerable"]


class EvidenceNote(BaseModel):
    """A fact the reasoner found, with the page it stands on."""

    page: PageRef
    fact: str


class Feedback(BaseModel):
    """What one reading round produced; drives the belief update and the episodic memory.

    ``useful_pages``/``irrelevant_pages`` only ever name pages that were shown: the engine
    drops anything else (a reasoner's output is untrusted, like the documents it read).
    """

    model_config = {"arbitrary_types_allowed": True}

    answer: str | None = None
    useful_pages: list[PageRef] = Field(default_factory=list)
    irrelevant_pages: list[PageRef] = Field(default_factory=list)
    notes: list[EvidenceNote] = Field(default_factory=list)
    missing: list[str] = Field(default_factory=list)
    refined_query: str | None = None
    status: Status = "need_more"
    llm_calls: int = 0


@dataclass
class CropView:
    """A table/figure crop of a page shown to the reasoner (adaptive granularity)."""

    page: PageRef
    kind: str
    bbox: tuple[float, float, float, float]
    text: str = ""
    load_image: Callable[[], Any] | None = None


@dataclass
class PageView:
    """A page as the reasoner sees it: text, section, summary, and its image on demand."""

    ref: PageRef
    text: str
    section: str = ""
    summary: str = ""
    load_image: Callable[[], Any] | None = None


@dataclass
class ReasoningInput:
    """Everything one round shows the reasoner.

    Args:
        question: the user's original question.
        query: the query this round retrieved with (refined after round 1).
        pages: the pages selected this round.
        crops: crops of tables/figures on those pages.
        evidence: notes gathered in earlier rounds (episodic memory; empty when disabled).
        missing: what earlier rounds said is still missing.
        outline: the schema memory's outline text (empty when disabled).
        round: 1-based round number; ``final_round`` asks for a best answer now.
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


class Reasoner(ABC):
    """Reads pages and labels them; implementations: offline (text rules), VLM, simulated (eval)."""

    name: str = "reasoner"

    @abstractmethod
    def reason(self, inp: ReasoningInput) -> Feedback:
        """One reading round."""

    async def areason(self, inp: ReasoningInput) -> Feedback:
        """Async :meth:`reason`; network reasoners override with a native async call."""
        return await asyncio.to_thread(self.reason, inp)

    def synthesize(self, question: str, evidence: list[EvidenceNote], draft: str | None) -> str:
        """Final answer from what was found when the loop ran out of rounds."""
        if draft:
            return draft
        if evidence:
            return "; ".join(f"{n.fact} (p. {n.page.page})" for n in evidence[:5])
        return "Not found in the pages read."


class PageReranker(ABC):
    """Orders candidate pages for reading (the retrieval agent); optional in the selection step.

    ``llm_calls`` counts the model requests made so far (repairs included), for the cost budget.
    """

    llm_calls: int = 0

    @abstractmethod
    def rerank(
        self,
        question: str,
        query: str,
        candidates: list[PageView],
        k: int,
        evidence: list[EvidenceNote],
        missing: list[str],
    ) -> list[PageRef]:
        """At most ``k`` pages from ``candidates``, best first; unknown refs are ignored by the caller."""
