"""Multivector layouts: the same on both backends, fixed in the store record, what they store."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest
from test_store_backends import (
    DIM,
    assert_same_hits,
    corpus,
    make_query,
    maxsim_ranking,
    open_store_on,
)

from llama_index_docmemo.encoders.base import PageEncoder
from llama_index_docmemo.errors import StoreError
from llama_index_docmemo.store import MultivectorLayout, open_store
from llama_index_docmemo.store.layouts import (
    DEFAULT_LAYOUT,
    GRID,
    MULTI,
    PAGE_IMAGE_LAYOUT,
    POOLED,
    grid_means,
    grid_shape,
    pool_tokens,
)
from llama_index_docmemo.store.points import document_points
from llama_index_docmemo.types import PageEmbedding

PREVIOUS_PAGE_IMAGE_LAYOUT = MultivectorLayout(
    first_stage="mean", storage="float16", quantization="binary", oversampling=2.0
)
"""``PAGE_IMAGE_LAYOUT`` until 0.2 dev: stores created with it keep it."""
POOL3_PAGE_IMAGE_LAYOUT = MultivectorLayout(
    first_stage="muvera", storage="turbo8", token_pool_factor=3
)
"""``PAGE_IMAGE_LAYOUT`` later in 0.2 dev (16 x 16 MUVERA, pooled by 3)."""

ROWS_COLS = MultivectorLayout(first_stage="rows_cols", storage="float16")
TURBO4_RTOL = 0.2
"""4 bits a value on the corpus's 16-d vectors: up to 11% off a score measured (128-d: ~1%)."""
LAYOUTS = [
    MultivectorLayout(),
    MultivectorLayout(storage="float16", quantization="scalar"),
    ROWS_COLS,
    MultivectorLayout(first_stage="rows_cols", quantization="binary", oversampling=4.0),
    MultivectorLayout(first_stage="rows_cols", storage="float16", on_disk=True),
    MultivectorLayout(first_stage="muvera", storage="float16"),
    MultivectorLayout(storage="float16", quantization="turbo4"),
    MultivectorLayout(storage="float16", quantization="turbo2", oversampling=4.0),
    MultivectorLayout(storage="float16", quantization="binary", query_encoding="scalar8"),
    MultivectorLayout(first_stage="muvera", storage="turbo8", quantization="turbo4"),
]


def test_grid_means_pool_each_row_and_column() -> None:
    cells = np.arange(2 * 3 * 2, dtype=np.float32).reshape(6, 2) + 1.0  # a 2 x 3 grid
    means = grid_means(cells, (2, 3))
    grid = cells.reshape(2, 3, 2)
    expected = np.concatenate([grid.mean(axis=1), grid.mean(axis=0)])
    expected /= np.linalg.norm(expected, axis=1, keepdims=True)
    np.testing.assert_allclose(means, expected, rtol=1e-6)
    # no grid: a near-square one, the last row short (7 vectors -> 3 x 3 with 2 missing)
    assert grid_shape(7, None) == (3, 3)
    assert grid_means(np.ones((7, 4), np.float32), None).shape == (6, 4)
    with pytest.raises(StoreError, match="grid 2x2 does not hold 5"):
        grid_shape(5, (2, 2))


def test_layout_choices_are_checked() -> None:
    with pytest.raises(StoreError, match="first_stage='colbert'"):
        MultivectorLayout(first_stage="colbert")  # type: ignore[arg-type]
    with pytest.raises(StoreError, match="query_encoding='scalar8' applies to binary"):
        MultivectorLayout(quantization="turbo4", query_encoding="scalar8")
    with pytest.raises(StoreError, match="oversampling"):
        MultivectorLayout(oversampling=0.5)
    with pytest.raises(StoreError, match="token_pool_factor"):
        MultivectorLayout(token_pool_factor=0)


def test_rows_cols_points_carry_the_grid_means_not_the_mean() -> None:
    schema, records, embeddings = corpus()[0]
    grid_page = PageEmbedding(np.ones((6, DIM), np.float32), np.ones(DIM, np.float32), grid=(3, 2))
    pages, _ = document_points(
        schema, records[:1], [grid_page], dim=DIM, use_sparse=False, layout=ROWS_COLS
    )
    assert set(pages[0].dense) == {MULTI, GRID} and pages[0].dense[GRID].shape == (5, DIM)
    pages, _ = document_points(
        schema, records, embeddings, dim=DIM, use_sparse=False, layout=MultivectorLayout()
    )
    assert set(pages[0].dense) == {MULTI, POOLED}
    bad = PageEmbedding(np.ones((6, DIM), np.float32), np.ones(DIM, np.float32), grid=(4, 2))
    with pytest.raises(StoreError, match=r"page 1: patch grid \(4, 2\) does not hold 6"):
        document_points(schema, records[:1], [bad], dim=DIM, use_sparse=False, layout=ROWS_COLS)


def searched_on_both_backends(tmp_path: Path, layout: MultivectorLayout) -> list[tuple]:
    """The corpus written to Edge and to qdrant-client in ``layout``, then three dense queries
    on each (the whole corpus prefetched): ``[(query, {"edge": hits, "client": hits}), ...]``."""
    stores = {
        name: open_store_on(name, tmp_path / name, layout=layout, sparse=False)
        for name in ("edge", "client")
    }
    try:
        for store in stores.values():
            for document in corpus():
                store.upsert_document(*document)
        searched = []
        for seed in range(3):
            query = make_query(seed, sparse=False)
            searched.append(
                (
                    query,
                    {
                        name: store.search(query, limit=5, prefetch_limit=50)
                        for name, store in stores.items()
                    },
                )
            )
        return searched
    finally:
        for store in stores.values():
            store.close()


def assert_backends_agree(
    tmp_path: Path, layout: MultivectorLayout, *, rtol: float, exact_on: str, scored: list
) -> None:
    """Three dense queries get the same pages and scores within ``rtol`` on both backends, and
    ``exact_on``'s ranking is exact MaxSim over ``scored`` (the pages as the layout stores them)."""
    for query, got in searched_on_both_backends(tmp_path, layout):
        assert_same_hits(got["edge"], got["client"], rtol=rtol)
        exact = [ref for ref, _ in maxsim_ranking(scored, query)[:5]]
        assert [h.ref for h in got[exact_on]] == exact


@pytest.mark.parametrize("layout", LAYOUTS, ids=lambda layout: repr(layout)[18:60])
def test_backends_agree_on_every_layout(tmp_path: Path, layout: MultivectorLayout) -> None:
    """Dense queries: the same pages, scores within float16 rounding (turbo8: its coding error;
    qdrant-client's local mode scores the float32 values sent), on Edge and client."""
    rtol = 1e-2 if layout.storage == "turbo8" else 2e-3
    assert_backends_agree(tmp_path, layout, rtol=rtol, exact_on="edge", scored=corpus())


def test_turbo4_originals_score_within_their_coding_error_on_both_backends(
    tmp_path: Path,
) -> None:
    """4-bit originals: Edge scores the codes, qdrant-client's local mode the float32 values
    sent. Near ties may swap, so: each page both return scores within a few percent, and
    Edge's top 5 keeps at least 4 of the exact top 5 (a wrong datatype, or scores of the
    wrong vector, breaks both; originals left as floats score exactly)."""
    layout = MultivectorLayout(first_stage="muvera", storage="turbo4")
    coded: list[float] = []
    for query, got in searched_on_both_backends(tmp_path, layout):
        edge, client = ({h.ref: h.score for h in got[name]} for name in ("edge", "client"))
        exact = [ref for ref, _ in maxsim_ranking(corpus(), query)[:5]]
        assert list(client) == exact
        assert len(set(edge) & set(exact)) >= 4
        errors = [abs(edge[r] - client[r]) / client[r] for r in set(edge) & set(client)]
        assert max(errors) < TURBO4_RTOL
        coded.append(max(errors))
    assert max(coded) > 1e-3  # Edge scored the 4-bit codes, not the values sent


def test_backends_agree_on_the_page_image_default_scored_on_its_pooled_vectors(
    tmp_path: Path,
) -> None:
    """The default pools at ingest: both backends rank as exact MaxSim over the pooled pages
    (qdrant-client's local mode scores the float32 values sent, Edge the turbo8 codes)."""
    factor = PAGE_IMAGE_LAYOUT.token_pool_factor
    pooled = [
        (
            schema,
            records,
            [PageEmbedding(pool_tokens(e.multivector, factor), e.pooled) for e in pages],
        )
        for schema, records, pages in corpus()
    ]
    assert_backends_agree(tmp_path, PAGE_IMAGE_LAYOUT, rtol=1e-2, exact_on="client", scored=pooled)


def test_vector_bytes_count_what_the_layout_stores() -> None:
    page = np.random.default_rng(0).normal(size=(60, DIM)).astype(np.float32)
    for layout, per_value in (
        (MultivectorLayout(), 4),
        (PREVIOUS_PAGE_IMAGE_LAYOUT, 2 + 1 / 8),
        (MultivectorLayout(storage="turbo4", quantization="binary"), 1 / 2 + 1 / 8),
        (MultivectorLayout(storage="turbo8", quantization="turbo4", token_pool_factor=4), 1.5),
        (MultivectorLayout(storage="float16", quantization="scalar", token_pool_factor=2), 3),
    ):
        vectors = layout.page_vectors(page, np.ones(DIM, np.float32), None)
        first_width = 4 if layout.storage == "float32" else 2
        expected = vectors[MULTI].size * per_value + vectors[POOLED].size * first_width
        assert layout.vector_bytes(60, DIM) == expected
    muvera = MultivectorLayout(first_stage="muvera", storage="turbo8", token_pool_factor=3)
    assert muvera.vector_bytes(60, DIM) == 20 * DIM + 4096 * 2


# Disk a page takes beyond its vector data (graph, turbo8 offsets, payload and its indexes, ids,
# the store's fixed part shared out): benchmarks/store_scale.py at 100,000 ColQwen-shaped pages
# measured 63,490 B a page for the page-image default against its 57,344 B of vectors.
MEASURED_OVERHEAD_BYTES = 63_490 - 57_344


def test_the_page_image_default_stays_within_64_kb_a_colqwen_page() -> None:
    """768 x 128 (ColQwen2.5's patch grid), at 100,000 pages: a default drifting to a layout of
    float16 or unpooled originals (the 0.1 default: 213 KB) fails here."""
    stored = PAGE_IMAGE_LAYOUT.vector_bytes(768, 128, (32, 24)) + MEASURED_OVERHEAD_BYTES
    assert stored <= 64 * 1024
    assert PREVIOUS_PAGE_IMAGE_LAYOUT.vector_bytes(768, 128, (32, 24)) > 64 * 1024


@pytest.mark.parametrize(
    "previous", [PREVIOUS_PAGE_IMAGE_LAYOUT, POOL3_PAGE_IMAGE_LAYOUT], ids=["mean-bq", "pool3"]
)
def test_a_store_made_with_a_previous_default_keeps_it(
    tmp_path: Path, previous: MultivectorLayout
) -> None:
    """Reopened, a store keeps its own layout, MUVERA parameters included: queried with the new
    default's encoding, a 16 x 16 MUVERA store would rank by a meaningless dot product."""
    assert previous != PAGE_IMAGE_LAYOUT
    with open_store(tmp_path / "old", encoder=_Encoder("image"), layout=previous) as old:
        old.upsert_document(*corpus()[0])
    with open_store(tmp_path / "old", encoder=_Encoder("image")) as reopened:
        assert reopened.layout == previous  # type: ignore[attr-defined]
        assert len(reopened.search(make_query(1, sparse=False), limit=3)) == 3


def test_the_layout_is_kept_in_the_store_record(tmp_path: Path) -> None:
    backend = "edge"  # the store record is the same point on both backends
    store = open_store_on(backend, tmp_path / "s", layout=ROWS_COLS)
    store.upsert_document(*corpus()[0])
    store.close()
    with open_store_on(backend, tmp_path / "s") as reopened:  # None: the stored layout
        assert reopened.layout == ROWS_COLS  # type: ignore[attr-defined]
        assert len(reopened.search(make_query(1, sparse=False), limit=3)) == 3
    with pytest.raises(StoreError, match="created with the multivector layout"):
        open_store_on(backend, tmp_path / "s", layout=MultivectorLayout())


@pytest.mark.slow  # imports torch (~15 s)
def test_token_pooling_stores_a_third_of_the_vectors(tmp_path: Path) -> None:
    pytest.importorskip("colpali_engine", reason="token pooling needs the colqwen extra")
    layout = MultivectorLayout(token_pool_factor=3)
    rng = np.random.default_rng(0)
    page = PageEmbedding(rng.normal(size=(30, DIM)).astype(np.float32), np.ones(DIM, np.float32))
    schema, records, _ = corpus()[0]
    pages, _ = document_points(
        schema, records[:1], [page], dim=DIM, use_sparse=False, layout=layout
    )
    assert pages[0].dense[MULTI].shape == (10, DIM)
    store = open_store_on("edge", tmp_path / "pooled", layout=layout, sparse=False)
    try:
        store.upsert_document(schema, records[:1], [page])
        assert len(store.search(make_query(0, sparse=False), limit=1)) == 1
    finally:
        store.close()


def test_edge_bulk_load_builds_the_index_once(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    store = open_store_on("edge", tmp_path / "bulk")
    built: list[int] = []
    monkeypatch.setattr(store, "optimize", lambda: built.append(store.count_pages()) or True)
    try:
        with store.bulk_load():
            with store.bulk_load():
                store.upsert_document(*corpus()[0])
            assert built == []  # nested: only the outermost block builds
            store.upsert_document(*corpus()[1])
            assert store.count_pages() == 10  # searchable during the load
        assert built == [10]
        store.upsert_document(*corpus()[2])
        assert built == [10]  # a write outside a bulk load builds nothing
    finally:
        store.close()


class _Encoder(PageEncoder):
    name, dim = "fake", DIM

    def __init__(self, modality: str) -> None:
        self.modality = modality  # type: ignore[assignment]

    def encode_pages(self, pages):  # type: ignore[no-untyped-def]
        raise NotImplementedError

    def encode_queries(self, queries):  # type: ignore[no-untyped-def]
        raise NotImplementedError


def test_open_store_gives_page_image_encoders_the_page_image_layout(tmp_path: Path) -> None:
    with open_store(tmp_path / "img", encoder=_Encoder("image")) as images:
        assert images.layout == PAGE_IMAGE_LAYOUT  # type: ignore[attr-defined]
    with open_store(tmp_path / "txt", encoder=_Encoder("text")) as text:
        assert text.layout == DEFAULT_LAYOUT  # type: ignore[attr-defined]
    with open_store(tmp_path / "img", encoder=_Encoder("text")) as reopened:  # the stored one
        assert reopened.layout == PAGE_IMAGE_LAYOUT  # type: ignore[attr-defined]


def test_edge_indexes_every_filtered_key_and_the_tenant_as_tenant(tmp_path: Path) -> None:
    from llama_index_docmemo.store.points import PAYLOAD_INDEXES

    store = open_store_on("edge", tmp_path / "indexed")
    try:
        indexed = store.shard.info().payload_schema  # type: ignore[attr-defined]
        assert set(indexed) == {key for key, _, _ in PAYLOAD_INDEXES}
        tenants = {k for k, v in indexed.items() if getattr(v.params, "is_tenant", None)}
        assert tenants == {"tenant_key"}
    finally:
        store.close()
