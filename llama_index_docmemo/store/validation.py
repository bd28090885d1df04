"""Checks on everything a store is given, done once before anything is written or sent.

A bad embedding or record raises a :class:`StoreError` naming the document and page (for a
document to write, a :class:`DocumentRejectedError`: that document fails, the store is fine); a
good document becomes its page points and record point here, in the store's multivector layout.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass, replace

import numpy as np

from llama_index_docmemo.errors import DocumentRejectedError, StoreError
from llama_index_docmemo.memory.schema import DocumentSchema
from llama_index_docmemo.store import ids
from llama_index_docmemo.store.layouts import MULTI, MultivectorLayout
from llama_index_docmemo.store.payloads import (
    REVISION,
    PointData,
    document_payload,
    page_payload,
)
from llama_index_docmemo.types import PageEmbedding, PageRecord, SparseVector, StoredVectors


def dense(array: object, shape: tuple[int | None, ...], what: str) -> np.ndarray:
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


def sparse(vector: SparseVector, what: str) -> SparseVector | None:
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
class CheckedEmbedding:
    """A validated page or query embedding: float32 arrays, sparse part only if stored."""

    multi: np.ndarray
    pooled: np.ndarray
    sparse: SparseVector | None
    grid: tuple[int, int] | None


def checked_embedding(
    embedding: PageEmbedding, dim: int, *, use_sparse: bool, what: str
) -> CheckedEmbedding:
    """Check an embedding against the store's dimension; keep the sparse part only if stored."""
    multi = dense(embedding.multivector, (None, dim), f"{what}: multivector")
    pooled = dense(embedding.pooled, (dim,), f"{what}: pooled vector")
    lexical = None
    if use_sparse and embedding.sparse is not None:
        lexical = sparse(embedding.sparse, what)
    grid = embedding.grid
    if grid is not None and (len(grid) != 2 or int(grid[0]) * int(grid[1]) != len(multi)):
        raise StoreError(f"{what}: patch grid {grid} does not hold {len(multi)} vectors")
    return CheckedEmbedding(multi, pooled, lexical, grid)


def lay_out(embedding: PageEmbedding, layout: MultivectorLayout, dim: int) -> PageEmbedding:
    """``embedding`` with the vectors ``layout`` stores for it attached (:class:`StoredVectors`),
    for a worker to compute beside its encoder. An embedding the store would reject is returned
    as it is: the write rejects it, naming its document and page."""
    try:
        checked = checked_embedding(embedding, dim, use_sparse=False, what="page")
        vectors = layout.page_vectors(checked.multi, checked.pooled, checked.grid)
    except StoreError:
        return embedding
    return replace(embedding, stored=StoredVectors(layout.payload(), vectors))


def stored_vectors(
    stored: StoredVectors | None, layout: MultivectorLayout, dim: int, what: str
) -> dict[str, np.ndarray] | None:
    """Checked laid-out vectors when they were made for ``layout``, else None (compute them)."""
    if stored is None or stored.layout != layout.payload():
        return None
    first = layout.first_stage_vector
    if set(stored.vectors) != {MULTI, first}:
        raise StoreError(
            f"{what}: laid-out vectors {sorted(stored.vectors)}, the layout stores "
            f"{sorted({MULTI, first})}"
        )
    first_shape: tuple[int | None, ...] = {
        "mean": (dim,),
        "rows_cols": (None, dim),
        "muvera": (layout.first_stage_dim,),
    }[layout.first_stage]
    return {
        MULTI: dense(stored.vectors[MULTI], (None, dim), f"{what}: laid-out {MULTI}"),
        first: dense(stored.vectors[first], first_shape, f"{what}: laid-out {first}"),
    }


def _check_names(schema: DocumentSchema, doc: str) -> None:
    try:
        ids.check_name("doc_id", schema.doc_id)
        if schema.tenant is not None:
            ids.check_name("tenant", schema.tenant)
        for group in schema.acl:
            ids.check_name("ACL group", group)
        ids.check_utf8("source file name", schema.source)
    except ValueError as exc:
        raise StoreError(f"{doc}: {exc}") from exc


def _check_record(record: PageRecord, schema: DocumentSchema, seen: set[int], what: str) -> None:
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


def document_points(
    schema: DocumentSchema,
    pages: Sequence[PageRecord],
    embeddings: Sequence[PageEmbedding],
    *,
    dim: int,
    use_sparse: bool,
    layout: MultivectorLayout,
) -> tuple[list[PointData], PointData]:
    """Page points (marked pending: the record commits them) and the record point of a document.

    Raises:
        DocumentRejectedError: naming the document and page of the first bad name, record or
            embedding.
    """
    try:
        return _document_points(schema, pages, embeddings, dim, use_sparse, layout)
    except StoreError as exc:
        raise DocumentRejectedError(str(exc)) from exc


def _document_points(
    schema: DocumentSchema,
    pages: Sequence[PageRecord],
    embeddings: Sequence[PageEmbedding],
    dim: int,
    use_sparse: bool,
    layout: MultivectorLayout,
) -> tuple[list[PointData], PointData]:
    doc = f"document {schema.doc_id!r} (version {schema.doc_version[:12]})"
    _check_names(schema, doc)
    if len(pages) != len(embeddings):
        raise StoreError(f"{doc}: {len(pages)} pages but {len(embeddings)} embeddings")
    seen: set[int] = set()
    points: list[PointData] = []
    record_point = PointData(
        ids.document_point_id(schema.tenant, schema.doc_id), payload=document_payload(schema)
    )
    rev = str(record_point.payload[REVISION])
    for record, embedding in zip(pages, embeddings, strict=True):
        what = f"{doc} page {record.page}"
        _check_record(record, schema, seen, what)
        vectors = checked_embedding(embedding, dim, use_sparse=use_sparse, what=what)
        laid_out = stored_vectors(embedding.stored, layout, dim, what)
        points.append(
            PointData(
                id=ids.page_point_id(record_point.id, rev, record.page),
                dense=laid_out or layout.page_vectors(vectors.multi, vectors.pooled, vectors.grid),
                sparse=vectors.sparse,
                payload=page_payload(record, rev, pending=True),
            )
        )
    return points, record_point
