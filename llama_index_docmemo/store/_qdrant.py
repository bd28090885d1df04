"""The page-store behaviour both backends share, written once as steps over a few operations.

Each step (upsert, delete, search, page fetch, recovery, migration) is a generator of
:mod:`.operations`; a backend only sends operations (``_execute``, and ``_aexecute`` where it has
a native async client). Versions, schema points, ordering and validation live here, so the
backends cannot drift apart, and the sync and async paths run the very same steps.
"""

from __future__ import annotations

import errno
import logging
from abc import abstractmethod
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from dataclasses import replace
from typing import Any

from llama_index_docmemo.errors import NoStoreError, StoreError
from llama_index_docmemo.faults import fault_point
from llama_index_docmemo.memory.schema import DocumentSchema
from llama_index_docmemo.step_runtime import run
from llama_index_docmemo.store import cards, ids, scope
from llama_index_docmemo.store import operations as op
from llama_index_docmemo.store.base import PageStore
from llama_index_docmemo.store.branch_fusion import fuse_branches
from llama_index_docmemo.store.cards import StoredCard
from llama_index_docmemo.store.layouts import DEFAULT_LAYOUT, MultivectorLayout
from llama_index_docmemo.store.metadata import index_kind
from llama_index_docmemo.store.migrations import migration_steps
from llama_index_docmemo.store.payloads import (
    DOC_KEY,
    KIND_DOCUMENT,
    KIND_PAGE,
    LAYOUT_VERSION,
    PAYLOAD_INDEXES,
    REVISION,
    TENANT_KEY,
    PointData,
    StoreMeta,
    journal_point,
    record_from_payload,
    schema_from_payload,
)
from llama_index_docmemo.store.plans import (
    FUSIONS,
    IDF_SCOPES,
    Fusion,
    IdfScope,
    SearchPlan,
    check_choice,
    prefetch_for,
    search_plan,
)
from llama_index_docmemo.store.scope import PageFilter
from llama_index_docmemo.store.validation import document_points
from llama_index_docmemo.types import PageEmbedding, PageHit, PageRecord, PageRef, QueryEmbedding

logger = logging.getLogger(__name__)


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


def _route(page_filter: PageFilter | None) -> str | None:
    """The tenant a scoped read concerns (None: the owner's view of every tenant)."""
    return None if page_filter is None else page_filter.route


def _nothing(page_filter: PageFilter | None) -> bool:
    return page_filter is not None and page_filter.matches_nothing


def _hits(scored: Sequence[tuple[dict[str, Any], float]]) -> list[PageHit]:
    return [PageHit(record_from_payload(payload), score) for payload, score in scored]


class QdrantLayoutStore(PageStore):
    """Template for a store that keeps the layout's points in one Qdrant collection or shard.

    Args:
        encoder_name / dim / sparse / encoder_settings: the encoder the store is (or was)
            filled with; ``encoder_name=None``: the one an existing store records (a new store
            needs one).
        fusion: how the dense and lexical branches are fused ("rrf" or "dbsf").
        idf_scope: "filter" computes the lexical IDF over the pages the query may see (no
            statistics leak across tenants, per-document BM25 when searching one document);
            "collection" over every page stored.
        layout: the multivector layout the store must have; None: the one an existing store
            was created with, or ``default_layout`` for a new one.
        default_layout: the layout of a new store when ``layout`` is None.
    """

    max_batch_points: int = 256
    max_batch_bytes: int = 64 << 20

    def __init__(
        self,
        *,
        encoder_name: str | None,
        dim: int | None,
        sparse: bool | None,
        fusion: Fusion,
        idf_scope: IdfScope,
        layout: MultivectorLayout | None,
        default_layout: MultivectorLayout = DEFAULT_LAYOUT,
        encoder_settings: dict[str, Any] | None = None,
    ) -> None:
        if encoder_name is not None and (dim is None or dim < 1):
            raise StoreError(f"dim must be positive, got {dim}")
        check_choice("fusion", fusion, FUSIONS)
        check_choice("idf_scope", idf_scope, IDF_SCOPES)
        self.adopts_encoder = encoder_name is None
        self.encoder_name = encoder_name or ""
        self.dim = dim or 0
        self.sparse = bool(sparse)
        self.fusion: Fusion = fusion
        self.idf_scope: IdfScope = idf_scope
        self._requested_layout = layout
        self._meta = StoreMeta(
            self.encoder_name,
            self.dim,
            self.sparse,
            layout or default_layout,
            dict(encoder_settings or {}),
        )
        self._bulk_depth = 0
        self._user_indexes: set[str] = set()  # user metadata keys indexed by this process

    @property
    def layout(self) -> MultivectorLayout:
        """The multivector layout the store holds its pages in."""
        return self._meta.layout

    @property
    def encoder_settings(self) -> dict[str, Any]:
        return dict(self._meta.encoder_settings)

    def _no_store(self) -> NoStoreError:
        """Opened without an encoder where there is no store yet."""
        return NoStoreError(
            f"{self.location} holds no page store yet: give the encoder that will fill it "
            "(open_store(..., encoder=default_encoder()))"
        )

    # ------------------------------------------------------------ what a backend provides

    @property
    @abstractmethod
    def location(self) -> str:
        """Where the store lives (path or URL + collection), for error messages."""

    @abstractmethod
    def _execute(self, operation: op.Operation) -> Any:
        """Send one operation and return its reply (see :mod:`.operations`)."""

    async def _arun(self, steps: op.Steps[op.T]) -> op.T:
        """Run a step off the event loop (a backend with a native async client overrides this),
        on the thread :attr:`~.base.PageStore.holds_gil` says."""
        return await self._off_loop(self._run, steps)

    def _begin_bulk_load(self) -> None:
        """Defer index building until :meth:`_end_bulk_load`."""

    def _end_bulk_load(self) -> None:
        """Build (or restore the building of) the deferred indexes."""

    # ------------------------------------------------------------ driver

    def _run(self, steps: op.Steps[op.T]) -> op.T:
        """Run a step, sending each operation it yields; a failed one is raised inside the step."""
        return run(steps, self._execute)

    # ------------------------------------------------------------ steps

    def _open_steps(self) -> op.Steps[None]:
        """Check the store record against the encoder and layout; migrate older layouts."""
        payload = yield op.Retrieve(ids.STORE_POINT_ID)
        if payload is None:
            raise StoreError(f"{self.location} is not a docmemo page store (no store record)")
        stored = StoreMeta.from_payload(payload)
        if self.adopts_encoder:
            self.encoder_name, self.dim, self.sparse = (
                stored.encoder_name,
                stored.dim,
                stored.sparse,
            )
            self._meta = replace(stored, layout=self._requested_layout or stored.layout)
        else:
            layout = self._requested_layout or stored.layout
            settings = stored.encoder_settings or self._meta.encoder_settings  # 0.1.0: none
            self._meta = replace(self._meta, layout=layout, encoder_settings=settings)
        self._meta.check(stored, self.location)
        version = int(payload.get("layout", 1))
        if version > LAYOUT_VERSION:
            raise StoreError(
                f"{self.location} was written by a newer llama-index-docmemo (store layout "
                f"{version}, this version reads up to {LAYOUT_VERSION}): upgrade the package"
            )
        if version < LAYOUT_VERSION:
            migrated = yield from migration_steps(version, lexical=self.sparse)
            yield op.Upsert([self._meta.point()])
            logger.warning(
                "%s: migrated %d documents from store layout %d to %d in place",
                self.location,
                migrated,
                version,
                LAYOUT_VERSION,
            )

    def _create_steps(self) -> op.Steps[None]:
        """Payload indexes and the store record of a new store."""
        for key, kind, is_tenant in PAYLOAD_INDEXES:
            yield op.CreateIndex(key, kind, is_tenant)
        yield op.Upsert([self._meta.point()])

    def _recover_steps(self, doc_key: str, route: str | None) -> op.Steps[bool]:
        """Finish or undo an interrupted write of one document; True if there was one.

        The document record is the commit point: pages of any other revision than the one it
        names (a half-written new one, or the superseded one) are deleted, and its own pages are
        released (a crash may have come between the commit and their release).
        """
        if (yield op.Retrieve(ids.journal_point_id(doc_key), route)) is None:
            return False
        record = yield op.Retrieve(doc_key, route)
        if record is None:
            yield op.Delete(scope.stale_pages_filter(doc_key, None), route)
            yield op.Delete(scope.journal_filter([doc_key]), route)
        else:
            rev = str(record[REVISION])
            yield op.Commit(None, doc_key, rev, route)  # the record stays, vectors and all
        return True

    def _recover_all_steps(self) -> op.Steps[int]:
        notes = yield from op.scroll_all(scope.journal_filter(), fields=[DOC_KEY, TENANT_KEY])
        done = 0
        for note in notes:
            route = note.get(TENANT_KEY)  # absent in notes of layout 2: every shard
            done += yield from self._recover_steps(str(note[DOC_KEY]), route)
        return done

    def _batches(self, points: Sequence[PointData]) -> Iterator[list[PointData]]:
        """Points in write batches: at most :attr:`max_batch_points` and about
        :attr:`max_batch_bytes` (a ColQwen page is ~0.4 MB of float32, ~1.3 MB as JSON)."""
        batch: list[PointData] = []
        size = 0
        for point in points:
            point_size = sum(v.nbytes for v in point.dense.values()) + 4096
            if batch and (
                len(batch) >= self.max_batch_points or size + point_size > self.max_batch_bytes
            ):
                yield batch
                batch, size = [], 0
            batch.append(point)
            size += point_size
        if batch:
            yield batch

    def _user_index_steps(self, pages: Sequence[PageRecord]) -> op.Steps[None]:
        """A payload index for each user metadata key not indexed yet (typed by its first
        value), so filters on the app's keys stay indexed as the store grows."""
        for page in pages:
            for key, value in page.metadata.items():
                kind = index_kind(value)
                if kind is not None and key not in self._user_indexes:
                    yield op.CreateIndex(scope.payload_key(key), kind, False)
                    self._user_indexes.add(key)

    def _upsert_steps(
        self,
        schema: DocumentSchema,
        pages: Sequence[PageRecord],
        embeddings: Sequence[PageEmbedding],
    ) -> op.Steps[None]:
        page_points, record = document_points(
            schema, pages, embeddings, dim=self.dim, use_sparse=self.sparse, layout=self.layout
        )
        dense = cards.first_page_vectors(pages, page_points)
        record = cards.with_card(record, schema, pages, dense, lexical=self.sparse)
        yield from self._user_index_steps(pages)
        doc_key = record.id
        rev = str(record.payload[REVISION])
        route = ids.tenant_key(schema.tenant)
        try:
            yield from self._recover_steps(doc_key, route)
            yield op.Upsert([journal_point(doc_key, rev, route)], route)
            fault_point("journal-written")
            for number, batch in enumerate(self._batches(page_points)):
                yield op.Upsert(batch, route)
                if number == 0:
                    fault_point("pages-partial")
            fault_point("pages-written")
            yield op.Commit(record, doc_key, rev, route)
        except (OSError, StoreError) as exc:
            try:
                yield from self._recover_steps(doc_key, route)
            except Exception:  # the disk may still be full: the next open recovers
                logger.warning(
                    "%s: cleanup of %s deferred to the next open", self.location, doc_key
                )
            raise _write_failure(self.location, schema.doc_id, exc) from exc

    def _delete_steps(self, doc_id: str, tenant: str | None) -> op.Steps[bool]:
        doc_key = ids.document_point_id(tenant, doc_id)
        route = ids.tenant_key(tenant)
        if (yield op.Retrieve(doc_key, route)) is None:
            yield from self._recover_steps(doc_key, route)
            return False
        yield op.Upsert([journal_point(doc_key, None, route)], route)
        yield op.Delete(scope.kind_filter(KIND_DOCUMENT, **{DOC_KEY: [doc_key]}), route)
        yield op.Delete(scope.stale_pages_filter(doc_key, None), route)
        yield op.Delete(scope.journal_filter([doc_key]), route)
        return True

    def _record_steps(self, doc_id: str, tenant: str | None) -> op.Steps[dict | None]:
        return (yield op.Retrieve(ids.document_point_id(tenant, doc_id), ids.tenant_key(tenant)))

    def _get_schema_steps(self, doc_id: str, tenant: str | None) -> op.Steps[DocumentSchema | None]:
        payload = yield from self._record_steps(doc_id, tenant)
        return None if payload is None else schema_from_payload(payload)

    def _list_documents_steps(
        self, page_filter: PageFilter | None
    ) -> op.Steps[list[DocumentSchema]]:
        if _nothing(page_filter):
            return []
        payloads = yield from op.scroll_all(
            scope.scope_filter(KIND_DOCUMENT, page_filter), route=_route(page_filter)
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
    ) -> op.Steps[list[PageHit]]:
        """One search request, the committed-revision condition part of its filter; without a
        ``prefetch_limit`` the depth for the scope comes first (:meth:`_search_depth_steps`)."""
        plan = self._plan(query, limit, page_filter, prefetch_limit)
        if _nothing(page_filter):
            return []
        if prefetch_limit is None:
            plan = plan.with_depth((yield from self._search_depth_steps(page_filter)))
        branches = yield op.Search(plan, _route(page_filter))
        return _hits(fuse_branches(branches, plan))

    def _search_depth_steps(self, page_filter: PageFilter | None) -> op.Steps[int]:
        """:func:`.plans.prefetch_for` Qdrant's estimated count of the pages in scope: the
        payload-index estimate its query planner uses, no scan (0.02-0.06 ms on Edge against
        1.35 ms for an exact count of 3,000 pages)."""
        if _nothing(page_filter):
            return prefetch_for(0)
        where = scope.scope_filter(KIND_PAGE, page_filter)
        return prefetch_for((yield op.Count(where, _route(page_filter), exact=False)))

    def _get_pages_steps(
        self, refs: Sequence[PageRef], page_filter: PageFilter | None
    ) -> op.Steps[list[PageRecord]]:
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
        for payload in (yield from op.scroll_all(where, route=_route(page_filter))):
            record = record_from_payload(payload)
            found.setdefault(record.ref, record)
        return [found[ref] for ref in wanted if ref in found]

    def _count_pages_steps(self, page_filter: PageFilter | None) -> op.Steps[int]:
        if _nothing(page_filter):
            return 0
        return (yield op.Count(scope.scope_filter(KIND_PAGE, page_filter), _route(page_filter)))

    # ------------------------------------------------------------ the PageStore API

    def upsert_document(
        self,
        schema: DocumentSchema,
        pages: Sequence[PageRecord],
        embeddings: Sequence[PageEmbedding],
    ) -> None:
        """Journal, pages (pending), then the commit: record, stale pages out, pages released.

        A crash or failed write at any step leaves the previous revision visible and complete;
        the next open (embedded), write of the document or :meth:`recover` cleans the rest.
        """
        self._run(self._upsert_steps(schema, pages, embeddings))

    def recover(self) -> int:
        """Clean every interrupted write (a crash mid-index); returns how many there were.

        Embedded stores run it when opened (one process owns the folder); on a shared server
        each document is recovered when it is next written, or by calling this.
        """
        done = self._run(self._recover_all_steps())
        if done:
            logger.warning("%s: cleaned %d interrupted document writes", self.location, done)
        return done

    def delete_document(self, doc_id: str, *, tenant: str | None = None) -> bool:
        """Record first (the document disappears at once), then its pages; crash-safe."""
        return self._run(self._delete_steps(doc_id, tenant))

    def document_version(self, doc_id: str, *, tenant: str | None = None) -> str | None:
        payload = self._run(self._record_steps(doc_id, tenant))
        return None if payload is None else str(payload["doc_version"])

    def get_schema(self, doc_id: str, *, tenant: str | None = None) -> DocumentSchema | None:
        return self._run(self._get_schema_steps(doc_id, tenant))

    def list_documents(self, page_filter: PageFilter | None = None) -> list[DocumentSchema]:
        return self._run(self._list_documents_steps(page_filter))

    def search(
        self,
        query: QueryEmbedding,
        *,
        limit: int,
        page_filter: PageFilter | None = None,
        prefetch_limit: int | None = None,
    ) -> list[PageHit]:
        return self._run(self._search_steps(query, limit, page_filter, prefetch_limit))

    def _list_cards_steps(self, page_filter: PageFilter | None) -> op.Steps[list[StoredCard]]:
        return (yield from cards.list_cards_steps(page_filter))

    def list_cards(self, page_filter: PageFilter | None = None) -> list[StoredCard]:
        """The stored cards of the documents ``page_filter`` admits, in one request."""
        return self._run(self._list_cards_steps(page_filter))

    def _search_cards_steps(
        self, query: QueryEmbedding, limit: int, page_filter: PageFilter | None
    ) -> op.Steps[list[tuple[StoredCard, float]]]:
        plan = self._plan(query, limit, page_filter, None)
        return (yield from cards.search_cards_steps(plan, page_filter))

    def search_cards(
        self, query: QueryEmbedding, *, limit: int, page_filter: PageFilter | None = None
    ) -> list[tuple[StoredCard, float]]:
        """The ``limit`` best cards for ``query`` (dense and lexical, fused), one request."""
        return self._run(self._search_cards_steps(query, limit, page_filter))

    def get_pages(
        self, refs: Sequence[PageRef], page_filter: PageFilter | None = None
    ) -> list[PageRecord]:
        """Existing pages of ``refs`` passing the filter, in the order of ``refs`` (each once)."""
        return self._run(self._get_pages_steps(refs, page_filter))

    def count_pages(self, page_filter: PageFilter | None = None) -> int:
        return self._run(self._count_pages_steps(page_filter))

    def search_depth(self, page_filter: PageFilter | None = None) -> int:
        return self._run(self._search_depth_steps(page_filter))

    async def _aread(self, method: str, *args: Any, **kwargs: Any) -> Any:
        """The read's steps (``_<method>_steps``, the same the sync method runs) on the async
        driver (:meth:`_arun`)."""
        return await self._arun(getattr(self, f"_{method}_steps")(*args, **kwargs))

    @contextmanager
    def bulk_load(self) -> Iterator[None]:
        """Defer HNSW building while many documents are written; build it once at the end.

        Per-document writes keep their crash-safe order (pages, record, old pages out), so a
        crash mid-load loses nothing committed; searches stay correct meanwhile, only slower.
        Nested blocks build once, when the outermost ends.
        """
        self._bulk_depth += 1
        if self._bulk_depth == 1:
            self._begin_bulk_load()
        try:
            yield
        finally:
            self._bulk_depth -= 1
            if self._bulk_depth == 0:
                self._end_bulk_load()
