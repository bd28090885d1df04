"""Search plans: what one search asks of Qdrant, built once and sent by either backend.

A plan has a dense branch (first-stage HNSW candidates reranked by MaxSim on the original
multivector) and, for a store with lexical vectors, a lexical branch of the same depth. Both
branches go to Qdrant in one batched request; :mod:`.branch_fusion` merges their answers.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, replace
from typing import Literal

import numpy as np

from llama_index_docmemo.errors import StoreError
from llama_index_docmemo.store.layouts import MultivectorLayout
from llama_index_docmemo.store.payloads import KIND_PAGE
from llama_index_docmemo.store.scope import PageFilter, scope_filter
from llama_index_docmemo.store.validation import checked_embedding
from llama_index_docmemo.types import FieldGroup, PageEmbedding, SparseVector

Fusion = Literal["rrf", "dbsf"]
IdfScope = Literal["filter", "collection"]
FUSIONS: tuple[str, ...] = ("rrf", "dbsf")
IDF_SCOPES: tuple[str, ...] = ("filter", "collection")
DEFAULT_PREFETCH = 200
"""The fewest first-stage candidates of a search that names no ``prefetch_limit``."""
PREFETCH_AT_100K = 300
PREFETCH_GROWTH = 0.4
TIE_MARGIN = 8
"""Reranked pages returned beyond the limit of a dense-only search, so that a group of equal
scores at the cut (identical blank pages) is ordered here, not by where Qdrant cut it."""


def prefetch_for(pages: int) -> int:
    """First-stage candidates for a search over ``pages`` pages in scope.

    The page-image default's first stage ranks the exact top 10 lower as a store grows, so a
    fixed depth loses recall: at prefetch 200 recall@10 was 0.974 at 10,000 pages, 0.968 at
    25,000 and 0.932 at 100,000, where 300 gave 0.960 (``benchmarks/store_scale.py``). The depth
    grows as ``pages ** 0.4`` through 300 at 100,000 pages (the exponent from the depths that
    reach 0.95 at 25,000 and 100,000, about 150 and 270, interpolated), never below :data:`DEFAULT_PREFETCH`: 200 up to about
    36,000 pages, 470 at 300,000, 760 at 1,000,000. Checked at 300,000 pages (not fitted on):
    0.928 at 470 against 0.868 at 200, short of 0.95 at any depth measured there, so past about
    100,000 pages a store should be sharded. A small scope (one document, one tenant) keeps 200.
    """
    grown = PREFETCH_AT_100K * (max(pages, 0) / 100_000) ** PREFETCH_GROWTH
    return max(DEFAULT_PREFETCH, 10 * math.ceil(grown / 10))


def check_choice(name: str, value: str, choices: tuple[str, ...]) -> None:
    if value not in choices:
        raise StoreError(f"{name}={value!r} is not one of {', '.join(choices)}")


@dataclass(frozen=True)
class SearchPlan:
    """Everything a backend needs to build its batched Query API request.

    Dense branch: ``prefetch`` candidates by ``first_stage`` (on ``layout.first_stage_vector``),
    reranked by MaxSim of ``multi``. With ``sparse``: a lexical branch of the same depth, fused
    (RRF or DBSF) into ``limit`` results; each branch returns all ``prefetch`` candidates (a
    page's fused score needs its rank in both). Dense only: the rerank returns ``limit`` plus
    :data:`TIE_MARGIN`, so a quantized original is rescored on that many pages only, not on every
    candidate. ``where`` applies to every stage.
    """

    multi: np.ndarray
    first_stage: np.ndarray
    sparse: SparseVector | None
    where: FieldGroup
    limit: int
    prefetch: int
    fusion: Fusion
    idf_scope: IdfScope
    layout: MultivectorLayout

    @property
    def rerank_limit(self) -> int:
        """Pages the dense branch returns (see the class docstring)."""
        if self.sparse is not None:
            return self.prefetch
        return min(self.prefetch, self.limit + TIE_MARGIN)

    def with_depth(self, depth: int) -> SearchPlan:
        """This plan with ``depth`` first-stage candidates (never fewer than its results)."""
        return replace(self, prefetch=max(self.limit, depth))


def search_plan(
    query: PageEmbedding,
    *,
    dim: int,
    has_lexical: bool,
    limit: int,
    page_filter: PageFilter | None,
    prefetch_limit: int | None,
    fusion: Fusion,
    idf_scope: IdfScope,
    layout: MultivectorLayout,
) -> SearchPlan:
    if limit < 1:
        raise StoreError(f"search limit must be at least 1, got {limit}")
    if prefetch_limit is not None and prefetch_limit < 1:
        raise StoreError(f"prefetch_limit must be at least 1, got {prefetch_limit}")
    prefetch = max(limit, prefetch_limit if prefetch_limit is not None else DEFAULT_PREFETCH)
    vectors = checked_embedding(query, dim, use_sparse=has_lexical, what="query")
    return SearchPlan(
        multi=vectors.multi,
        first_stage=layout.query_first_stage(vectors.multi, vectors.pooled),
        sparse=vectors.sparse,
        where=scope_filter(KIND_PAGE, page_filter),
        limit=limit,
        prefetch=prefetch,
        fusion=fusion,
        idf_scope=idf_scope,
        layout=layout,
    )
