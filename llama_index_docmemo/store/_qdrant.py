"""The page-store behaviour both backends share, written once over a few point primitives.

Each backend (Qdrant Edge, qdrant-client) only translates :mod:`._layout` filters, points and
search plans into its own API; versions, schema points, ordering and validation live here,
so the backends cannot drift apart.
"""

from __future__ import annotations

import errno
import logging
from abc import abstractmethod
from collections.abc import Sequence
from dataclasses import replace
from typing import Any, Literal

from llama_index_docmemo.errors import StoreError
from llama_index_docmemo.faults import fault_point
from llama_index_docmemo.memory.schema import DocumentSchema
from llama_index_docmemo.store import _layout as L
from llama_index_docmemo.store import access
from llama_index_docmemo.store.base import PageStore
from llama_index_docmemo.types import (
    PageEmbedding,
    PageFilter,
    PageHit,
    PageRecord,
    PageRef,
    QueryEmbedding,
)

logger = logging.getLogger(__name__)
_REFILL_ROUNDS = 3


def _write_failure(location: str, doc_id: str, exc: BaseException) -> StoreError:
    """A failed write as a message a user can act on (disk full, read-only, other)."""
    code = getattr(exc, "errno", None)
    text = str(exc)
    if code == errno.ENOSPC or "No space left" in text:
        why = "the disk is full: free space and index it again"
    elif code == errno.EROFS or "Read-only file system" in text:
        why = "the file system is read-only: index into a writable folder"
    elif code == errno.EACCES or "Permission denied" in text:
        why = "permission denied: index into a folder you may write"
    else:
        why = text
    return StoreError(
        f"writing document {doc_id!r} to {location} failed ({why}); the document's previous "
        f"version, if any, is still stored and nothing else was changed [{text}]"
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
    exclusive: bool = False
    """True when this process alone writes the store (an embedded folder): searches then skip the
    journal look-up while no write of its own is in flight."""

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
        self._writes_in_flight = 0

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
    def _scroll(
        self, where: L.FilterSpec, fields: Sequence[str] | None = None
    ) -> list[dict[str, Any]]:
        """Payloads (only ``fields`` when given) of every point matching ``where``."""

    @abstractmethod
    def _set_payload(self, where: L.FilterSpec, payload: dict[str, Any]) -> None:
        """Add or overwrite ``payload`` keys on every point matching ``where``."""

    @abstractmethod
    def _create_index(self, key: str, kind: Literal["keyword", "integer"], is_tenant: bool) -> None:
        """Create a payload index (a no-op if it exists)."""

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
        """Compare the store's meta point with the encoder it is opened with; migrate layout 1."""
        payload = self._retrieve(L.STORE_POINT_ID)
        if payload is None:
            raise StoreError(f"{self.location} is not a docmemo page store (no store record)")
        self._meta.check(L.StoreMeta.from_payload(payload), self.location)
        layout = int(payload.get("layout", 1))
        if layout > L.LAYOUT_VERSION:
            raise StoreError(
                f"{self.location} was written by a newer llama-index-docmemo (store layout "
                f"{layout}, this version reads up to {L.LAYOUT_VERSION}): upgrade the package"
            )
        if layout < L.LAYOUT_VERSION:
            self._migrate_layout_1()

    def _migrate_layout_1(self) -> None:
        """Rewrite a 0.1.0 store in place: identity and access fields on every point.

        0.1.0 kept one document per bare doc id (file name), so each page belongs to the one
        record of its doc id; records move to their (tenant, doc id) point. Pages no record
        claims (left by a crash in 0.1.0) are deleted. Idempotent: an interrupted migration
        runs again on the next open.
        """
        for key, kind, is_tenant in L.PAYLOAD_INDEXES:
            self._create_index(key, kind, is_tenant)
        records = self._scroll(L.kind_filter(L.KIND_DOCUMENT))
        for payload in records:
            schema = L.schema_from_payload(payload)
            fields = L.document_payload(schema)
            page_fields = {k: fields[k] for k in (L.REVISION, *L.access_payload(None, "", ()))}
            self._set_payload(
                L.kind_filter(
                    L.KIND_PAGE, doc_id=[schema.doc_id], doc_version=[schema.doc_version]
                ),
                page_fields,
            )
            self._write([L.PointData(fields[access.DOC_KEY], {}, None, fields)])
            self._delete(
                L.FilterSpec(
                    must=(
                        L.Condition(L.KIND, (L.KIND_DOCUMENT,)),
                        L.Condition("doc_id", (schema.doc_id,)),
                    ),
                    empty=(access.DOC_KEY,),
                )
            )
        self._delete(
            L.FilterSpec(must=(L.Condition(L.KIND, (L.KIND_PAGE,)),), empty=(access.DOC_KEY,))
        )
        self._write([self._meta_point()])
        logger.warning(
            "%s: migrated %d documents from the 0.1.0 layout (doc ids kept as stored)",
            self.location,
            len(records),
        )

    # ------------------------------------------------------------ crash safety

    def _recover(self, doc_key: str) -> bool:
        """Finish or undo an interrupted write of one document; True if there was one.

        The document record is the commit point: pages of any other revision than the one it
        names (a half-written new one, or the superseded one) are deleted.
        """
        if self._retrieve(L.journal_point_id(doc_key)) is None:
            return False
        record = self._retrieve(doc_key)
        keep = None if record is None else str(record.get(L.REVISION))
        self._delete(L.stale_pages_filter(doc_key, keep))
        self._delete(L.kind_filter(L.KIND_JOURNAL, **{access.DOC_KEY: [doc_key]}))
        return True

    def recover(self) -> int:
        """Clean every interrupted write (a crash mid-index); returns how many there were.

        Embedded stores run it when opened (one process owns the folder); on a shared server
        each document is recovered when it is next written.
        """
        notes = self._scroll(L.kind_filter(L.KIND_JOURNAL), fields=[access.DOC_KEY])
        done = sum(self._recover(str(note[access.DOC_KEY])) for note in notes)
        if done:
            logger.warning("%s: cleaned %d interrupted document writes", self.location, done)
        return done

    def _visible(self, payloads: Sequence[dict[str, Any]]) -> list[bool]:
        """Which page payloads belong to their document's committed revision.

        Only documents with a journal note (a write in progress, or a crash not yet recovered)
        can have other pages, so the usual cost is one empty look-up.
        """
        if self.exclusive and self._writes_in_flight == 0:
            return [True] * len(payloads)  # recovered at open, nobody else writes
        keys = sorted({str(p.get(access.DOC_KEY)) for p in payloads})
        if not keys:
            return []
        notes = self._scroll(
            L.kind_filter(L.KIND_JOURNAL, **{access.DOC_KEY: keys}), fields=[access.DOC_KEY]
        )
        in_flux = {str(n[access.DOC_KEY]) for n in notes}
        committed: dict[str, str | None] = {}
        for key in in_flux:
            record = self._retrieve(key)
            committed[key] = None if record is None else str(record.get(L.REVISION))
        return [
            str(p.get(access.DOC_KEY)) not in in_flux
            or committed[str(p.get(access.DOC_KEY))] == p.get(L.REVISION)
            for p in payloads
        ]

    def _visible_hits(
        self, plan: L.SearchPlan, scored: list[tuple[dict[str, Any], float]]
    ) -> tuple[list[tuple[dict[str, Any], float]], L.SearchPlan | None]:
        """Committed hits, and a wider plan to run when hidden pages left fewer than asked."""
        keep = self._visible([payload for payload, _ in scored])
        kept = [hit for hit, ok in zip(scored, keep, strict=True) if ok]
        hidden = len(scored) - len(kept)
        if hidden == 0 or len(scored) < plan.limit:
            return kept, None
        return kept, replace(plan, limit=plan.limit + hidden, prefetch=plan.prefetch + hidden)

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
        """Journal, pages, record (the commit), stale pages out, journal out.

        A crash or failed write at any step leaves the previous revision visible and complete;
        the next open (embedded) or write of the document (server) cleans the rest.
        """
        page_points, record = L.document_points(
            schema, pages, embeddings, dim=self.dim, use_sparse=self.sparse
        )
        doc_key = record.id
        rev = str(record.payload[L.REVISION])
        self._writes_in_flight += 1
        try:
            self._recover(doc_key)
            self._write([L.journal_point(doc_key, rev)])
            fault_point("journal-written")
            for start in range(0, len(page_points), self.write_batch):
                self._write(page_points[start : start + self.write_batch])
                if start == 0:
                    fault_point("pages-partial")
            fault_point("pages-written")
            self._write([record])
            fault_point("record-written")
            self._delete(L.stale_pages_filter(doc_key, rev))
            fault_point("stale-deleted")
            self._delete(L.kind_filter(L.KIND_JOURNAL, **{access.DOC_KEY: [doc_key]}))
        except (OSError, StoreError) as exc:
            try:
                self._recover(doc_key)
            except Exception:  # the disk may still be full: the next open recovers
                logger.warning(
                    "%s: cleanup of %s deferred to the next open", self.location, doc_key
                )
            raise _write_failure(self.location, schema.doc_id, exc) from exc
        finally:
            self._writes_in_flight -= 1

    def document_version(self, doc_id: str, *, tenant: str | None = None) -> str | None:
        payload = self._retrieve(L.document_point_id(tenant, doc_id))
        return None if payload is None else str(payload["doc_version"])

    def get_schema(self, doc_id: str, *, tenant: str | None = None) -> DocumentSchema | None:
        payload = self._retrieve(L.document_point_id(tenant, doc_id))
        return None if payload is None else L.schema_from_payload(payload)

    def list_documents(self, page_filter: PageFilter | None = None) -> list[DocumentSchema]:
        if L.matches_nothing(page_filter):
            return []
        payloads = self._scroll(L.scope_filter(L.KIND_DOCUMENT, page_filter))
        return sorted((L.schema_from_payload(p) for p in payloads), key=lambda s: s.doc_id)

    def delete_document(self, doc_id: str, *, tenant: str | None = None) -> bool:
        """Record first (the document disappears at once), then its pages; crash-safe."""
        doc_key = L.document_point_id(tenant, doc_id)
        self._writes_in_flight += 1
        try:
            if self._retrieve(doc_key) is None:
                self._recover(doc_key)
                return False
            self._write([L.journal_point(doc_key, None)])
            self._delete(L.kind_filter(L.KIND_DOCUMENT, **{access.DOC_KEY: [doc_key]}))
            self._delete(L.stale_pages_filter(doc_key, None))
            self._delete(L.kind_filter(L.KIND_JOURNAL, **{access.DOC_KEY: [doc_key]}))
            return True
        finally:
            self._writes_in_flight -= 1

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
        wider: L.SearchPlan | None = plan
        kept: list[tuple[dict[str, Any], float]] = []
        for _ in range(_REFILL_ROUNDS):
            if wider is None:
                break
            kept, wider = self._visible_hits(wider, self._query(wider))
        return self._hits(kept[:limit])

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
        payloads = self._scroll(where)
        for payload, visible in zip(payloads, self._visible(payloads), strict=True):
            if visible:
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
        ids = {
            r.ref: L.page_point_id(
                access.document_key(r.tenant, r.doc_id), L.revision(r.doc_version, r.acl), r.page
            )
            for r in records
        }
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
        scored = self._feedback_query(plan)
        scored = [
            hit for hit, ok in zip(scored, self._visible([p for p, _ in scored]), strict=True) if ok
        ]
        hits = [h for h in self._hits(scored) if h.ref not in examples]
        hits.sort(key=lambda h: (-h.score, h.record.doc_id, h.record.page))
        return hits[:limit]
