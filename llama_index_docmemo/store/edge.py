"""The embedded page store: Qdrant Edge, the Qdrant engine in-process (no server, WAL on disk)."""

from __future__ import annotations

import logging
import os
import shutil
import time
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import qdrant_edge as qe

from llama_index_docmemo.errors import StoreError
from llama_index_docmemo.faults import fault_point
from llama_index_docmemo.step_runtime import run
from llama_index_docmemo.store import disk_space, scope
from llama_index_docmemo.store import operations as op
from llama_index_docmemo.store._qdrant import QdrantLayoutStore
from llama_index_docmemo.store.layouts import (
    DEFAULT_LAYOUT,
    FDE,
    GRID,
    LEXICAL,
    MULTI,
    MultivectorLayout,
)
from llama_index_docmemo.store.operations import Fusion, IdfScope, SearchPlan
from llama_index_docmemo.store.points import STORE_POINT_ID, WRITE_STATE, IndexKind, PointData
from llama_index_docmemo.types import FieldGroup, FieldMatch

logger = logging.getLogger(__name__)

_SHARD_MARKER = "edge_config.json"
_CLIENT_LOCAL_MARKER = "meta.json"


_RANGE_OPS = ("gt", "gte", "lt", "lte")


def _condition(clause: FieldMatch | FieldGroup) -> Any:
    if isinstance(clause, FieldGroup):
        return _filter(clause)
    key, kind, value = clause.key, clause.op, clause.value
    if kind == "is_empty":
        return qe.IsEmptyCondition(key)
    if kind in _RANGE_OPS:
        return qe.FieldCondition(key, range=qe.RangeFloat(**{kind: float(value)}))
    if kind == "in":
        return qe.FieldCondition(key, match=qe.MatchAny(list(value)))
    if kind in ("nin", "ne"):
        return qe.FieldCondition(
            key, match=qe.MatchExcept(list(value) if kind == "nin" else [value])
        )
    return qe.FieldCondition(key, match=qe.MatchValue(value))


def _filter(group: FieldGroup) -> qe.Filter:
    """The one translation of the store's filter tree (:mod:`.scope`) into Qdrant Edge's."""
    slot = {"and": "must", "or": "should", "not": "must_not"}[group.condition]
    return qe.Filter(**{slot: [_condition(clause) for clause in group.clauses]})


def _point_bytes(point: PointData) -> int:
    """About how many bytes a point takes on disk (vectors as float32, payload text)."""
    floats = sum(int(values.size) for values in point.dense.values())
    sparse = 8 * len(point.sparse.indices) if point.sparse is not None else 0
    return 4 * floats + sparse + sum(len(str(v)) for v in point.payload.values())


def _open_error(path: Path, what: str, exc: Exception) -> StoreError:
    """The engine's error as a message a user can act on (locked, read-only, disk full)."""
    text = str(exc)
    if "WouldBlock" in text:
        return StoreError(
            f"page store {path} is open in another process (an embedded store has one "
            f"owner at a time): close that process, or work on a copy (cp -r {path} "
            f"/tmp/docmemo-copy and --store /tmp/docmemo-copy)"
        )
    if "Read-only file system" in text or "Permission denied" in text:
        return StoreError(
            f"cannot {what} page store {path}: the folder is not writable ({text}); an "
            "embedded store needs write access even to read (its write-ahead log)"
        )
    if "No space left" in text:
        return StoreError(
            f"cannot {what} page store {path}: the disk is full ({text}); free space on that "
            "disk and run the command again: nothing committed is lost"
        )
    return StoreError(f"cannot {what} page store {path}: {text}")


def _point(point: PointData) -> qe.Point:
    # lists: the binding reads a numpy array element by element, a list twice as fast
    vectors: dict[str, Any] = {name: values.tolist() for name, values in point.dense.items()}
    if point.sparse is not None:
        vectors[LEXICAL] = qe.SparseVector(list(point.sparse.indices), list(point.sparse.values))
    return qe.Point(point.id, vectors, point.payload)


_NO_GRAPH = qe.HnswIndexConfig(m=0, ef_construct=100, full_scan_threshold=10_000)


def _quantization(layout: MultivectorLayout) -> Any:
    """The in-RAM copy of the original that the rerank scores (None: the original itself)."""
    if layout.quantization == "scalar":
        return qe.ScalarQuantizationConfig(qe.ScalarType.Int8, quantile=0.99, always_ram=True)
    if layout.quantization in _TURBO_BITS:
        return qe.TurboQuantQuantizationConfig(
            always_ram=True, bits=_TURBO_BITS[layout.quantization]
        )
    if layout.quantization == "binary":
        return qe.BinaryQuantizationConfig(
            always_ram=True, query_encoding=_QUERY_ENCODINGS[layout.query_encoding]
        )
    return None


_TURBO_BITS = {"turbo4": qe.TurboQuantBitSize.Bits4, "turbo2": qe.TurboQuantBitSize.Bits2}
_QUERY_ENCODINGS = {
    "default": None,
    "scalar4": qe.BinaryQuantizationQueryEncoding.Scalar4Bits,
    "scalar8": qe.BinaryQuantizationQueryEncoding.Scalar8Bits,
}
_DATATYPES = {
    "float32": None,
    "float16": qe.VectorStorageDatatype.Float16,
    "turbo8": qe.VectorStorageDatatype.Turbo8,
    "turbo4": qe.VectorStorageDatatype.Turbo4,
}


def _original_params(dim: int, layout: MultivectorLayout) -> qe.EdgeVectorParams:
    """The original multivector: MaxSim, no HNSW graph (it only reranks), as the layout says."""
    return qe.EdgeVectorParams(
        dim,
        qe.Distance.Cosine,
        on_disk=True if layout.on_disk else None,
        multivector_config=qe.MultiVectorConfig(qe.MultiVectorComparator.MaxSim),
        datatype=_DATATYPES[layout.storage],
        quantization_config=_quantization(layout),
        hnsw_config=_NO_GRAPH,
    )


def _config(dim: int, sparse: bool, layout: MultivectorLayout = DEFAULT_LAYOUT) -> qe.EdgeConfig:
    """Named vectors of the layout: the original (reranks) and the first stage (HNSW; MUVERA's
    encodings compared by dot product, as their construction approximates MaxSim)."""
    first = qe.EdgeVectorParams(
        layout.first_stage_dim or dim,
        qe.Distance.Dot if layout.first_stage_vector == FDE else qe.Distance.Cosine,
        datatype=None if layout.storage == "float32" else qe.VectorStorageDatatype.Float16,
        multivector_config=(
            qe.MultiVectorConfig(qe.MultiVectorComparator.MaxSim)
            if layout.first_stage_vector == GRID
            else None
        ),
    )
    sparse_vectors = (
        {LEXICAL: qe.EdgeSparseVectorParams(modifier=qe.Modifier.Idf)} if sparse else None
    )
    return qe.EdgeConfig(
        vectors={MULTI: _original_params(dim, layout), layout.first_stage_vector: first},
        sparse_vectors=sparse_vectors,
    )


_SCHEMAS = {
    "integer": qe.PayloadSchemaType.Integer,
    "float": qe.PayloadSchemaType.Float,
    "bool": qe.PayloadSchemaType.Bool,
}


def _index_schema(kind: IndexKind, is_tenant: bool) -> Any:
    if kind in _SCHEMAS:
        return _SCHEMAS[kind]
    return qe.KeywordIndexParams(is_tenant=True) if is_tenant else qe.PayloadSchemaType.Keyword


def _requests(plan: SearchPlan) -> list[qe.QueryRequest]:
    """The plan's branches (dense, then lexical if any), sent as one batch."""
    where = _filter(plan.where)
    first_stage = qe.Prefetch(
        limit=plan.prefetch,
        query=qe.Query.Nearest(plan.first_stage, using=plan.layout.first_stage_vector),
        filter=where,
    )
    rerank_params = None
    if plan.layout.quantization != "none":
        rerank_params = qe.SearchParams(
            quantization=qe.QuantizationSearchParams(
                rescore=True, oversampling=plan.layout.oversampling
            )
        )
    requests = [
        qe.QueryRequest(
            limit=plan.rerank_limit,
            query=qe.Query.Nearest(plan.multi, using=MULTI),
            prefetches=[first_stage],
            filter=where,
            params=rerank_params,
            with_payload=True,
        )
    ]
    if plan.sparse is not None:
        idf = (
            qe.SearchParams(idf=qe.IdfParams(corpus=where)) if plan.idf_scope == "filter" else None
        )
        requests.append(
            qe.QueryRequest(
                limit=plan.prefetch,
                query=qe.Query.Nearest(
                    qe.SparseVector(list(plan.sparse.indices), list(plan.sparse.values)),
                    using=LEXICAL,
                ),
                filter=where,
                params=idf,
                with_payload=True,
            )
        )
    return requests


FLUSH_INTERVAL_S = 5.0
"""Seconds of writes between flushes (Qdrant's ``flush_interval_sec`` default)."""


class EdgePageStore(QdrantLayoutStore):
    """Pages in a Qdrant Edge shard on disk: created on first open, loaded after.

    Args:
        path: folder of the shard (created if absent or empty).
        encoder_name / dim / encoder_settings: the encoder filling the store; reopening with
            another raises; None: the encoder the store records (it must exist).
        sparse: store a lexical vector ("lexical", IDF modifier) beside the dense ones.
        fusion: "rrf" (default) or "dbsf", how dense and lexical candidates are fused.
        idf_scope: "filter" (IDF over the pages the query may see) or "collection".
        layout: the multivector layout (see :mod:`.layouts`) the store must have; None keeps
            the stored one, and a new store gets ``default_layout``.
        default_layout: a new store's layout when ``layout`` is None (``open_store`` passes
            :data:`~.layouts.PAGE_IMAGE_LAYOUT` for page-image encoders such as ColQwen).

    Raises:
        StoreError: the folder holds something else, is open elsewhere, or was created with
            another encoder or layout.
    """

    holds_gil = True  # the engine holds the GIL through a call: the process's CPU thread

    def __init__(
        self,
        path: str | Path,
        *,
        encoder_name: str | None = None,
        dim: int | None = None,
        sparse: bool = False,
        fusion: Fusion = "rrf",
        idf_scope: IdfScope = "filter",
        layout: MultivectorLayout | None = None,
        default_layout: MultivectorLayout = DEFAULT_LAYOUT,
        encoder_settings: dict[str, Any] | None = None,
    ) -> None:
        super().__init__(
            encoder_name=encoder_name,
            dim=dim,
            sparse=sparse,
            fusion=fusion,
            idf_scope=idf_scope,
            layout=layout,
            default_layout=default_layout,
            encoder_settings=encoder_settings,
        )
        self.path = Path(path)
        self._flushed_at = time.monotonic()
        self._shard: qe.EdgeShard | None = self._open()

    @property
    def location(self) -> str:
        return f"page store {self.path}"

    def _open(self) -> qe.EdgeShard:
        if not (self.path / _SHARD_MARKER).is_file():
            if (self.path / _CLIENT_LOCAL_MARKER).is_file():
                raise StoreError(
                    f"{self.path} holds a qdrant-client local store, not a Qdrant Edge shard: "
                    "open it with backend='client'"
                )
            if self.path.exists() and (not self.path.is_dir() or any(self.path.iterdir())):
                raise StoreError(
                    f"{self.path} exists and is not an empty folder or a page store: "
                    "choose another --store folder"
                )
            if self.adopts_encoder:
                raise self._no_store()
            self._create()
        disk_space.check_open(self.path)  # before mapping it: loading may replay the log
        self._shard = self._call("open", qe.EdgeShard.load, str(self.path))
        try:
            if self._execute(op.Retrieve(STORE_POINT_ID)) is None:
                self._complete_creation()
            run(self._open_steps())
            self.recover()  # this process owns the folder: no write of another is in flight
        except BaseException:
            self._shard.close()
            self._shard = None
            raise
        return self._shard

    def _create(self) -> None:
        """Build the shard in a sibling folder and rename it into place: a crash during creation
        leaves no half-made store at ``path`` (only a ``.creating-<pid>`` folder, removed by the
        next creation)."""
        parent = self.path.absolute().parent
        for stale in parent.glob(f".{self.path.name}.creating-*"):
            pid = stale.name.rsplit("-", 1)[-1]
            if not pid.isdigit() or not Path(f"/proc/{pid}").exists():
                shutil.rmtree(stale, ignore_errors=True)
        building = parent / f".{self.path.name}.creating-{os.getpid()}"
        try:
            parent.mkdir(parents=True, exist_ok=True)
            disk_space.check_open(self.path, "create")
            shutil.rmtree(building, ignore_errors=True)
            config = _config(self.dim, self.sparse, self.layout)
            self._shard = self._call("create", qe.EdgeShard.create, str(building), config)
            try:
                fault_point("store-created")
                run(self._create_steps())
                self._flush()
            finally:
                self._shard.close()
                self._shard = None
            if self.path.is_dir():
                self.path.rmdir()  # an empty folder the caller made; replaced by the shard
            os.rename(building, self.path)
        except OSError as exc:
            shutil.rmtree(building, ignore_errors=True)
            raise _open_error(self.path, "create", exc) from exc
        except StoreError:
            shutil.rmtree(building, ignore_errors=True)
            raise

    def _complete_creation(self) -> None:
        """A shard without a store record: finish it if it holds nothing, else say how to fix it.

        (0.1.0 created stores in place, so a crash right after creation left such a folder.)
        """
        if self.shard.count(qe.CountRequest(exact=True)) == 0:
            run(self._create_steps())
            self._flush()
            return
        raise StoreError(
            f"{self.path} is an incomplete page store (points but no store record: its "
            f"creation was interrupted): move it away and index again, e.g. "
            f"mv {self.path} {self.path}.broken && docmemo index PDF_FOLDER --store {self.path}"
        )

    def _call(self, what: str, fn: Any, *args: Any) -> Any:
        try:
            return fn(*args)
        except Exception as exc:  # qdrant_edge raises plain Exception with the engine's message
            raise _open_error(self.path, what, exc) from exc

    @property
    def shard(self) -> qe.EdgeShard:
        if self._shard is None:
            raise StoreError(f"{self.location} is closed")
        return self._shard

    def _update(self, operation: qe.UpdateOperation, data_bytes: int = 0) -> None:
        shard = self.shard
        disk_space.check_write(self.path, data_bytes)
        try:
            shard.update(operation)
        except Exception as exc:  # the engine's I/O errors (disk full, read-only) arrive as text
            raise _open_error(self.path, "write to", exc) from exc

    def _upsert(self, points: Sequence[PointData]) -> None:
        self._update(
            qe.UpdateOperation.upsert_points([_point(p) for p in points]),
            sum(_point_bytes(p) for p in points),
        )

    def _commit(self, commit: op.Commit) -> None:
        """Record (the commit point), stale pages out, pages released, journal note out."""
        if commit.record is not None:
            self._upsert([commit.record])
        fault_point("record-written")
        stale = scope.stale_pages_filter(commit.doc_key, commit.revision)
        self._update(qe.UpdateOperation.delete_points_by_filter(_filter(stale)))
        fault_point("stale-deleted")
        pages = scope.revision_pages_filter(commit.doc_key, commit.revision)
        self._update(qe.UpdateOperation.delete_payload_by_filter(_filter(pages), [WRITE_STATE]))
        journal = scope.journal_filter([commit.doc_key])
        self._update(qe.UpdateOperation.delete_points_by_filter(_filter(journal)))
        self._flush_if_due()

    def _flush_if_due(self) -> None:
        """Flush the shard at most every ``FLUSH_INTERVAL_S`` of writing. Edge truncates its
        write-ahead log only on a flush: unflushed, the log of ColQwen pages grew by about
        470 KB a page (17 GB after 40,000 pages) until close; Qdrant's server flushes on the
        same default interval."""
        if time.monotonic() - self._flushed_at >= FLUSH_INTERVAL_S:
            self._flush()

    def _execute(self, operation: op.Operation) -> Any:
        """Apply one operation to the shard (in process: CPU-bound, so async runs it in a thread)."""
        if isinstance(operation, op.Upsert):
            return self._upsert(operation.points)
        if isinstance(operation, op.Commit):
            return self._commit(operation)
        if isinstance(operation, op.Delete):
            return self._update(
                qe.UpdateOperation.delete_points_by_filter(_filter(operation.where))
            )
        if isinstance(operation, op.SetPayload):
            return self._update(
                qe.UpdateOperation.set_payload_by_filter(
                    _filter(operation.where), operation.payload
                )
            )
        if isinstance(operation, op.CreateIndex):
            schema = _index_schema(operation.kind, operation.is_tenant)
            return self._update(qe.UpdateOperation.create_field_index(operation.key, schema))
        if isinstance(operation, op.Scroll):
            fields = operation.fields
            records, offset = self.shard.scroll(
                qe.ScrollRequest(
                    offset=operation.offset,
                    limit=operation.limit,
                    filter=_filter(operation.where),
                    with_payload=list(fields) if fields is not None else True,
                )
            )
            return [r.payload or {} for r in records], offset
        if isinstance(operation, op.Count):
            return self.shard.count(
                qe.CountRequest(exact=operation.exact, filter=_filter(operation.where))
            )
        if isinstance(operation, op.Retrieve):
            records = self.shard.retrieve(
                [operation.point_id], with_payload=True, with_vector=False
            )
            return (records[0].payload or {}) if records else None
        if isinstance(operation, op.Search):
            branches = self.shard.query_batch(qe.QueryBatchRequest(_requests(operation.plan)))
            return [[(p.payload or {}, p.score) for p in branch] for branch in branches]
        raise TypeError(f"unknown store operation {operation!r}")

    def _flush(self) -> None:
        """Write the shard's state out (its own writes fail with ENOSPC: no SIGBUS here)."""
        self._call("flush", self.shard.flush)
        self._flushed_at = time.monotonic()

    def optimize(self) -> bool:
        """Merge segments and build the first stage's HNSW index (never the original's).

        Without the disk the merge needs (the engine checks, e.g. 389 MiB for 600 small pages)
        it is skipped with a warning: every page is stored and searchable, only more slowly.
        """
        try:
            return self.shard.optimize()
        except Exception as exc:  # the engine's errors arrive as plain Exception with text
            if "Not enough space" not in str(exc):
                raise _open_error(self.path, "optimize", exc) from exc
            logger.warning(
                "%s: segments not merged, the disk is too full (%s); every page is stored and "
                "searchable, only slower, until an index run with that space free",
                self.location,
                exc,
            )
            return False

    def _end_bulk_load(self) -> None:
        """Edge builds indexes only when asked: once, after the whole load (the log flushed
        first, so the merge has the disk it needs)."""
        self._flush()
        self.optimize()

    def close(self) -> None:
        """Flush and release the folder; released even when the flush fails (disk full)."""
        if self._shard is None:
            return
        try:
            self._flush()
        finally:
            self._shard.close()
            self._shard = None
