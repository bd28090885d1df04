"""Reading a page store, written once as steps: searches, page fetches, counts, schemas.

A search is one request (:class:`~.operations.Search`: every branch of its plan) whose answer
is turned into hits here: each branch ranked and the branches fused deterministically, each
payload read back into a :class:`~llama_index_docmemo.types.PageRecord`. Qdrant leaves the order
of equal scores to chance (segment and hash-map order), so the branches come back whole and are
ranked and fused here: the same query on the same store gives the same ranking and scores in
every process, on either backend. A backend only performs the operations (``_execute``, and
``_aexecute`` where it has a native async client); the sync and async reads run the same steps.
"""

from __future__ import annotations

from abc import abstractmethod
from collections.abc import Sequence
from dataclasses import replace
from typing import Any

import numpy as np

from llama_index_docmemo.memory.schema import DocumentSchema
from llama_index_docmemo.step_runtime import Call, Steps, arun, run
from llama_index_docmemo.store import operations as op
from llama_index_docmemo.store import scope
from llama_index_docmemo.store.base import PageStore
from llama_index_docmemo.store.layouts import MultivectorLayout
from llama_index_docmemo.store.operations import (
    Fusion,
    IdfScope,
    SearchPlan,
    prefetch_for,
    search_plan,
)
from llama_index_docmemo.store.points import (
    CARD_FIELDS,
    DOC_KEY,
    KIND_DOCUMENT,
    KIND_PAGE,
    REVISION,
    USER,
    StoredCard,
    StoreMeta,
    card_from_payload,
    document_point_id,
    schema_from_payload,
    tenant_key,
)
from llama_index_docmemo.store.scope import PageFilter
from llama_index_docmemo.types import PageHit, PageRecord, PageRef, QueryEmbedding

RRF_K = 2  # Qdrant's own default ranking constant, set explicitly so both backends agree
# RRF weights of the (dense, lexical) branches. With the CPU encoder the lexical branch carries
# most of the signal: on MMLongBench-Doc weight 3 gave recall@5 0.643 vs 0.622 with equal weights
# (benchmarks/retrieval_recall.py). A dense-only encoder (ColQwen) has no lexical branch.
RRF_WEIGHTS = [1.0, 3.0]

ScoredPayload = tuple[dict[str, Any], float]
TieKey = tuple[str, int, str, str]


def _tie_key(payload: dict[str, Any]) -> TieKey:
    """(doc_id, page), then the point's identity: two tenants' ``report.pdf`` p.1, or two
    revisions of one document during a write, are different points, never fused into one."""
    return (
        str(payload.get("doc_id", "")),
        int(payload.get("page", 0)),
        str(payload.get(DOC_KEY, "")),
        str(payload.get(REVISION, "")),
    )


def order_branch(scored: Sequence[ScoredPayload]) -> list[ScoredPayload]:
    """Best first; equal scores by (doc_id, page).

    Pages without text share one dense vector and are absent from the lexical branch, so whole
    groups tie; their rank decides their fused score, so each branch gets this fixed order first.
    """
    return sorted(scored, key=lambda hit: (-float(hit[1]), *_tie_key(hit[0])))


def rrf_score(rank: int, weight: float, k: int = RRF_K) -> float:
    """Qdrant's weighted RRF term for a 1-based rank: ``1 / (rank / weight + k - 1)``.

    With weight 1 this is the textbook ``1 / (k + rank - 1)``; the weighted form is the one
    qdrant-edge 0.9 computes (checked against its fused scores), so rankings match Qdrant's.
    """
    return 1.0 / (rank / weight + k - 1)


def _dbsf_normalised(scored: Sequence[ScoredPayload]) -> list[float]:
    """Qdrant's DBSF normalisation: (s - (mean - 3 sd)) / (6 sd), sample sd, not clipped.

    (Checked against qdrant-edge 0.9's fused scores.) A branch of one hit, or of equal scores,
    gives every hit 0.5.
    """
    values = np.asarray([float(score) for _, score in scored], dtype=np.float64)
    if values.size < 2 or float(values.std(ddof=1)) == 0.0:
        return [0.5] * int(values.size)
    mean, sd = float(values.mean()), float(values.std(ddof=1))
    return [float(v) for v in (values - (mean - 3.0 * sd)) / (6.0 * sd)]


def fuse_branches(
    branches: Sequence[Sequence[ScoredPayload]], plan: SearchPlan
) -> list[ScoredPayload]:
    """The plan's top ``limit`` pages from its branch results, deterministically.

    One branch (no lexical vector): that branch in :func:`order_branch` order. Two branches (dense,
    lexical): RRF with :data:`RRF_WEIGHTS` or DBSF over branches in that order; fused scores are
    summed in branch order (the same float result in every process) and ties are broken by
    (doc_id, page). Identical query + identical store -> identical ranking and scores.
    """
    ordered = [order_branch(branch) for branch in branches]
    if len(ordered) == 1:
        return ordered[0][: plan.limit]
    fused: dict[TieKey, float] = {}
    payloads: dict[TieKey, dict[str, Any]] = {}
    for index, branch in enumerate(ordered):
        if plan.fusion == "rrf":
            terms = [rrf_score(rank, RRF_WEIGHTS[index]) for rank in range(1, len(branch) + 1)]
        else:
            terms = _dbsf_normalised(branch)
        for (payload, _), term in zip(branch, terms, strict=True):
            key = _tie_key(payload)
            payloads.setdefault(key, payload)
            fused[key] = fused.get(key, 0.0) + term
    best = sorted(fused, key=lambda key: (-fused[key], *key))[: plan.limit]
    return [(payloads[key], fused[key]) for key in best]


def record_from_payload(payload: dict[str, Any]) -> PageRecord:
    """A page point's payload (:func:`.payloads.page_payload`) read back."""
    return PageRecord(
        doc_id=str(payload["doc_id"]),
        doc_version=str(payload["doc_version"]),
        page=int(payload["page"]),
        n_pages=int(payload["n_pages"]),
        text=str(payload.get("text", "")),
        source=str(payload.get("source", "")),
        section=str(payload.get("section", "")),
        tenant=payload.get("tenant"),
        acl=[str(group) for group in payload.get("acl") or []],
        width=float(payload.get("width", 0.0)),
        height=float(payload.get("height", 0.0)),
        ocr=bool(payload.get("ocr", False)),
        metadata=dict(payload.get(USER) or {}),
    )


def _hits(scored: Sequence[ScoredPayload]) -> list[PageHit]:
    return [PageHit(record_from_payload(payload), score) for payload, score in scored]


def _route(page_filter: PageFilter | None) -> str | None:
    """The tenant a scoped read concerns (None: the owner's view of every tenant)."""
    return None if page_filter is None else page_filter.route


def _nothing(page_filter: PageFilter | None) -> bool:
    return page_filter is not None and page_filter.matches_nothing


class QdrantReads(PageStore):
    """The reads of a store that keeps its points in one Qdrant collection or shard, and how its
    steps reach the backend (``_send``); the writes are :class:`~._qdrant.QdrantLayoutStore`'s."""

    dim: int
    sparse: bool
    fusion: Fusion
    idf_scope: IdfScope

    _meta: StoreMeta
    """What the store was created with (its store record), set by the store when it opens."""

    @property
    def layout(self) -> MultivectorLayout:
        """The multivector layout the store holds its pages in."""
        return self._meta.layout

    # ------------------------------------------------------------ what a backend provides

    @abstractmethod
    def _execute(self, operation: op.Operation) -> Any:
        """Perform one operation and return its reply (see :mod:`.operations`)."""

    async def _aexecute(self, operation: op.Operation) -> Any:
        """:meth:`_execute` off the event loop, on the thread :attr:`~.base.PageStore.holds_gil`
        says (a backend with a native async client overrides this)."""
        return await self._off_loop(self._execute, operation)

    def _send(self, operation: op.Operation) -> Call:
        """The call that performs ``operation``: what a store step yields for it (the reads' and
        the writes' alike)."""
        return Call(self._execute, self._aexecute, (operation,))

    # ------------------------------------------------------------ steps

    def _record_steps(self, doc_id: str, tenant: str | None) -> Steps[dict | None]:
        point = document_point_id(tenant, doc_id)
        return (yield self._send(op.Retrieve(point, tenant_key(tenant))))

    def _get_schema_steps(self, doc_id: str, tenant: str | None) -> Steps[DocumentSchema | None]:
        payload = yield from self._record_steps(doc_id, tenant)
        return None if payload is None else schema_from_payload(payload)

    def _list_documents_steps(self, page_filter: PageFilter | None) -> Steps[list[DocumentSchema]]:
        if _nothing(page_filter):
            return []
        payloads = yield from op.scroll_all(
            self._send, scope.scope_filter(KIND_DOCUMENT, page_filter), route=_route(page_filter)
        )
        return sorted((schema_from_payload(p) for p in payloads), key=lambda s: s.doc_id)

    def _plan(
        self,
        query: QueryEmbedding,
        limit: int,
        page_filter: PageFilter | None,
        prefetch_limit: int | None,
    ) -> SearchPlan:
        return search_plan(
            query,
            dim=self.dim,
            has_lexical=self.sparse,
            limit=limit,
            page_filter=page_filter,
            prefetch_limit=prefetch_limit,
            fusion=self.fusion,
            idf_scope=self.idf_scope,
            layout=self.layout,
        )

    def _search_steps(
        self,
        query: QueryEmbedding,
        limit: int,
        page_filter: PageFilter | None,
        prefetch_limit: int | None,
    ) -> Steps[list[PageHit]]:
        """One search request, the committed-revision condition part of its filter; without a
        ``prefetch_limit`` the depth for the scope comes first (:meth:`_search_depth_steps`)."""
        plan = self._plan(query, limit, page_filter, prefetch_limit)
        if _nothing(page_filter):
            return []
        if prefetch_limit is None:
            plan = plan.with_depth((yield from self._search_depth_steps(page_filter)))
        branches = yield self._send(op.Search(plan, _route(page_filter)))
        return _hits(fuse_branches(branches, plan))

    def _search_depth_steps(self, page_filter: PageFilter | None) -> Steps[int]:
        """:func:`.operations.prefetch_for` Qdrant's estimated count of the pages in scope: the
        payload-index estimate its query planner uses, no scan (0.02-0.06 ms on Edge against
        1.35 ms for an exact count of 3,000 pages)."""
        if _nothing(page_filter):
            return prefetch_for(0)
        where = scope.scope_filter(KIND_PAGE, page_filter)
        return prefetch_for((yield self._send(op.Count(where, _route(page_filter), exact=False))))

    def _get_pages_steps(
        self, refs: Sequence[PageRef], page_filter: PageFilter | None
    ) -> Steps[list[PageRecord]]:
        wanted = list(dict.fromkeys(refs))
        if not wanted or _nothing(page_filter):
            return []
        where = scope.scope_filter(
            KIND_PAGE,
            page_filter,
            doc_id=sorted({ref.doc_id for ref in wanted}),
            page=sorted({ref.page for ref in wanted}),
        )
        found: dict[PageRef, PageRecord] = {}
        for payload in (yield from op.scroll_all(self._send, where, route=_route(page_filter))):
            record = record_from_payload(payload)
            found.setdefault(record.ref, record)
        return [found[ref] for ref in wanted if ref in found]

    def _count_pages_steps(self, page_filter: PageFilter | None) -> Steps[int]:
        if _nothing(page_filter):
            return 0
        where = scope.scope_filter(KIND_PAGE, page_filter)
        return (yield self._send(op.Count(where, _route(page_filter))))

    # ------------------------------------------------------------ the PageStore reads

    def _list_cards_steps(self, page_filter: PageFilter | None) -> Steps[list[StoredCard]]:
        """The cards of the documents ``page_filter`` admits (one request a few hundred
        documents: only the schema and the card of each record are read), by document id."""
        if _nothing(page_filter):
            return []
        payloads = yield from op.scroll_all(
            self._send,
            scope.scope_filter(KIND_DOCUMENT, page_filter),
            fields=CARD_FIELDS,
            route=_route(page_filter),
        )
        found = (card_from_payload(p) for p in payloads)
        return sorted(found, key=lambda c: c.schema.doc_id)

    def _search_cards_steps(
        self, query: QueryEmbedding, limit: int, page_filter: PageFilter | None
    ) -> Steps[list[tuple[StoredCard, float]]]:
        """The best cards for ``query`` (one request: the page search's dense and lexical
        branches turned to the cards of the documents ``page_filter`` admits, fused as pages
        are; the lexical IDF, when scoped by the filter, is then over those cards), best
        first."""
        if _nothing(page_filter):
            return []
        cards = scope.scope_filter(KIND_DOCUMENT, page_filter)
        plan = replace(self._plan(query, limit, page_filter, None), where=cards)
        branches = yield self._send(op.Search(plan, _route(page_filter)))
        return [(card_from_payload(p), s) for p, s in fuse_branches(branches, plan)]

    def document_version(self, doc_id: str, *, tenant: str | None = None) -> str | None:
        payload = run(self._record_steps(doc_id, tenant))
        return None if payload is None else str(payload["doc_version"])

    def get_schema(self, doc_id: str, *, tenant: str | None = None) -> DocumentSchema | None:
        return run(self._get_schema_steps(doc_id, tenant))

    def list_documents(self, page_filter: PageFilter | None = None) -> list[DocumentSchema]:
        return run(self._list_documents_steps(page_filter))

    def search(
        self,
        query: QueryEmbedding,
        *,
        limit: int,
        page_filter: PageFilter | None = None,
        prefetch_limit: int | None = None,
    ) -> list[PageHit]:
        return run(self._search_steps(query, limit, page_filter, prefetch_limit))

    def list_cards(self, page_filter: PageFilter | None = None) -> list[StoredCard]:
        """The stored cards of the documents ``page_filter`` admits, in one request."""
        return run(self._list_cards_steps(page_filter))

    def search_cards(
        self, query: QueryEmbedding, *, limit: int, page_filter: PageFilter | None = None
    ) -> list[tuple[StoredCard, float]]:
        """The ``limit`` best cards for ``query`` (dense and lexical, fused), one request."""
        return run(self._search_cards_steps(query, limit, page_filter))

    def get_pages(
        self, refs: Sequence[PageRef], page_filter: PageFilter | None = None
    ) -> list[PageRecord]:
        """Existing pages of ``refs`` passing the filter, in the order of ``refs`` (each once)."""
        return run(self._get_pages_steps(refs, page_filter))

    def count_pages(self, page_filter: PageFilter | None = None) -> int:
        return run(self._count_pages_steps(page_filter))

    def search_depth(self, page_filter: PageFilter | None = None) -> int:
        return run(self._search_depth_steps(page_filter))

    async def _aread(self, method: str, *args: Any, **kwargs: Any) -> Any:
        """The read's steps (``_<method>_steps``, the same the sync method runs) on the async
        driver: each operation on the backend's async call (``_aexecute``)."""
        return await arun(getattr(self, f"_{method}_steps")(*args, **kwargs))
