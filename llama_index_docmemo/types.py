"""Plain data shared by every layer: page references, page records, embeddings and search hits.

Kept free of I/O and model code so memories, stores, encoders and reasoners can all depend on it.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

import numpy as np


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
    """

    multivector: np.ndarray
    pooled: np.ndarray
    sparse: SparseVector | None = None


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


@dataclass(frozen=True)
class PageFilter:
    """Access and scope constraints applied inside Qdrant on every path (deny by default; the
    rules live in :mod:`llama_index_docmemo.store.access`).

    Args:
        doc_ids: restrict to these documents (None: all the caller may see).
        tenant: the caller's tenant (None: only documents indexed without a tenant).
        acl_groups: the caller's groups: documents without an ACL, and those whose ACL shares a
            group with these (None or empty: documents without an ACL only).
    """

    doc_ids: tuple[str, ...] | None = None
    tenant: str | None = None
    acl_groups: tuple[str, ...] | None = None
