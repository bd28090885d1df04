"""A page store's life both backends share, written once as steps: open, create, migrate, the
crash-safe writes (journal, pending pages, the record as the commit), recovery, deletion.

Each step yields :mod:`.operations`, each as a call of the backend that performs it (``_send``:
the backend's ``_execute``, and ``_aexecute`` where it has a native async client), run by the one
steps runtime (:mod:`llama_index_docmemo.step_runtime`); the reads are
:class:`~.reads.QdrantReads`, which this store extends. Versions, schema points, ordering and
validation live here, so the backends cannot drift apart, and the sync and async paths run the
very same steps.
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
from llama_index_docmemo.step_runtime import Steps, run
from llama_index_docmemo.store import operations as op
from llama_index_docmemo.store import scope
from llama_index_docmemo.store.layouts import DEFAULT_LAYOUT, MultivectorLayout
from llama_index_docmemo.store.metadata import index_kind
from llama_index_docmemo.store.migrations import migration_steps
from llama_index_docmemo.store.operations import FUSIONS, IDF_SCOPES, Fusion, IdfScope, check_choice
from llama_index_docmemo.store.points import (
    DOC_KEY,
    KIND_DOCUMENT,
    LAYOUT_VERSION,
    PAYLOAD_INDEXES,
    REVISION,
    STORE_POINT_ID,
    TENANT_KEY,
    PointData,
    StoreMeta,
    document_point_id,
    document_points,
    first_page_vectors,
    journal_point,
    journal_point_id,
    tenant_key,
    with_card,
)
from llama_index_docmemo.store.reads import QdrantReads
from llama_index_docmemo.types import PageEmbedding, PageRecord

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


class QdrantLayoutStore(QdrantReads):
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

    def _begin_bulk_load(self) -> None:
        """Defer index building until :meth:`_end_bulk_load`."""

    def _end_bulk_load(self) -> None:
        """Build (or restore the building of) the deferred indexes."""

    # ------------------------------------------------------------ steps

    def _open_steps(self) -> Steps[None]:
        """Check the store record against the encoder and layout; migrate older layouts."""
        payload = yield self._send(op.Retrieve(STORE_POINT_ID))
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
            migrated = yield from migration_steps(self._send, version, lexical=self.sparse)
            yield self._send(op.Upsert([self._meta.point()]))
            logger.warning(
                "%s: migrated %d documents from store layout %d to %d in place",
                self.location,
                migrated,
                version,
                LAYOUT_VERSION,
            )

    def _create_steps(self) -> Steps[None]:
        """Payload indexes and the store record of a new store."""
        for key, kind, is_tenant in PAYLOAD_INDEXES:
            yield self._send(op.CreateIndex(key, kind, is_tenant))
        yield self._send(op.Upsert([self._meta.point()]))

    def _recover_steps(self, doc_key: str, route: str | None) -> Steps[bool]:
        """Finish or undo an interrupted write of one document; True if there was one.

        The document record is the commit point: pages of any other revision than the one it
        names (a half-written new one, or the superseded one) are deleted, and its own pages are
        released (a crash may have come between the commit and their release).
        """
        if (yield self._send(op.Retrieve(journal_point_id(doc_key), route))) is None:
            return False
        record = yield self._send(op.Retrieve(doc_key, route))
        if record is None:
            yield self._send(op.Delete(scope.stale_pages_filter(doc_key, None), route))
            yield self._send(op.Delete(scope.journal_filter([doc_key]), route))
        else:
            rev = str(record[REVISION])
            yield self._send(
                op.Commit(None, doc_key, rev, route)
            )  # the record stays, vectors and all
        return True

    def _recover_all_steps(self) -> Steps[int]:
        notes = yield from op.scroll_all(
            self._send, scope.journal_filter(), fields=[DOC_KEY, TENANT_KEY]
        )
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

    def _user_index_steps(self, pages: Sequence[PageRecord]) -> Steps[None]:
        """A payload index for each user metadata key not indexed yet (typed by its first
        value), so filters on the app's keys stay indexed as the store grows."""
        for page in pages:
            for key, value in page.metadata.items():
                kind = index_kind(value)
                if kind is not None and key not in self._user_indexes:
                    yield self._send(op.CreateIndex(scope.payload_key(key), kind, False))
                    self._user_indexes.add(key)

    def _upsert_steps(
        self,
        schema: DocumentSchema,
        pages: Sequence[PageRecord],
        embeddings: Sequence[PageEmbedding],
    ) -> Steps[None]:
        page_points, record = document_points(
            schema, pages, embeddings, dim=self.dim, use_sparse=self.sparse, layout=self.layout
        )
        dense = first_page_vectors(pages, page_points)
        record = with_card(record, schema, pages, dense, lexical=self.sparse)
        yield from self._user_index_steps(pages)
        doc_key = record.id
        rev = str(record.payload[REVISION])
        route = tenant_key(schema.tenant)
        try:
            yield from self._recover_steps(doc_key, route)
            yield self._send(op.Upsert([journal_point(doc_key, rev, route)], route))
            fault_point("journal-written")
            for number, batch in enumerate(self._batches(page_points)):
                yield self._send(op.Upsert(batch, route))
                if number == 0:
                    fault_point("pages-partial")
            fault_point("pages-written")
            yield self._send(op.Commit(record, doc_key, rev, route))
        except (OSError, StoreError) as exc:
            try:
                yield from self._recover_steps(doc_key, route)
            except Exception:  # the disk may still be full: the next open recovers
                logger.warning(
                    "%s: cleanup of %s deferred to the next open", self.location, doc_key
                )
            raise _write_failure(self.location, schema.doc_id, exc) from exc

    def _delete_steps(self, doc_id: str, tenant: str | None) -> Steps[bool]:
        doc_key = document_point_id(tenant, doc_id)
        route = tenant_key(tenant)
        if (yield self._send(op.Retrieve(doc_key, route))) is None:
            yield from self._recover_steps(doc_key, route)
            return False
        yield self._send(op.Upsert([journal_point(doc_key, None, route)], route))
        yield self._send(op.Delete(scope.kind_filter(KIND_DOCUMENT, **{DOC_KEY: [doc_key]}), route))
        yield self._send(op.Delete(scope.stale_pages_filter(doc_key, None), route))
        yield self._send(op.Delete(scope.journal_filter([doc_key]), route))
        return True

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
        run(self._upsert_steps(schema, pages, embeddings))

    def recover(self) -> int:
        """Clean every interrupted write (a crash mid-index); returns how many there were.

        Embedded stores run it when opened (one process owns the folder); on a shared server
        each document is recovered when it is next written, or by calling this.
        """
        done = run(self._recover_all_steps())
        if done:
            logger.warning("%s: cleaned %d interrupted document writes", self.location, done)
        return done

    def delete_document(self, doc_id: str, *, tenant: str | None = None) -> bool:
        """Record first (the document disappears at once), then its pages; crash-safe."""
        return run(self._delete_steps(doc_id, tenant))

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
