"""Token pooling (``pool_tokens``): colpali-engine's clusters, what a pooled store needs to run."""

from __future__ import annotations

import sys
from pathlib import Path

import numpy as np
import pytest
from test_store_backends import DIM, corpus, make_query, open_store_on

from llama_index_docmemo.errors import MissingExtraError
from llama_index_docmemo.store import MultivectorLayout
from llama_index_docmemo.store.layouts import MULTI, pool_tokens
from llama_index_docmemo.store.points import document_points
from llama_index_docmemo.types import PageEmbedding


def unit_rows(rng: np.random.Generator, n: int, dim: int = DIM) -> np.ndarray:
    rows = rng.normal(size=(n, dim)).astype(np.float32)
    return rows / np.linalg.norm(rows, axis=1, keepdims=True)


def test_pooling_merges_each_group_of_near_duplicates_into_its_mean() -> None:
    rng = np.random.default_rng(0)
    centres = unit_rows(rng, 12)
    page = np.repeat(centres, 3, axis=0) + 0.01 * rng.normal(size=(36, DIM)).astype(np.float32)
    page = page[rng.permutation(36)]  # groups scattered over the page
    pooled = pool_tokens(page, 3)
    assert pooled.shape == (12, DIM)
    np.testing.assert_allclose(np.linalg.norm(pooled, axis=1), 1.0, rtol=1e-5)
    best = (pooled @ centres.T).argmax(axis=1)
    assert sorted(best) == list(range(12))  # every group kept, none merged with another
    assert (pooled @ centres.T).max(axis=1).min() > 0.999


@pytest.mark.slow  # imports torch (~15 s)
@pytest.mark.parametrize(("n", "factor"), [(30, 2), (257, 3), (768, 3), (768, 4)])
def test_pooling_gives_colpali_engines_clusters(n: int, factor: int) -> None:
    torch = pytest.importorskip("torch", reason="the reference pooler needs the colqwen extra")
    pooling = pytest.importorskip("colpali_engine.compression.token_pooling")
    page = unit_rows(np.random.default_rng(n + factor), n)
    expected = pooling.HierarchicalTokenPooler().pool_embeddings(
        [torch.from_numpy(page)], pool_factor=factor
    )[0]
    np.testing.assert_allclose(pool_tokens(page, factor), expected.numpy(), atol=1e-5)


def test_a_pooled_store_writes_a_third_and_reads_without_scipy(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    layout = MultivectorLayout(first_stage="muvera", storage="turbo8", token_pool_factor=3)
    page = PageEmbedding(unit_rows(np.random.default_rng(1), 30), np.ones(DIM, np.float32))
    schema, records, _ = corpus()[0]
    points, _ = document_points(
        schema, records[:1], [page], dim=DIM, use_sparse=False, layout=layout
    )
    assert points[0].dense[MULTI].shape == (10, DIM)
    store = open_store_on("edge", tmp_path / "pooled", layout=layout, sparse=False)
    store.upsert_document(schema, records[:1], [page])
    store.close()
    monkeypatch.setitem(sys.modules, "scipy.cluster.hierarchy", None)  # scipy not installed
    with open_store_on("edge", tmp_path / "pooled", sparse=False) as reopened:
        assert (
            len(reopened.search(make_query(0, sparse=False), limit=1)) == 1
        )  # queries: no pooling
        with pytest.raises(MissingExtraError, match="colqwen"):
            reopened.upsert_document(schema, records[:1], [page])
