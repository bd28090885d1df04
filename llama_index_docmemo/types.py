"""Plain data shared by every layer: page references, page records, embeddings, search hits,
the store's filter tree and the reader's feedback (the caller's scope is
:class:`~llama_index_docmemo.store.scope.PageFilter`).

Kept free of I/O and model code so memories, stores, encoders and readers can all depend on it.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any, Literal

import numpy as np
from pydantic import BaseModel, Field


@dataclass(frozen=True, order=True)
class PageRef:
    """One page of one document: the unit that beliefs, reads and citations refer to.

    ``page`` is 1-based, as printed page labels and the evaluation data are.
    """

    doc_id: str
    page: int

    def __str__(self) -> str:
        return f"{self.doc_id}#p{self.page}"


@dataclass(frozen=True)
class SparseVector:
    """Lexical (BM25-style) signal of a page or query: term ids and weights."""

    indices: tuple[int, ...]
    values: tuple[float, ...]


@dataclass(frozen=True)
class PageEmbedding:
    """What an encoder produces for one page (or one query).

    Args:
        multivector: (n_vectors, dim) float32 token/patch vectors, scored by MaxSim.
        pooled: (dim,) float32 single vector for the first (prefetch) stage.
        sparse: optional lexical vector fused into the candidate search.
        grid: (rows, columns) when ``multivector`` is one row-major grid of image patches
            (ColQwen pages): the store's ``rows_cols`` layout pools its rows and columns.
    """

    multivector: np.ndarray
    pooled: np.ndarray
    sparse: SparseVector | None = None
    grid: tuple[int, int] | None = None
    stored: StoredVectors | None = None
    """The vectors a store writes for this page, computed beside the encoder
    (``store.points.lay_out``); a store whose layout they were made for writes them as they
    are, any other computes its own."""


@dataclass(frozen=True)
class StoredVectors:
    """A page's named vectors in one multivector layout (``layout``: that layout's payload).

    Token pooling and MUVERA cost a page-image store ~35 ms of CPU a page. Computed where the
    page is encoded (each Ray worker), they leave the single writer of an embedded store only
    its upserts."""

    layout: dict[str, Any]
    vectors: dict[str, np.ndarray]


QueryEmbedding = PageEmbedding


@dataclass(frozen=True)
class PageInput:
    """What an encoder may read of a page: its text always, its image on demand (ColQwen)."""

    ref: PageRef
    text: str
    load_image: Callable[[], Any] | None = None  # returns a PIL.Image; rendering is lazy


@dataclass
class PageRecord:
    """The payload stored with a page point (never image bytes: images are rendered on demand)."""

    doc_id: str
    doc_version: str
    page: int
    n_pages: int
    text: str
    source: str
    section: str = ""
    tenant: str | None = None
    acl: list[str] = field(default_factory=list)
    width: float = 0.0
    height: float = 0.0
    ocr: bool = False
    metadata: dict[str, Any] = field(default_factory=dict)
    """The app's own keys (a Document's metadata, ``--meta``), JSON values."""

    @property
    def ref(self) -> PageRef:
        return PageRef(self.doc_id, self.page)


@dataclass
class PageHit:
    """A page returned by a store search, with the store's score (higher is better)."""

    record: PageRecord
    score: float

    @property
    def ref(self) -> PageRef:
        return self.record.ref


FieldOp = Literal["eq", "ne", "in", "nin", "gt", "gte", "lt", "lte", "is_empty"]


@dataclass(frozen=True)
class FieldMatch:
    """One condition on a stored payload key (``value`` is a tuple for ``in``/``nin``)."""

    key: str
    op: FieldOp
    value: Any = None


@dataclass(frozen=True)
class FieldGroup:
    """Conditions combined by ``and`` / ``or`` / ``not`` (none of them), nestable.

    The backend-neutral form of LlamaIndex ``MetadataFilters`` and of every store filter
    (see ``store/scope.py``); each backend translates it once.
    """

    condition: Literal["and", "or", "not"]
    clauses: tuple[FieldMatch | FieldGroup, ...]


Status = Literal["answered", "need_more", "unanswerable"]


class EvidenceNote(BaseModel):
    """A fact the reader found, with the page it stands on and the page's own words it rests on
    (``quote``, verbatim; "" when the reader gave none): what a citation checks."""

    page: PageRef
    fact: str
    quote: str = ""


class Feedback(BaseModel):
    """What one reading round produced; drives the belief update and the episodic memory.

    ``useful_pages``/``irrelevant_pages`` only ever name pages that were shown: the loop
    drops anything else (a reader's output is untrusted, like the documents it read).
    ``problem`` says why a round brought nothing: the reader's reply was not the structured
    reply asked for (None for a reply that was). ``dropped`` counts the labels and notes the
    reply named that the reader already left out (pages never shown, e.g. [917] of 3).
    """

    model_config = {"arbitrary_types_allowed": True}

    answer: str | None = None
    useful_pages: list[PageRef] = Field(default_factory=list)
    irrelevant_pages: list[PageRef] = Field(default_factory=list)
    notes: list[EvidenceNote] = Field(default_factory=list)
    missing: list[str] = Field(default_factory=list)
    refined_query: str | None = None
    status: Status = "need_more"
    problem: str | None = None
    dropped: int = 0
