"""Multivector layouts: how a page's vectors are stored and searched, the same on both backends.

A page's original multivector (MaxSim rerank, no HNSW graph) sits beside a small first-stage
vector with an HNSW index, which finds the candidates the rerank scores:

- ``first_stage="mean"``: one mean-pooled vector per page (128 floats). Cheapest to build and
  store; finds the right pages only while pages' means stay apart.
- ``first_stage="rows_cols"``: Qdrant's ColPali recipe: the mean of each row and of each column
  of the page's patch grid as a small multivector (about 56 vectors for ColQwen's ~32x24 grid),
  indexed by HNSW under MaxSim, queried with the query's own multivector. A multivector without
  a grid (text tokens) is laid out as a near-square grid of its rows.
- ``first_stage="muvera"``: one MUVERA fixed-dimensional encoding per page (:mod:`.muvera`,
  ``Muvera().dimension()`` = 4,096 values), whose dot product with the query's approximates
  MaxSim: content and background patches land in different buckets, so the right pages rank
  near the top with fewer candidates than the mean needs.
- ``storage``: the original and the first stage as float32, float16 (half the bytes; Qdrant
  converts on read), ``"turbo8"`` or ``"turbo4"`` (the original TurboQuant-coded, 1 byte or
  4 bits a dimension: a quarter or an eighth of float32, scored as stored; the first stage stays
  float16).
- ``quantization``: a copy of the original kept in RAM that the rerank scores, then rescoring
  the best ``oversampling`` x limit with the original: ``"scalar"`` (int8, 4x smaller than
  float32), ``"turbo4"`` / ``"turbo2"`` (TurboQuant, 8x / 16x smaller) or ``"binary"`` (1 bit
  a dimension, 32x smaller; ``query_encoding`` ``"scalar4"`` / ``"scalar8"`` keeps the query at
  4 or 8 bits, asymmetric, for a closer estimate at the same storage).
- ``on_disk``: the original stays on disk (memory-mapped), only what a query touches is read.
- ``token_pool_factor``: colpali-engine's hierarchical token pooling (:func:`pool_tokens`,
  scipy, extra ``colqwen``) merges similar vectors at ingest, keeping a 1/factor share of
  them: fewer bytes and a faster rerank, scored on the pooled vectors from then on.

What each costs is measured by ``benchmarks/store_scale.py`` (docs/backends.md, "Sizing").
"""

from __future__ import annotations

import math
from dataclasses import asdict, dataclass
from functools import lru_cache
from typing import Any, Literal

import numpy as np

from llama_index_docmemo._extras import require
from llama_index_docmemo.errors import StoreError
from llama_index_docmemo.store.blas import one_blas_thread
from llama_index_docmemo.store.muvera import Muvera

MULTI = "multi"
POOLED = "pooled"
GRID = "pooled_grid"
FDE = "muvera"
LEXICAL = "lexical"

FirstStage = Literal["mean", "rows_cols", "muvera"]
Storage = Literal["float32", "float16", "turbo8", "turbo4"]
Quantization = Literal["none", "scalar", "turbo4", "turbo2", "binary"]
QueryEncoding = Literal["default", "scalar4", "scalar8"]
FIRST_STAGES: tuple[str, ...] = ("mean", "rows_cols", "muvera")
STORAGES: tuple[str, ...] = ("float32", "float16", "turbo8", "turbo4")
QUANTIZATIONS: tuple[str, ...] = ("none", "scalar", "turbo4", "turbo2", "binary")
QUERY_ENCODINGS: tuple[str, ...] = ("default", "scalar4", "scalar8")
_STORAGE_BITS = {"float32": 32, "float16": 16, "turbo8": 8, "turbo4": 4}
_QUANTIZED_BITS = {"none": 0, "scalar": 8, "turbo4": 4, "turbo2": 2, "binary": 1}


@dataclass(frozen=True)
class MultivectorLayout:
    """The store's multivector layout (see the module docstring for what each choice costs).

    Fixed when a store is created and kept in its store record: reopening with another layout
    raises, since the stored vectors would not match.
    """

    first_stage: FirstStage = "mean"
    storage: Storage = "float32"
    quantization: Quantization = "none"
    oversampling: float = 2.0
    on_disk: bool = False
    token_pool_factor: int = 1
    query_encoding: QueryEncoding = "default"
    muvera: Muvera = Muvera()

    def __post_init__(self) -> None:
        for name, value, choices in (
            ("first_stage", self.first_stage, FIRST_STAGES),
            ("storage", self.storage, STORAGES),
            ("quantization", self.quantization, QUANTIZATIONS),
            ("query_encoding", self.query_encoding, QUERY_ENCODINGS),
        ):
            if value not in choices:
                raise StoreError(f"layout {name}={value!r} is not one of {', '.join(choices)}")
        if self.query_encoding != "default" and self.quantization != "binary":
            raise StoreError(
                f"layout query_encoding={self.query_encoding!r} applies to binary quantization "
                f"only, not quantization={self.quantization!r}"
            )
        if not 1.0 <= self.oversampling <= 16.0:
            raise StoreError(f"layout oversampling must be in [1, 16], got {self.oversampling}")
        if not 1 <= self.token_pool_factor <= 16:
            raise StoreError(
                f"layout token_pool_factor must be in [1, 16], got {self.token_pool_factor}"
            )

    @property
    def first_stage_vector(self) -> str:
        """The named vector the first stage searches (HNSW-indexed)."""
        return {"rows_cols": GRID, "muvera": FDE}.get(self.first_stage, POOLED)

    @property
    def first_stage_dim(self) -> int | None:
        """The first stage's own width when it is not the encoder's (MUVERA), else None."""
        return self.muvera.dimension() if self.first_stage == "muvera" else None

    def vector_bytes(self, n_vectors: int, dim: int, grid: tuple[int, int] | None = None) -> int:
        """Bytes of vector data one page of ``n_vectors`` x ``dim`` stores in this layout: the
        original (pooled, as stored), its quantized copy and the first stage. Graph links,
        payload, ids and the engine's per-store preallocation come on top (``store_scale.py``
        measures them: docs/backends.md, "Sizing")."""
        kept = (
            max(n_vectors // self.token_pool_factor, 1) if self.token_pool_factor > 1 else n_vectors
        )
        original = kept * dim * _STORAGE_BITS[self.storage] // 8
        copy = kept * dim * _QUANTIZED_BITS[self.quantization] // 8
        first_width = 4 if self.storage == "float32" else 2
        if self.first_stage == "muvera":
            first = self.muvera.dimension() * first_width
        elif self.first_stage == "rows_cols":
            first = sum(grid_shape(n_vectors, grid)) * dim * first_width
        else:
            first = dim * first_width
        return original + copy + first

    def payload(self) -> dict[str, Any]:
        return asdict(self)

    @classmethod
    def from_payload(cls, payload: dict[str, Any] | None) -> MultivectorLayout:
        """The layout a store record names; stores from before layouts had :data:`LEGACY`
        (and records from before MUVERA no ``muvera`` entry)."""
        if payload is None:
            return LEGACY
        fields = dict(payload)
        muvera = Muvera(**fields.pop("muvera")) if "muvera" in fields else Muvera()
        return cls(**fields, muvera=muvera)

    def page_vectors(
        self, multivector: np.ndarray, pooled: np.ndarray, grid: tuple[int, int] | None
    ) -> dict[str, np.ndarray]:
        """The named dense vectors stored for one page (checked float32 input).

        Computed with one BLAS thread: these products are small (a page's 768 x 128), and
        OpenBLAS's threads cost more than they save on them, 3-10x the CPU on a busy machine
        (MUVERA 8.9 against 2.6 ms a page, pooling 68 against 27 ms, measured on 2 cores
        shared with other jobs).
        """
        with one_blas_thread():
            return self._page_vectors(multivector, pooled, grid)

    def _page_vectors(
        self, multivector: np.ndarray, pooled: np.ndarray, grid: tuple[int, int] | None
    ) -> dict[str, np.ndarray]:
        if self.first_stage == "rows_cols":
            first = grid_means(multivector, grid)
        elif self.first_stage == "muvera":
            first = self.muvera.encode_page(multivector)
        else:
            first = pooled
        original = multivector
        if self.token_pool_factor > 1:
            original = pool_tokens(multivector, self.token_pool_factor)
        return {MULTI: original, self.first_stage_vector: first}

    def query_first_stage(self, multivector: np.ndarray, pooled: np.ndarray) -> np.ndarray:
        """What the first stage is queried with: the pooled vector, the query's rows (MaxSim
        against the grid means) or the query's MUVERA encoding."""
        if self.first_stage == "rows_cols":
            return multivector
        if self.first_stage == "muvera":
            return self.muvera.encode_query(multivector)
        return pooled


LEGACY = MultivectorLayout()
"""The layout of every store written before layouts were configurable (0.1.0 and 0.2 dev)."""
DEFAULT_LAYOUT = MultivectorLayout()
"""New stores of text encoders (the CPU default: a few hundred small vectors a page)."""
PAGE_IMAGE_LAYOUT = MultivectorLayout(
    first_stage="muvera", storage="turbo8", token_pool_factor=2, muvera=Muvera(k_sim=5, reps=8)
)
"""New stores of page-image encoders (ColQwen2.5: ~750 patch vectors a page), chosen from the
sizing tables (docs/backends.md, "Sizing"): a MUVERA first stage of 32 buckets x 8 repetitions
(4,096 values: at 100,000 synthetic pages its exact top-200 holds 0.966 of the exact top-10
against 0.944 for 16 x 16), originals pooled by 2 (384 of 768 vectors: the pooled rerank of the
top-400 keeps 0.970 there, pooling by 3 0.950) and TurboQuant-coded at 1 byte a dimension:
57 KB of vectors a page, 63.5 KB on disk at 100,000 pages, recall@10 0.960 at the 300
candidates a search takes there (``operations.prefetch_for``; 31 ms p50), 0.932 at 200 (21 ms). Stores
created before keep the layout their record names."""


def grid_shape(n_vectors: int, grid: tuple[int, int] | None) -> tuple[int, int]:
    """(rows, columns) of a page's vectors: the encoder's patch grid, else near-square."""
    if grid is not None:
        rows, columns = grid
        if rows < 1 or columns < 1 or rows * columns != n_vectors:
            raise StoreError(f"patch grid {rows}x{columns} does not hold {n_vectors} vectors")
        return rows, columns
    columns = max(1, math.ceil(math.sqrt(n_vectors)))
    return math.ceil(n_vectors / columns), columns


def grid_means(multivector: np.ndarray, grid: tuple[int, int] | None) -> np.ndarray:
    """Mean of each row and of each column of the patch grid, unit length: (rows + cols, dim).

    Without a grid the vectors fill a near-square grid row by row (the last row may be short).
    """
    n, dim = multivector.shape
    rows, columns = grid_shape(n, grid)
    padded = np.full((rows * columns, dim), np.nan, dtype=np.float32)
    padded[:n] = multivector
    cells = padded.reshape(rows, columns, dim)
    with np.errstate(invalid="ignore"):
        means = np.concatenate([np.nanmean(cells, axis=1), np.nanmean(cells, axis=0)])
    means = means[~np.isnan(means).any(axis=1)]
    norms = np.linalg.norm(means, axis=1, keepdims=True)
    return (means / np.where(norms > 0, norms, 1.0)).astype(np.float32)


@lru_cache(maxsize=4)
def _upper_triangle(n: int) -> tuple[np.ndarray, np.ndarray]:
    """Indices of the condensed distance vector scipy's linkage takes (one page size, once)."""
    return np.triu_indices(n, k=1)


def pool_tokens(multivector: np.ndarray, factor: int) -> np.ndarray:
    """colpali-engine's ``HierarchicalTokenPooler``, the same clusters for a third of the CPU.

    Like the pooler, Ward linkage over the rows of the cosine-distance matrix ``D = 1 - X X^T``
    (each vector described by its distances to all the others), cut into ``n // factor``
    clusters, each replaced by its unit-length mean, in cluster order. The pooler hands the
    n x n rows to scipy's ``pdist`` (O(n^2) distances of n values: ~90 ms of CPU for a
    768-vector page); here ``|D_i - D_j|^2 = (x_i - x_j)^T X^T X (x_i - x_j)`` takes two
    matrix products of width ``dim`` (a 768-vector page: ~8 ms, then the Ward linkage ~12 ms), in
    float64 so the merges come out the same (tests/test_token_pooling.py checks it against
    colpali-engine). Needs scipy (the ``colqwen`` extra: only page-image encoders get a pooled
    layout, and reading a pooled store does not pool).
    """
    hierarchy = require("scipy.cluster.hierarchy", extra="colqwen", feature="token pooling")
    vectors = multivector.astype(np.float64)
    n = len(vectors)
    if n < 2:
        return np.ascontiguousarray(multivector, dtype=np.float32)
    projected = vectors @ (vectors.T @ vectors)
    norms = np.einsum("ij,ij->i", projected, vectors)
    cross = projected @ vectors.T
    cross += cross.T  # symmetric, so one triangle is read (contiguously)
    squared = norms[:, None] + norms[None, :] - cross
    distances = np.sqrt(np.maximum(squared[_upper_triangle(n)], 0.0))
    clusters = max(n // factor, 1)
    tree = hierarchy.linkage(distances, method="ward")
    labels = hierarchy.fcluster(tree, t=clusters, criterion="maxclust") - 1
    counts = np.bincount(labels, minlength=clusters)
    counts = counts[counts > 0]
    starts = np.concatenate([[0], np.cumsum(counts)[:-1]])
    sums = np.add.reduceat(vectors[np.argsort(labels, kind="stable")], starts, axis=0)
    return (sums / np.linalg.norm(sums, axis=1, keepdims=True)).astype(np.float32)
