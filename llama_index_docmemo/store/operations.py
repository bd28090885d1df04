"""What a store step asks of a backend, as plain data: the operations, and a search's plan.

A step of :class:`~._qdrant.QdrantLayoutStore` (sans-I/O) yields each operation as a
:class:`~llama_index_docmemo.step_runtime.Call` of its backend (``send``: the store's
``_send``), so the store's steps are steps like any other of the package, run by the one sync
or async driver of :mod:`llama_index_docmemo.step_runtime`: the embedded backend
(:mod:`.edge`) applies an operation to its shard, the server backend (:mod:`.client`) sends it
as one qdrant-client request, sync or async, so no step is written twice.

``route`` names the tenant (its stored key, :func:`.ids.tenant_key`) an operation concerns,
or None for every tenant: a server collection sharded by tenant sends it as the shard key.

A search's plan has a dense branch (first-stage HNSW candidates reranked by MaxSim on the
original multivector) and, for a store with lexical vectors, a lexical branch of the same depth.
Both branches go to Qdrant in one batched request; :mod:`.reads` fuses their answers.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Sequence
from dataclasses import dataclass, replace
from typing import Any, Literal

import numpy as np

from llama_index_docmemo.errors import StoreError
from llama_index_docmemo.step_runtime import Call, Steps
from llama_index_docmemo.store.layouts import MultivectorLayout
from llama_index_docmemo.store.points import KIND_PAGE, IndexKind, PointData, checked_embedding
from llama_index_docmemo.store.scope import PageFilter, scope_filter
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


@dataclass(frozen=True)
class Upsert:
    """Write points (durably, before the reply)."""

    points: Sequence[PointData]
    route: str | None = None


@dataclass(frozen=True)
class Delete:
    """Delete every point matching ``where``."""

    where: FieldGroup
    route: str | None = None


@dataclass(frozen=True)
class SetPayload:
    """Add or overwrite ``payload`` keys on every point matching ``where``."""

    where: FieldGroup
    payload: dict[str, Any]
    route: str | None = None


@dataclass(frozen=True)
class CreateIndex:
    """Create a payload index (a no-op if it exists)."""

    key: str
    kind: IndexKind
    is_tenant: bool


@dataclass(frozen=True)
class Commit:
    """Make a written revision the document's: its record (the commit point), then the other
    revisions' pages deleted, then ``pending`` cleared on its pages, then the journal note
    deleted. A server gets these in one request; an embedded shard applies them in order.
    ``record`` None: the record is stored already (recovery finishes its commit; rewriting it
    from its payload would drop its card's vectors)."""

    record: PointData | None
    doc_key: str
    revision: str
    route: str | None = None


@dataclass(frozen=True)
class Scroll:
    """One page of payloads matching ``where`` -> ``(payloads, next offset or None)``."""

    where: FieldGroup
    fields: Sequence[str] | None
    offset: Any
    limit: int
    route: str | None = None


@dataclass(frozen=True)
class Count:
    """Number of points matching ``where`` -> ``int``; with ``exact=False`` Qdrant's estimate
    from its payload indexes (what its query planner uses), which costs no scan."""

    where: FieldGroup
    route: str | None = None
    exact: bool = True


@dataclass(frozen=True)
class Retrieve:
    """The payload of one point -> ``dict`` or ``None``."""

    point_id: str
    route: str | None = None


@dataclass(frozen=True)
class Search:
    """Every branch of ``plan`` in one request -> one ``[(payload, score), ...]`` per branch."""

    plan: SearchPlan
    route: str | None = None


Operation = Upsert | Delete | SetPayload | CreateIndex | Commit | Scroll | Count | Retrieve | Search
Send = Callable[[Operation], Call]
"""A store's ``_send``: the call of its backend that performs one operation."""


SCROLL_PAGE = 256


def scroll_all(
    send: Send, where: FieldGroup, fields: Sequence[str] | None = None, route: str | None = None
) -> Steps[list[dict]]:
    """Every payload matching ``where`` (only ``fields`` when given), page by page."""
    payloads: list[dict[str, Any]] = []
    offset: Any = None
    while True:
        page, offset = yield send(Scroll(where, fields, offset, SCROLL_PAGE, route))
        payloads.extend(page)
        if offset is None:
            return payloads
