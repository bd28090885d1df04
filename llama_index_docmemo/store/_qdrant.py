"""The page-store behaviour both backends share, written once over a few point primitives.

Each backend (Qdrant Edge, qdrant-client) only translates :mod:`._layout` filters, points and
search plans into its own API; versions, schema points, ordering and validation live here,
so the backends cannot drift apart.
"""

from __future__ import annotations

from abc import abstractmethod
from collections.abc import Sequence
from typing import Any

from llama_index_docmemo.errors import StoreError
from llama_index_docmemo.memory.schema import DocumentSchema
from llama_index_docmemo.store import _layout as L
from llama_index_docmemo.store.base import PageStore
from llama_index_docmemo.types import (
    PageEmbedding,
    PageFilter,
    PageHit,
    PageRecord,
    PageRef,
    QueryEmbedding,
)


class QdrantLayoutStore(PageStore):
    """Template for a store that keeps :mod:`._layout`'s points in one Qdrant collection/shard.

    Args:
        encoder_name / dim / sparse: the encoder the store is (or was) filled with.
        fusion: how the dense and lexical branches are fused ("rrf" or "dbsf").
        idf_scope: "filter" computes the lexical IDF over the pages the query may see (no
            statistics leak across tenants, per-document BM25 when searching one document);
            "collection" over every page stored.
    """

    write_batch: int = 64

    def __init__(
        self,
        *,
        encoder_name: str,
        dim: int,
        sparse: bool,
        fusion: L.Fusion,
        idf_scope: L.IdfScope,
    ) -> None:
        if dim < 1:
            raise StoreError(f"dim must be positive, got {dim}")
        L.check_choice("fusion", fusion, L.FUSIONS)
        L.check_choice("idf_scope", idf_scope, L.IDF_SCOPES)
        self.encoder_name = encoder_name
        self.dim = dim
        self.sparse = sparse
        self.fusion: L.Fusion = fusion
        self.idf_scope: L.IdfScope = idf_scope
        self._meta = L.StoreMeta(encoder_name, dim, sparse)

    # ------------------------------------------------------------ primitives

    @property
    @abstractmethod
    def location(self) -> str:
        """Where the store lives (path or URL + collection), for error messages."""

    @abstractmethod
    def _write(self, points: Sequence[L.PointData]) -> None:
        """Upsert points (durably, before returning)."""

    @abstractmethod
    def _delete(self, where: L.FilterSpec) -> None:
        """Delete every point matching ``where``."""

    @abstractmethod
    def _scroll(self, where: L.FilterSpec) -> list[dict[str, Any]]:
        """Payloads of every point matching ``where``."""

    @abstractmethod
    def _count(self, where: L.FilterSpec) -> int:
        """Exact number of points matching ``where``."""

    @abstractmethod
    def _retrieve(self, point_id: str) -> dict[str, Any] | None:
        """Payload of one point, or None if absent."""

    @abstractmethod
    def _query(self, plan: L.SearchPlan) -> list[tuple[dict[str, Any], float]]:
        """(payload, score) of the best points for ``plan``, best first."""

    @abstractmethod
    def _vectors(self, point_ids: Sequence[str], using: str) -> dict[str, L.Vector]:
        """The stored ``using`` vector of each existing point, by id."""

    @abstractmethod
    def _feedback_query(self, plan: L.FeedbackPlan) -> list[tuple[dict[str, Any], float]]:
        """(payload, score) of the best points for a recommend / discovery plan, best first."""

    # ------------------------------------------------------------ shared logic

    def _check_meta(self) -> None:
        """Compare the store's meta point with the encoder it is opened with."""
        payload = self._retrieve(L.STORE_POINT_ID)
        if payload is None:
            raise StoreError(f"{self.location} is not a docmemo page store (no store record)")
        self._meta.check(L.StoreMeta.from_payload(payload), self.location)

    def _meta_point(self) -> L.PointData:
        return L.PointData(L.STORE_POINT_ID, {}, None, self._meta.payload())

    def _plan(
        self,
        query: QueryEmbedding,
        limit: int,
        page_filter: PageFilter | None,
        prefetch_limit: int | None,
    ) -> L.SearchPlan:
        return L.search_plan(
            query,
            dim=self.dim,
            has_lexical=self.sparse,
            limit=limit,
            page_filter=page_filter,
            prefetch_limit=prefetch_limit,
            fusion=self.fusion,
            idf_scope=self.idf_scope,
        )

    @staticmethod
    def _hits(scored: list[tuple[dict[str, Any], float]]) -> list[PageHit]:
        return [PageHit(L.record_from_payload(payload), score) for payload, score in scored]

    def upsert_document(
        self,
        schema: DocumentSchema,
        pages: Sequence[PageRecord],
        embeddings: Sequence[PageEmbedding],
    ) -> None:
        page_points, schema_point = L.document_points(
            schema, pages, embeddings, dim=self.dim, use_sparse=self.sparse
        )
        for start in range(0, len(page_points), self.write_batch):
            self._write(page_points[start : start + self.write_batch])
        self._write([schema_point])
        self._delete(L.stale_pages_filter(schema.doc_id, schema.doc_version))

    def document_version(self, doc_id: str) -> str | None:
        payload = self._retrieve(L.document_point_id(doc_id))
        return None if payload is None else str(payload["doc_version"])

    def get_schema(self, doc_id: str) -> DocumentSchema | None:
        payload = self._retrieve(L.document_point_id(doc_id))
        return None if payload is None else L.schema_from_payload(payload)

    def list_documents(self, page_filter: PageFilter | None = None) -> list[DocumentSchema]:
        if L.matches_nothing(page_filter):
            return []
        payloads = self._scroll(L.scope_filter(L.KIND_DOCUMENT, page_filter))
        return sorted((L.schema_from_payload(p) for p in payloads), key=lambda s: s.doc_id)

    def delete_document(self, doc_id: str) -> None:
        self._delete(L.document_filter(doc_id))

    def search(
        self,
        query: QueryEmbedding,
        *,
        limit: int,
        page_filter: PageFilter | None = None,
        prefetch_limit: int | None = None,
    ) -> list[PageHit]:
        plan = self._plan(query, limit, page_filter, prefetch_limit)
        if L.matches_nothing(page_filter):
            return []
        return self._hits(self._query(plan))

    def get_pages(
        self, refs: Sequence[PageRef], page_filter: PageFilter | None = None
    ) -> list[PageRecord]:
        """Existing pages of ``refs`` passing the filter, in the order of ``refs`` (each once)."""
        wanted = list(dict.fromkeys(refs))
        if not wanted or L.matches_nothing(page_filter):
            return []
        where = L.scope_filter(
            L.KIND_PAGE,
            page_filter,
            doc_id=sorted({ref.doc_id for ref in wanted}),
            page=sorted({ref.page for ref in wanted}),
        )
        found: dict[PageRef, PageRecord] = {}
        for payload in self._scroll(where):
            record = L.record_from_payload(payload)
            found.setdefault(record.ref, record)
        return [found[ref] for ref in wanted if ref in found]

    def count_pages(self, page_filter: PageFilter | None = None) -> int:
        if L.matches_nothing(page_filter):
            return 0
        return self._count(L.scope_filter(L.KIND_PAGE, page_filter))

    def feedback_search(
        self,
        positive: Sequence[PageRef],
        negative: Sequence[PageRef] = (),
        *,
        limit: int,
        page_filter: PageFilter | None = None,
        using: str = "pooled",
        strategy: str = "best_score",
        target: QueryEmbedding | None = None,
    ) -> list[PageHit]:
        """Recommend / discovery on stored page vectors; examples pass ``page_filter`` too.

        Examples are looked up through the filter (a page the caller may not see is no example),
        their stored vectors are sent as the query, and example pages are dropped from the
        result. Ties are broken by document and page, so the result is deterministic.
        """
        L.check_feedback(using, strategy, limit)
        positive = list(dict.fromkeys(positive))
        negative = [r for r in dict.fromkeys(negative) if r not in set(positive)]
        if not positive or L.matches_nothing(page_filter):
            return []
        records = self.get_pages([*positive, *negative], page_filter)
        ids = {r.ref: L.page_point_id(r.doc_id, r.doc_version, r.page) for r in records}
        vectors = self._vectors(sorted(set(ids.values())), L.feedback_vector_name(using))
        pos = [vectors[ids[r]] for r in positive if r in ids and ids[r] in vectors]
        neg = [vectors[ids[r]] for r in negative if r in ids and ids[r] in vectors]
        if not pos:
            return []
        plan = L.feedback_plan(
            pos,
            neg,
            target=target,
            dim=self.dim,
            using=using,
            strategy=strategy,
            page_filter=page_filter,
            limit=limit + len(ids),
        )
        examples = set(ids)
        hits = [h for h in self._hits(self._feedback_query(plan)) if h.ref not in examples]
        hits.sort(key=lambda h: (-h.score, h.record.doc_id, h.record.page))
        return hits[:limit]
