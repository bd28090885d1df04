"""The embedded page store: Qdrant Edge, the Qdrant engine in-process (no server, WAL on disk)."""

from __future__ import annotations

import os
import shutil
from collections.abc import Sequence
from pathlib import Path
from typing import Any, Literal

import qdrant_edge as qe

from llama_index_docmemo.errors import StoreError
from llama_index_docmemo.faults import fault_point
from llama_index_docmemo.store import _layout as L
from llama_index_docmemo.store._qdrant import QdrantLayoutStore
from llama_index_docmemo.store.filters import edge_filter

# Qdrant Edge writes through memory maps: a write into a full disk kills the process with SIGBUS
# instead of failing, and a new segment or WAL file takes ~170 MiB at once (measured on tmpfs).
# Each write first checks that the disk keeps this margin beyond the write's own size (counted
# _SPACE_FACTOR times: WAL, segment, index); $DOCMEMO_MIN_FREE_MB overrides it.
MIN_FREE_BYTES = 256 << 20
MIN_FREE_ENV = "DOCMEMO_MIN_FREE_MB"
_SPACE_FACTOR = 3
_SHARD_MARKER = "edge_config.json"
_CLIENT_LOCAL_MARKER = "meta.json"
_SCROLL_PAGE = 256


def _condition(condition: L.Condition) -> qe.FieldCondition:
    values = list(condition.values)
    match = qe.MatchValue(values[0]) if len(values) == 1 else qe.MatchAny(values)
    return qe.FieldCondition(condition.key, match=match)


def _filter(where: L.FilterSpec) -> qe.Filter:
    return qe.Filter(
        must=[_condition(c) for c in where.must]
        + [edge_filter(g) for g in where.groups]
        + [qe.IsEmptyCondition(k) for k in where.empty],
        must_not=[_condition(c) for c in where.must_not] or None,
    )


def _point_bytes(point: L.PointData) -> int:
    """About how many bytes a point takes on disk (vectors as float32, payload text)."""
    floats = sum(
        len(values) * (len(values[0]) if values and isinstance(values[0], list) else 1)
        for values in point.dense.values()
    )
    sparse = 8 * len(point.sparse.indices) if point.sparse is not None else 0
    return 4 * floats + sparse + sum(len(str(v)) for v in point.payload.values())


def check_free_space(path: Path, needed: int, what: str) -> None:
    """Raise a 'disk is full' StoreError unless the disk under ``path`` has ``needed`` bytes more
    than MIN_FREE_BYTES free."""
    folder = path if path.exists() else path.absolute().parent
    free = shutil.disk_usage(folder).free
    override = os.environ.get(MIN_FREE_ENV)
    margin = int(float(override) * (1 << 20)) if override else MIN_FREE_BYTES
    if free < margin + needed:
        raise StoreError(
            f"cannot {what} page store {path}: No space left on device (the disk is full: "
            f"{free >> 20} MiB free, a page store keeps at least {margin >> 20} MiB free so a "
            f"write never dies halfway; ${MIN_FREE_ENV} sets that margin)"
        )


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
        return StoreError(f"cannot {what} page store {path}: the disk is full ({text})")
    return StoreError(f"cannot {what} page store {path}: {text}")


def _point(point: L.PointData) -> qe.Point:
    vectors: dict[str, Any] = dict(point.dense)
    if point.sparse is not None:
        vectors[L.LEXICAL] = qe.SparseVector(list(point.sparse.indices), list(point.sparse.values))
    return qe.Point(point.id, vectors, point.payload)


def _config(dim: int, sparse: bool) -> qe.EdgeConfig:
    """Named vectors of the layout; no HNSW graph on the multivector (MaxSim reranks only)."""
    multi = qe.EdgeVectorParams(
        dim,
        qe.Distance.Cosine,
        multivector_config=qe.MultiVectorConfig(qe.MultiVectorComparator.MaxSim),
        hnsw_config=qe.HnswIndexConfig(m=0, ef_construct=100, full_scan_threshold=10_000),
    )
    pooled = qe.EdgeVectorParams(dim, qe.Distance.Cosine)
    sparse_vectors = (
        {L.LEXICAL: qe.EdgeSparseVectorParams(modifier=qe.Modifier.Idf)} if sparse else None
    )
    return qe.EdgeConfig(vectors={L.MULTI: multi, L.POOLED: pooled}, sparse_vectors=sparse_vectors)


def _index_schema(kind: str, is_tenant: bool) -> Any:
    if kind == "integer":
        return qe.PayloadSchemaType.Integer
    return qe.KeywordIndexParams(is_tenant=True) if is_tenant else qe.PayloadSchemaType.Keyword


class EdgePageStore(QdrantLayoutStore):
    """Pages in a Qdrant Edge shard on disk: created on first open, loaded after.

    Args:
        path: folder of the shard (created if absent or empty).
        encoder_name / dim: the encoder filling the store; reopening with another raises.
        sparse: store a lexical vector ("lexical", IDF modifier) beside the dense ones.
        fusion: "rrf" (default) or "dbsf", how dense and lexical candidates are fused.
        idf_scope: "filter" (IDF over the pages the query may see) or "collection".

    Raises:
        StoreError: the folder holds something else, is open elsewhere, or was created with
            another encoder.
    """

    off_loop_threads = 1  # the engine holds the GIL through a call: one thread (base.py)

    def __init__(
        self,
        path: str | Path,
        *,
        encoder_name: str,
        dim: int,
        sparse: bool = False,
        fusion: L.Fusion = "rrf",
        idf_scope: L.IdfScope = "filter",
    ) -> None:
        super().__init__(
            encoder_name=encoder_name, dim=dim, sparse=sparse, fusion=fusion, idf_scope=idf_scope
        )
        self.path = Path(path)
        self.exclusive = True  # the folder is locked to this process
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
            self._create()
        self._shard = self._call("open", qe.EdgeShard.load, str(self.path))
        try:
            if self._retrieve(L.STORE_POINT_ID) is None:
                self._complete_creation()
            self._check_meta()
            self.recover()
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
            check_free_space(parent, 0, "create")
            shutil.rmtree(building, ignore_errors=True)
            shard = self._call(
                "create", qe.EdgeShard.create, str(building), _config(self.dim, self.sparse)
            )
            try:
                fault_point("store-created")
                for key, kind, is_tenant in L.PAYLOAD_INDEXES:
                    shard.update(
                        qe.UpdateOperation.create_field_index(key, _index_schema(kind, is_tenant))
                    )
                shard.update(qe.UpdateOperation.upsert_points([_point(self._meta_point())]))
                shard.flush()
            finally:
                shard.close()
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
            for key, kind, is_tenant in L.PAYLOAD_INDEXES:
                self.shard.update(
                    qe.UpdateOperation.create_field_index(key, _index_schema(kind, is_tenant))
                )
            self._write([self._meta_point()])
            self.shard.flush()
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

    def _update(self, operation: qe.UpdateOperation) -> None:
        shard = self.shard
        try:
            shard.update(operation)
        except Exception as exc:  # the engine's I/O errors (disk full, read-only) arrive as text
            raise _open_error(self.path, "write to", exc) from exc

    def _write(self, points: Sequence[L.PointData]) -> None:
        needed = _SPACE_FACTOR * sum(_point_bytes(p) for p in points)
        check_free_space(self.path, needed, "write to")
        self._update(qe.UpdateOperation.upsert_points([_point(p) for p in points]))

    def _delete(self, where: L.FilterSpec) -> None:
        self._update(qe.UpdateOperation.delete_points_by_filter(_filter(where)))

    def _set_payload(self, where: L.FilterSpec, payload: dict[str, Any]) -> None:
        check_free_space(self.path, 0, "write to")
        self._update(qe.UpdateOperation.set_payload_by_filter(_filter(where), payload))

    def _create_index(self, key: str, kind: Literal["keyword", "integer"], is_tenant: bool) -> None:
        self._update(qe.UpdateOperation.create_field_index(key, _index_schema(kind, is_tenant)))

    def _scroll(
        self, where: L.FilterSpec, fields: Sequence[str] | None = None
    ) -> list[dict[str, Any]]:
        payloads: list[dict[str, Any]] = []
        offset: Any = None
        while True:
            records, offset = self.shard.scroll(
                qe.ScrollRequest(
                    offset=offset,
                    limit=_SCROLL_PAGE,
                    filter=_filter(where),
                    with_payload=list(fields) if fields is not None else True,
                )
            )
            payloads.extend(r.payload or {} for r in records)
            if offset is None:
                return payloads

    def _count(self, where: L.FilterSpec) -> int:
        return self.shard.count(qe.CountRequest(exact=True, filter=_filter(where)))

    def _retrieve(self, point_id: str) -> dict[str, Any] | None:
        records = self.shard.retrieve([point_id], with_payload=True, with_vector=False)
        return (records[0].payload or {}) if records else None

    def _query(self, plan: L.SearchPlan) -> list[tuple[dict[str, Any], float]]:
        """Each branch on its own (one batch), fused here: see :func:`_layout.fuse_branches`."""
        where = _filter(plan.where)
        vectors = plan.vectors
        first_stage = qe.Prefetch(
            limit=plan.prefetch,
            query=qe.Query.Nearest(vectors.pooled, using=L.POOLED),
            filter=where,
        )
        requests = [
            qe.QueryRequest(
                limit=plan.prefetch,
                query=qe.Query.Nearest(vectors.multi, using=L.MULTI),
                prefetches=[first_stage],
                filter=where,
                with_payload=True,
            )
        ]
        if vectors.sparse is not None:
            idf = (
                qe.SearchParams(idf=qe.IdfParams(corpus=where))
                if plan.idf_scope == "filter"
                else None
            )
            requests.append(
                qe.QueryRequest(
                    limit=plan.prefetch,
                    query=qe.Query.Nearest(
                        qe.SparseVector(list(vectors.sparse.indices), list(vectors.sparse.values)),
                        using=L.LEXICAL,
                    ),
                    filter=where,
                    params=idf,
                    with_payload=True,
                )
            )
        branches = self.shard.query_batch(qe.QueryBatchRequest(requests))
        return L.fuse_branches(
            [[(p.payload or {}, p.score) for p in branch] for branch in branches], plan
        )

    def _vectors(self, point_ids: Sequence[str], using: str) -> dict[str, L.Vector]:
        if not point_ids:
            return {}
        records = self.shard.retrieve(list(point_ids), with_payload=False, with_vector=[using])
        out: dict[str, L.Vector] = {}
        for record in records:
            vector = record.vector
            if isinstance(vector, dict) and using in vector:
                out[str(record.id)] = vector[using]
        return out

    def _feedback_query(self, plan: L.FeedbackPlan) -> list[tuple[dict[str, Any], float]]:
        if plan.target is not None and plan.negatives:
            pairs = [qe.ContextPair(p, n) for p, n in plan.context_pairs]
            query = qe.Query.Discover(qe.DiscoverQuery(plan.target, pairs), using=plan.using)
        else:
            examples = qe.RecommendQuery(plan.positives, plan.negatives)
            make = (
                qe.Query.RecommendBestScore
                if plan.strategy == "best_score"
                else qe.Query.RecommendSumScores
            )
            query = make(examples, using=plan.using)
        request = qe.QueryRequest(
            limit=plan.limit, query=query, filter=_filter(plan.where), with_payload=True
        )
        return [(p.payload or {}, p.score) for p in self.shard.query(request)]

    def optimize(self) -> bool:
        """Merge segments and build the pooled vector's HNSW index (never the multivector's)."""
        return self.shard.optimize()

    def close(self) -> None:
        if self._shard is not None:
            self._shard.flush()
            self._shard.close()
            self._shard = None
