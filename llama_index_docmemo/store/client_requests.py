"""The server backend's requests, sans-I/O: each store operation as one qdrant-client call.

:func:`request_for` turns an :mod:`.operations` value into the method name, keyword arguments and reply
parser of one qdrant-client call. ``QdrantClient`` and ``AsyncQdrantClient`` share those names
and arguments (the async client is generated from the sync one), so the sync and async drivers
send the very same request. The filter translation of the server path lives here, once.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from qdrant_client import models

from llama_index_docmemo.store import operations as op
from llama_index_docmemo.store import scope
from llama_index_docmemo.store.layouts import FDE, GRID, LEXICAL, MULTI, MultivectorLayout
from llama_index_docmemo.store.operations import SearchPlan
from llama_index_docmemo.store.points import WRITE_STATE, IndexKind, PointData
from llama_index_docmemo.types import FieldGroup, FieldMatch

_RANGE_OPS = ("gt", "gte", "lt", "lte")


def _condition(clause: FieldMatch | FieldGroup) -> Any:
    if isinstance(clause, FieldGroup):
        return client_filter(clause)
    key, kind, value = clause.key, clause.op, clause.value
    if kind == "is_empty":
        return models.IsEmptyCondition(is_empty=models.PayloadField(key=key))
    if kind in _RANGE_OPS:
        return models.FieldCondition(key=key, range=models.Range(**{kind: float(value)}))
    if kind == "in":
        return models.FieldCondition(key=key, match=models.MatchAny(any=list(value)))
    if kind in ("nin", "ne"):
        values = list(value) if kind == "nin" else [value]
        return models.FieldCondition(key=key, match=models.MatchExcept(**{"except": values}))
    return models.FieldCondition(key=key, match=models.MatchValue(value=value))


def client_filter(group: FieldGroup) -> models.Filter:
    """The one translation of the store's filter tree (:mod:`.scope`) into qdrant-client's."""
    slot = {"and": "must", "or": "should", "not": "must_not"}[group.condition]
    return models.Filter(**{slot: [_condition(clause) for clause in group.clauses]})


def point(data: PointData) -> models.PointStruct:
    vectors: dict[str, Any] = {name: values.tolist() for name, values in data.dense.items()}
    if data.sparse is not None:
        vectors[LEXICAL] = models.SparseVector(
            indices=list(data.sparse.indices), values=list(data.sparse.values)
        )
    return models.PointStruct(id=data.id, vector=vectors, payload=data.payload)


_NO_GRAPH = models.HnswConfigDiff(m=0)


def _quantization(layout: MultivectorLayout) -> models.QuantizationConfig | None:
    """The in-RAM copy of the original that the rerank scores (None: the original itself)."""
    if layout.quantization == "scalar":
        return models.ScalarQuantization(
            scalar=models.ScalarQuantizationConfig(
                type=models.ScalarType.INT8, quantile=0.99, always_ram=True
            )
        )
    if layout.quantization in _TURBO_BITS:
        return models.TurboQuantization(
            turbo=models.TurboQuantQuantizationConfig(
                always_ram=True, bits=_TURBO_BITS[layout.quantization]
            )
        )
    if layout.quantization == "binary":
        return models.BinaryQuantization(
            binary=models.BinaryQuantizationConfig(
                always_ram=True, query_encoding=_QUERY_ENCODINGS[layout.query_encoding]
            )
        )
    return None


_TURBO_BITS = {"turbo4": models.TurboQuantBitSize.BITS4, "turbo2": models.TurboQuantBitSize.BITS2}
_QUERY_ENCODINGS = {
    "default": None,
    "scalar4": models.BinaryQuantizationQueryEncoding.SCALAR4BITS,
    "scalar8": models.BinaryQuantizationQueryEncoding.SCALAR8BITS,
}
_DATATYPES = {
    "float32": None,
    "float16": models.Datatype.FLOAT16,
    "turbo8": models.Datatype.TURBO8,
    "turbo4": models.Datatype.TURBO4,
}


def vectors_config(dim: int, layout: MultivectorLayout) -> dict[str, models.VectorParams]:
    """Named vectors of the layout: the original (MaxSim rerank, no HNSW graph, stored as the
    layout says) and the first stage (HNSW; MUVERA's encodings compared by dot product)."""
    max_sim = models.MultiVectorConfig(comparator=models.MultiVectorComparator.MAX_SIM)
    return {
        MULTI: models.VectorParams(
            size=dim,
            distance=models.Distance.COSINE,
            multivector_config=max_sim,
            hnsw_config=_NO_GRAPH,
            on_disk=True if layout.on_disk else None,
            datatype=_DATATYPES[layout.storage],
            quantization_config=_quantization(layout),
        ),
        layout.first_stage_vector: models.VectorParams(
            size=layout.first_stage_dim or dim,
            distance=(
                models.Distance.DOT if layout.first_stage_vector == FDE else models.Distance.COSINE
            ),
            multivector_config=max_sim if layout.first_stage_vector == GRID else None,
            datatype=None if layout.storage == "float32" else models.Datatype.FLOAT16,
        ),
    }


_SCHEMAS = {
    "integer": models.PayloadSchemaType.INTEGER,
    "float": models.PayloadSchemaType.FLOAT,
    "bool": models.PayloadSchemaType.BOOL,
}


def index_schema(kind: IndexKind, is_tenant: bool) -> Any:
    if kind in _SCHEMAS:
        return _SCHEMAS[kind]
    if is_tenant:
        return models.KeywordIndexParams(type=models.KeywordIndexType.KEYWORD, is_tenant=True)
    return models.PayloadSchemaType.KEYWORD


def query_requests(plan: SearchPlan, shard_key: Any = None) -> list[models.QueryRequest]:
    """The plan's branches (dense, then lexical if any) for one ``query_batch_points`` request."""
    where = client_filter(plan.where)
    first_stage = models.Prefetch(
        query=plan.first_stage.tolist(),
        using=plan.layout.first_stage_vector,
        limit=plan.prefetch,
        filter=where,
    )
    rerank_params = None
    if plan.layout.quantization != "none":
        rerank_params = models.SearchParams(
            quantization=models.QuantizationSearchParams(
                rescore=True, oversampling=plan.layout.oversampling
            )
        )
    requests = [
        models.QueryRequest(
            query=plan.multi.tolist(),
            using=MULTI,
            prefetch=[first_stage],
            filter=where,
            params=rerank_params,
            limit=plan.rerank_limit,
            with_payload=True,
            shard_key=shard_key,
        )
    ]
    if plan.sparse is not None:
        idf = (
            models.SearchParams(idf=models.IdfCorpusParams(corpus=where))
            if plan.idf_scope == "filter"
            else None
        )
        requests.append(
            models.QueryRequest(
                query=models.SparseVector(
                    indices=list(plan.sparse.indices), values=list(plan.sparse.values)
                ),
                using=LEXICAL,
                filter=where,
                params=idf,
                limit=plan.prefetch,
                with_payload=True,
                shard_key=shard_key,
            )
        )
    return requests


def commit_operations(commit: op.Commit, shard_key: Any) -> list[Any]:
    """A commit as one ``batch_update_points`` request: record (unless stored already), stale
    pages out, pages released, journal note out (applied in this order by the server)."""
    stale = scope.stale_pages_filter(commit.doc_key, commit.revision)
    pages = scope.revision_pages_filter(commit.doc_key, commit.revision)
    journal = scope.journal_filter([commit.doc_key])
    record = (
        []
        if commit.record is None
        else [
            models.UpsertOperation(
                upsert=models.PointsList(points=[point(commit.record)], shard_key=shard_key)
            )
        ]
    )
    return [
        *record,
        models.DeleteOperation(
            delete=models.FilterSelector(filter=client_filter(stale), shard_key=shard_key)
        ),
        models.DeletePayloadOperation(
            delete_payload=models.DeletePayload(
                keys=[WRITE_STATE], filter=client_filter(pages), shard_key=shard_key
            )
        ),
        models.DeleteOperation(
            delete=models.FilterSelector(filter=client_filter(journal), shard_key=shard_key)
        ),
    ]


def _payload(record: Any) -> dict[str, Any]:
    return dict(record.payload or {})


@dataclass(frozen=True)
class Request:
    """One qdrant-client call: ``getattr(client, method)(collection, **kwargs)`` -> ``parse``."""

    what: str
    method: str
    kwargs: dict[str, Any]
    parse: Callable[[Any], Any] = field(default=lambda reply: reply)


@dataclass(frozen=True)
class Routing:
    """How a tenant reaches its shard: custom shard keys for some tenants, one shared key for
    the rest; None when the collection is not sharded by tenant."""

    dedicated: frozenset[str]
    shared: str

    def write_key(self, route: str | None) -> str:
        return route if route in self.dedicated else self.shared

    def read_key(self, route: str | None) -> str | None:
        """A read of one tenant goes to its shard; the owner's view reads every shard."""
        return None if route is None else self.write_key(route)


def request_for(operation: op.Operation, *, routing: Routing | None, timeout: int) -> Request:
    """The qdrant-client call of one store operation (writes wait, with strong ordering)."""
    route = getattr(operation, "route", None)
    write_key = routing.write_key(route) if routing is not None else None
    read_key = routing.read_key(route) if routing is not None else None
    writes = {"wait": True, "ordering": models.WriteOrdering.STRONG, "timeout": timeout}
    if isinstance(operation, op.Upsert):
        points = [point(p) for p in operation.points]
        return Request(
            "upsert", "upsert", {"points": points, "shard_key_selector": write_key, **writes}
        )
    if isinstance(operation, op.Commit):
        operations = commit_operations(operation, write_key)
        return Request("commit", "batch_update_points", {"update_operations": operations, **writes})
    if isinstance(operation, op.Delete):
        selector = models.FilterSelector(filter=client_filter(operation.where))
        kwargs = {"points_selector": selector, "shard_key_selector": read_key, **writes}
        return Request("delete", "delete", kwargs)
    if isinstance(operation, op.SetPayload):
        kwargs = {
            "payload": operation.payload,
            "points": models.FilterSelector(filter=client_filter(operation.where)),
            "shard_key_selector": read_key,
            **writes,
        }
        return Request("set payload", "set_payload", kwargs)
    if isinstance(operation, op.CreateIndex):
        kwargs = {
            "field_name": operation.key,
            "field_schema": index_schema(operation.kind, operation.is_tenant),
            "wait": True,
            "timeout": timeout,
        }
        return Request(f"indexing payload field '{operation.key}'", "create_payload_index", kwargs)
    if isinstance(operation, op.Scroll):
        fields = operation.fields
        kwargs = {
            "scroll_filter": client_filter(operation.where),
            "limit": operation.limit,
            "offset": operation.offset,
            "with_payload": list(fields) if fields is not None else True,
            "with_vectors": False,
            "shard_key_selector": read_key,
            "timeout": timeout,
        }
        return Request("scroll", "scroll", kwargs, lambda r: ([_payload(p) for p in r[0]], r[1]))
    if isinstance(operation, op.Count):
        kwargs = {
            "count_filter": client_filter(operation.where),
            "exact": operation.exact,
            "shard_key_selector": read_key,
            "timeout": timeout,
        }
        return Request("count", "count", kwargs, lambda reply: reply.count)
    if isinstance(operation, op.Retrieve):
        kwargs = {
            "ids": [operation.point_id],
            "with_payload": True,
            "with_vectors": False,
            "shard_key_selector": read_key,
            "timeout": timeout,
        }
        return Request("retrieve", "retrieve", kwargs, lambda r: _payload(r[0]) if r else None)
    if isinstance(operation, op.Search):
        requests = query_requests(operation.plan, read_key)
        return Request(
            "search",
            "query_batch_points",
            {"requests": requests, "timeout": timeout},
            lambda replies: [[(p.payload or {}, p.score) for p in r.points] for r in replies],
        )
    raise TypeError(f"unknown store operation {operation!r}")
