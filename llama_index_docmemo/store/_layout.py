"""Collection layout shared by both backends: vector names, payload keys, point ids, conversions.

Pure functions over plain data. Both backends store exactly these points, so a store written
through one layout is read back identically by the other, and validation happens here once,
before anything is written.
"""

from __future__ import annotations

import math
import uuid
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any, Literal

import numpy as np

from llama_index_docmemo.errors import StoreError
from llama_index_docmemo.memory.schema import DocumentSchema
from llama_index_docmemo.store import access
from llama_index_docmemo.types import (
    FieldGroup,
    PageEmbedding,
    PageFilter,
    PageRecord,
    SparseVector,
)

MULTI = "multi"
POOLED = "pooled"
LEXICAL = "lexical"

KIND = "kind"
KIND_PAGE = "page"
KIND_DOCUMENT = "document"
KIND_STORE = "store"
KIND_JOURNAL = "journal"
REVISION = "revision"

Fusion = Literal["rrf", "dbsf"]
IdfScope = Literal["filter", "collection"]
FUSIONS: tuple[str, ...] = ("rrf", "dbsf")
IDF_SCOPES: tuple[str, ...] = ("filter", "collection")

DEFAULT_PREFETCH = 200
RRF_K = 2  # Qdrant's own default ranking constant, set explicitly so both backends agree
# RRF weights of the (dense, lexical) branches. With the CPU encoder the lexical branch carries
# most of the signal: on MMLongBench-Doc weight 3 gave recall@5 0.643 vs 0.622 with equal weights
# (benchmarks/retrieval_recall.py). A dense-only encoder (ColQwen) has no lexical branch.
RRF_WEIGHTS = [1.0, 3.0]
LAYOUT_VERSION = 2
"""1: llama-index-docmemo 0.1.0 (doc id = bare file name, one document per name in the store).
2: documents keyed by (tenant, doc id), access fields, revisions and a journal per write."""

PAGE_FIELDS: tuple[str, ...] = (
    "doc_id",
    "doc_version",
    "page",
    "n_pages",
    "section",
    "text",
    "source",
    "tenant",
    "acl",
    "width",
    "height",
    "ocr",
)

# (payload key, index type, is_tenant): the fields every filter of this package touches.
PAYLOAD_INDEXES: tuple[tuple[str, Literal["keyword", "integer"], bool], ...] = (
    ("doc_id", "keyword", False),
    ("doc_version", "keyword", False),
    ("tenant", "keyword", False),
    ("acl", "keyword", False),
    (KIND, "keyword", False),
    ("page", "integer", False),
    (access.TENANT_KEY, "keyword", True),
    (access.ACCESS, "keyword", False),
    (access.DOC_KEY, "keyword", False),
    (REVISION, "keyword", False),
)

_NAMESPACE = uuid.UUID("6f1c2b9e-5d1a-4c07-9a8e-3b2f0d4e7a61")
STORE_POINT_ID = str(uuid.uuid5(_NAMESPACE, "docmemo-store"))


def revision(doc_version: str, acl: Sequence[str]) -> str:
    """What a document's pages are written as: its content and its access (an ACL change is a
    new revision, so pages never carry a mix of old and new access)."""
    return str(uuid.uuid5(_NAMESPACE, f"revision\x00{doc_version}\x00{access.access_values(acl)}"))


def page_point_id(doc_key: str, revision_id: str, page: int) -> str:
    """Deterministic id: the same file re-ingested rewrites the same points."""
    return str(uuid.uuid5(_NAMESPACE, f"page\x00{doc_key}\x00{revision_id}\x00{page}"))


def document_point_id(tenant: str | None, doc_id: str) -> str:
    """One document record per (tenant, doc id): the commit point of each new revision."""
    return access.document_key(tenant, doc_id)


def journal_point_id(doc_key: str) -> str:
    """The write-ahead note of a document being written or deleted (absent when at rest)."""
    return str(uuid.uuid5(_NAMESPACE, f"journal\x00{doc_key}"))


def legacy_document_point_id(doc_id: str) -> str:
    """Layout 1's record id (doc id alone), read only to migrate a 0.1.0 store."""
    return str(uuid.uuid5(_NAMESPACE, f"document\x00{doc_id}"))


# ---------------------------------------------------------------- filters


@dataclass(frozen=True)
class Condition:
    """``key`` equals ``values[0]`` (one value) or any of ``values`` (several)."""

    key: str
    values: tuple[str | int, ...]


@dataclass(frozen=True)
class FilterSpec:
    """A backend-neutral Qdrant filter: all of ``must`` and ``groups``, none of ``must_not``,
    ``empty`` keys unset.

    ``groups`` are metadata conditions (``PageFilter.where``), translated by ``store/filters.py``.
    """

    must: tuple[Condition, ...]
    must_not: tuple[Condition, ...] = ()
    groups: tuple[FieldGroup, ...] = ()
    empty: tuple[str, ...] = ()


def matches_nothing(page_filter: PageFilter | None) -> bool:
    """An empty ``doc_ids`` tuple admits no point at all (no groups still sees public documents)."""
    return page_filter is not None and page_filter.doc_ids == ()


def scope_filter(
    kind: str, page_filter: PageFilter | None, **extra: Sequence[str | int]
) -> FilterSpec:
    """Points of ``kind`` visible through ``page_filter`` (see :mod:`.access`), restricted by ``extra``."""
    must = [Condition(KIND, (kind,))]
    must += [Condition(key, values) for key, values in access.access_conditions(page_filter)]
    for key, values in extra.items():
        must.append(Condition(key, tuple(values)))
    groups = (page_filter.where,) if page_filter is not None and page_filter.where else ()
    return FilterSpec(tuple(must), groups=groups)


def stale_pages_filter(doc_key: str, keep_revision: str | None) -> FilterSpec:
    """Pages of one document other than those of ``keep_revision`` (None: all its pages)."""
    must = (Condition(KIND, (KIND_PAGE,)), Condition(access.DOC_KEY, (doc_key,)))
    if keep_revision is None:
        return FilterSpec(must=must)
    return FilterSpec(must=must, must_not=(Condition(REVISION, (keep_revision,)),))


def kind_filter(kind: str, **extra: Sequence[str | int]) -> FilterSpec:
    """Every point of ``kind`` (journal notes, records...), restricted by ``extra`` keys."""
    must = [Condition(KIND, (kind,))]
    must += [Condition(key, tuple(values)) for key, values in extra.items()]
    return FilterSpec(tuple(must))


# ---------------------------------------------------------------- payloads


def access_payload(tenant: str | None, doc_id: str, acl: Sequence[str]) -> dict[str, Any]:
    """The identity and access fields every point of a document carries (see :mod:`.access`)."""
    return {
        access.TENANT_KEY: access.tenant_key(tenant),
        access.ACCESS: access.access_values(acl),
        access.DOC_KEY: access.document_key(tenant, doc_id),
    }


def page_payload(record: PageRecord) -> dict[str, Any]:
    payload: dict[str, Any] = {name: getattr(record, name) for name in PAGE_FIELDS}
    payload["acl"] = list(record.acl)
    payload[KIND] = KIND_PAGE
    payload.update(access_payload(record.tenant, record.doc_id, record.acl))
    payload[REVISION] = revision(record.doc_version, record.acl)
    return payload


def record_from_payload(payload: dict[str, Any]) -> PageRecord:
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
    )


def document_payload(schema: DocumentSchema) -> dict[str, Any]:
    """The schema as JSON text, beside the fields that filters need."""
    return {
        KIND: KIND_DOCUMENT,
        "doc_id": schema.doc_id,
        "doc_version": schema.doc_version,
        "tenant": schema.tenant,
        "acl": list(schema.acl),
        REVISION: revision(schema.doc_version, schema.acl),
        **access_payload(schema.tenant, schema.doc_id, schema.acl),
        "schema": schema.model_dump_json(),
    }


def journal_point(doc_key: str, revision_id: str | None) -> PointData:
    """The note written before a document's pages change: which document, which revision is coming
    (None: the document is being deleted). Recovery reads it after a crash."""
    return PointData(
        journal_point_id(doc_key),
        {},
        None,
        {KIND: KIND_JOURNAL, access.DOC_KEY: doc_key, REVISION: revision_id},
    )


def schema_from_payload(payload: dict[str, Any]) -> DocumentSchema:
    return DocumentSchema.model_validate_json(payload["schema"])


@dataclass(frozen=True)
class StoreMeta:
    """What a store was created with; a store is only ever queried with the same encoder."""

    encoder_name: str
    dim: int
    sparse: bool

    def payload(self, layout: int = LAYOUT_VERSION) -> dict[str, Any]:
        return {
            KIND: KIND_STORE,
            "layout": layout,
            "encoder_name": self.encoder_name,
            "dim": self.dim,
            "sparse": self.sparse,
        }

    @classmethod
    def from_payload(cls, payload: dict[str, Any]) -> StoreMeta:
        return cls(str(payload["encoder_name"]), int(payload["dim"]), bool(payload["sparse"]))

    def check(self, stored: StoreMeta, where: str) -> None:
        """Raise unless ``stored`` (what ``where`` holds) is what this store is opened with."""
        if stored != self:
            raise StoreError(
                f"{where} was created with encoder '{stored.encoder_name}' (dim {stored.dim}, "
                f"sparse={stored.sparse}) but is opened with encoder '{self.encoder_name}' "
                f"(dim {self.dim}, sparse={self.sparse}): use the same encoder, or another store"
            )


def check_choice(name: str, value: str, choices: tuple[str, ...]) -> None:
    if value not in choices:
        raise StoreError(f"{name}={value!r} is not one of {', '.join(choices)}")


# ---------------------------------------------------------------- validation


@dataclass(frozen=True)
class PointData:
    """One point ready to write: id, named vectors (empty for schema/meta points), payload."""

    id: str
    dense: dict[str, list[float] | list[list[float]]]
    sparse: SparseVector | None
    payload: dict[str, Any]


def _dense(array: Any, shape: tuple[int | None, ...], what: str) -> np.ndarray:
    """``array`` as float32 of ``shape`` (None: any positive length), finite, or a StoreError."""
    try:
        values = np.asarray(array, dtype=np.float32)
    except (TypeError, ValueError) as exc:
        raise StoreError(f"{what}: not a numeric array ({exc})") from exc
    expected = "(" + ", ".join("n" if n is None else str(n) for n in shape) + ")"
    if values.ndim != len(shape) or any(
        (n is None and got < 1) or (n is not None and got != n)
        for n, got in zip(shape, values.shape, strict=False)
    ):
        raise StoreError(f"{what}: shape {values.shape}, expected {expected}")
    if not np.isfinite(values).all():
        raise StoreError(f"{what}: contains NaN or infinite values")
    return values


def _sparse(vector: SparseVector, what: str) -> SparseVector | None:
    """A checked sparse vector, or None when it has no terms (Qdrant stores nothing then)."""
    if len(vector.indices) != len(vector.values):
        raise StoreError(
            f"{what}: sparse vector has {len(vector.indices)} indices but {len(vector.values)} values"
        )
    if len(set(vector.indices)) != len(vector.indices):
        raise StoreError(f"{what}: sparse vector has repeated indices")
    if any(not 0 <= int(i) < 2**32 for i in vector.indices):
        raise StoreError(f"{what}: sparse vector index outside [0, 2**32)")
    if any(not math.isfinite(float(v)) for v in vector.values):
        raise StoreError(f"{what}: sparse vector contains NaN or infinite values")
    if not vector.indices:
        return None
    return SparseVector(
        tuple(int(i) for i in vector.indices), tuple(float(v) for v in vector.values)
    )


@dataclass(frozen=True)
class QueryVectors:
    """A validated query: MaxSim rows, pooled vector, optional lexical vector."""

    multi: list[list[float]]
    pooled: list[float]
    sparse: SparseVector | None


def embedding_vectors(
    embedding: PageEmbedding, dim: int, *, use_sparse: bool, what: str
) -> QueryVectors:
    """Check an embedding against the store's dimension; keep the sparse part only if stored."""
    multi = _dense(embedding.multivector, (None, dim), f"{what}: multivector")
    pooled = _dense(embedding.pooled, (dim,), f"{what}: pooled vector")
    sparse = None
    if use_sparse and embedding.sparse is not None:
        sparse = _sparse(embedding.sparse, what)
    return QueryVectors(multi.tolist(), pooled.tolist(), sparse)


def document_points(
    schema: DocumentSchema,
    pages: Sequence[PageRecord],
    embeddings: Sequence[PageEmbedding],
    *,
    dim: int,
    use_sparse: bool,
) -> tuple[list[PointData], PointData]:
    """Page points and the schema point of a document, after checking every input.

    Raises:
        StoreError: naming the document and page of the first bad record or embedding.
    """
    doc = f"document {schema.doc_id!r} (version {schema.doc_version[:12]})"
    try:
        access.check_name("doc_id", schema.doc_id)
        if schema.tenant is not None:
            access.check_name("tenant", schema.tenant)
        for group in schema.acl:
            access.check_name("ACL group", group)
    except ValueError as exc:
        raise StoreError(f"{doc}: {exc}") from exc
    if len(pages) != len(embeddings):
        raise StoreError(f"{doc}: {len(pages)} pages but {len(embeddings)} embeddings")
    seen: set[int] = set()
    points: list[PointData] = []
    doc_key = access.document_key(schema.tenant, schema.doc_id)
    rev = revision(schema.doc_version, schema.acl)
    for record, embedding in zip(pages, embeddings, strict=True):
        what = f"{doc} page {record.page}"
        if record.doc_id != schema.doc_id or record.doc_version != schema.doc_version:
            raise StoreError(
                f"{what}: record belongs to {record.doc_id!r} version {record.doc_version[:12]}"
            )
        if record.tenant != schema.tenant or sorted(record.acl) != sorted(schema.acl):
            raise StoreError(f"{what}: tenant or ACL differs from the document's")
        if not 1 <= record.page <= record.n_pages:
            raise StoreError(f"{what}: page number outside 1..{record.n_pages}")
        if record.page in seen:
            raise StoreError(f"{what}: page given twice")
        seen.add(record.page)
        vectors = embedding_vectors(embedding, dim, use_sparse=use_sparse, what=what)
        points.append(
            PointData(
                id=page_point_id(doc_key, rev, record.page),
                dense={MULTI: vectors.multi, POOLED: vectors.pooled},
                sparse=vectors.sparse,
                payload=page_payload(record),
            )
        )
    schema_point = PointData(doc_key, {}, None, document_payload(schema))
    return points, schema_point


def query_vectors(query: PageEmbedding, dim: int, *, use_sparse: bool) -> QueryVectors:
    return embedding_vectors(query, dim, use_sparse=use_sparse, what="query")


@dataclass(frozen=True)
class SearchPlan:
    """Everything a backend needs to build its two-stage (optionally fused) Query API request.

    Dense branch: ``prefetch`` points by the pooled vector, reranked by MaxSim on the
    multivector. With ``vectors.sparse``: that branch and a lexical branch of the same depth
    are fused (RRF or DBSF) into ``limit`` results. ``where`` applies to every stage.
    """

    vectors: QueryVectors
    where: FilterSpec
    limit: int
    prefetch: int
    fusion: Fusion
    idf_scope: IdfScope


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
) -> SearchPlan:
    if limit < 1:
        raise StoreError(f"search limit must be at least 1, got {limit}")
    if prefetch_limit is not None and prefetch_limit < 1:
        raise StoreError(f"prefetch_limit must be at least 1, got {prefetch_limit}")
    prefetch = max(limit, prefetch_limit if prefetch_limit is not None else DEFAULT_PREFETCH)
    return SearchPlan(
        vectors=query_vectors(query, dim, use_sparse=has_lexical),
        where=scope_filter(KIND_PAGE, page_filter),
        limit=limit,
        prefetch=prefetch,
        fusion=fusion,
        idf_scope=idf_scope,
    )


# ---------------------------------------------------------------- feedback queries

FeedbackVector = Literal["pooled", "multi"]
FeedbackStrategy = Literal["best_score", "sum_scores"]
FEEDBACK_VECTORS: tuple[str, ...] = ("pooled", "multi")
FEEDBACK_STRATEGIES: tuple[str, ...] = ("best_score", "sum_scores")
MAX_CONTEXT_PAIRS = 16

Vector = list[float] | list[list[float]]


@dataclass(frozen=True)
class FeedbackPlan:
    """A recommend or discovery request on stored page vectors (both backends build it alike).

    Without ``target``: Qdrant's recommend query (``strategy``) with the examples' vectors.
    With ``target`` and at least one negative: a discovery query, ranked first by how many
    (positive, negative) context pairs a page sits on the positive side of, then by the target.
    ``using`` names the stored vector (``pooled`` or the ``multi`` MaxSim one); ``where``
    restricts the result to the pages the caller may see.
    """

    positives: list[Vector]
    negatives: list[Vector]
    target: Vector | None
    using: str
    strategy: FeedbackStrategy
    where: FilterSpec
    limit: int

    @property
    def context_pairs(self) -> list[tuple[Vector, Vector]]:
        pairs = [(p, n) for p in self.positives for n in self.negatives]
        return pairs[:MAX_CONTEXT_PAIRS]

    @property
    def discovery(self) -> bool:
        return self.target is not None and bool(self.negatives)


def check_feedback(using: str, strategy: str, limit: int) -> None:
    """Raise a StoreError for an unknown vector or strategy, or a limit below 1."""
    check_choice("feedback vector", using, FEEDBACK_VECTORS)
    check_choice("feedback strategy", strategy, FEEDBACK_STRATEGIES)
    if limit < 1:
        raise StoreError(f"feedback search limit must be at least 1, got {limit}")


def feedback_vector_name(using: str) -> str:
    """The stored vector a feedback search compares ("pooled" or "multi")."""
    return MULTI if using == "multi" else POOLED


def feedback_plan(
    positives: Sequence[Vector],
    negatives: Sequence[Vector],
    *,
    target: PageEmbedding | None,
    dim: int,
    using: str,
    strategy: str,
    page_filter: PageFilter | None,
    limit: int,
) -> FeedbackPlan:
    """Validate a feedback request; the query vector of ``target`` is taken from ``using``."""
    check_feedback(using, strategy, limit)
    if not positives:
        raise StoreError("a feedback search needs at least one positive example page")
    target_vector: Vector | None = None
    if target is not None:
        vectors = query_vectors(target, dim, use_sparse=False)
        target_vector = vectors.multi if using == MULTI else vectors.pooled
    return FeedbackPlan(
        positives=list(positives),
        negatives=list(negatives),
        target=target_vector,
        using=feedback_vector_name(using),
        strategy=strategy,  # type: ignore[arg-type]
        where=scope_filter(KIND_PAGE, page_filter),
        limit=limit,
    )


# ---------------------------------------------------------------- deterministic fusion

ScoredPayload = tuple[dict[str, Any], float]


def _tie_key(payload: dict[str, Any]) -> tuple[str, int, str, str]:
    """(doc_id, page), then the point's identity: two tenants' ``report.pdf`` p.1, or two
    revisions of one document during a write, are different points, never fused into one."""
    return (
        str(payload.get("doc_id", "")),
        int(payload.get("page", 0)),
        str(payload.get(access.DOC_KEY, "")),
        str(payload.get(REVISION, "")),
    )


def order_branch(scored: Sequence[ScoredPayload]) -> list[ScoredPayload]:
    """Best first; equal scores by (doc_id, page).

    Qdrant leaves the order of equal scores to chance (segment and hash-map order): pages without
    text share one dense vector and are absent from the lexical branch, so whole groups tie. Their
    rank decides their fused score, so each branch is put in this fixed order before fusing.
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
    fused: dict[tuple[str, int, str, str], float] = {}
    payloads: dict[tuple[str, int, str, str], dict[str, Any]] = {}
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
