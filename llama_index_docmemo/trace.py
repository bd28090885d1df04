"""Typed record of one DocMemo query: what each round retrieved, read, learned and cost.

Serialised into ``Response.metadata["docmemo"]`` (``QueryTrace.model_dump(mode="json")``);
the evaluation harness and the heat-map renderer read it back with ``QueryTrace.model_validate``.
A page or a document is named by its ``doc_id``; a trace saved by 0.2.0, which called it ``doc``,
still reads.
"""

from __future__ import annotations

from typing import Annotated, Literal

from pydantic import AliasChoices, BaseModel, Field

from llama_index_docmemo.evidence.citations import Citation
from llama_index_docmemo.types import Feedback, PageRef

StopReason = Literal[
    "answered",
    "unanswerable",
    "max_rounds",
    "budget",
    "deadline",
    "llm_error",
    "no_candidates",
    "no_evidence",
    "static",
]

DocId = Annotated[str, Field(validation_alias=AliasChoices("doc_id", "doc"))]
"""A document's id in a saved record; read under 0.2.0's name ``doc`` too."""


class PageScore(BaseModel):
    doc_id: DocId
    page: int
    score: float

    @classmethod
    def of(cls, ref: PageRef, score: float = 1.0) -> PageScore:
        return cls(doc_id=ref.doc_id, page=ref.page, score=score)


class PageRead(BaseModel):
    doc_id: DocId
    page: int
    round: int


class BeliefState(BaseModel):
    """Posterior (alpha, beta) of a page after a round's update."""

    doc_id: DocId
    page: int
    alpha: float
    beta: float

    @property
    def mean(self) -> float:
        return self.alpha / (self.alpha + self.beta)


class DocumentBelief(BaseModel):
    """A document's Beta(alpha, beta) after a round's update, and the pages the round gave it
    (a scope of several documents only)."""

    doc_id: DocId
    alpha: float
    beta: float
    pages: int = 0

    @property
    def mean(self) -> float:
        return self.alpha / (self.alpha + self.beta)


class FeedbackRecord(BaseModel):
    status: str
    answer: str | None = None
    useful: list[PageScore] = Field(default_factory=list)  # score unused (1.0): same shape as pages
    irrelevant: list[PageScore] = Field(default_factory=list)
    notes: list[str] = Field(default_factory=list)
    missing: list[str] = Field(default_factory=list)
    refined_query: str | None = None
    dropped_labels: int = 0  # labels naming pages that were not shown (ignored)

    @classmethod
    def of(cls, feedback: Feedback, dropped: int) -> FeedbackRecord:
        """The record of a (sanitised) feedback and of how many labels it lost."""
        return cls(
            status=feedback.status,
            answer=feedback.answer,
            useful=[PageScore.of(r) for r in feedback.useful_pages],
            irrelevant=[PageScore.of(r) for r in feedback.irrelevant_pages],
            notes=[f"{n.page.doc_id} p{n.page.page}: {n.fact}" for n in feedback.notes],
            missing=feedback.missing,
            refined_query=feedback.refined_query,
            dropped_labels=dropped,
        )


class RoundTrace(BaseModel):
    round: int
    query: str
    lam: float
    candidates: list[PageScore]
    selected: list[PageScore]
    crops: int = 0
    feedback: FeedbackRecord | None = None
    beliefs: list[BeliefState] = Field(default_factory=list)
    documents: list[DocumentBelief] = Field(default_factory=list)  # best-believed first
    llm_calls: int = 0
    images: int = 0  # images in the round's LLM requests (reading and reranking)
    image_tokens: int = 0  # their tokens, estimated by the model family's formula
    prompt_tokens: int = 0  # the LLMs' usage, else counted with Settings.tokenizer (+ image_tokens)
    completion_tokens: int = 0
    seconds: float = 0.0


class QueryTrace(BaseModel):
    question: str
    answer: str
    status: str
    stop_reason: StopReason
    error: str | None = None  # with stop "llm_error": the reader's LLM failure (model, URL)
    rounds: list[RoundTrace] = Field(default_factory=list)
    pages_read: list[PageRead] = Field(default_factory=list)
    evidence: list[PageScore] = Field(default_factory=list)
    citations: list[Citation] = Field(default_factory=list)  # per figure, name and quoted fact
    abstained: str | None = None  # why weak evidence made the answer "not found"
    llm_calls: int = 0
    seconds: float = 0.0
    reader: str = ""  # "llm", "offline", "simulated", ... ("" for selection only)
    images: bool = False  # whether the reader is shown page images
    images_reason: str = ""
