"""MUVERA encodings: deterministic, of the stated width, and ordering pages about as MaxSim does."""

from __future__ import annotations

import numpy as np
import pytest

from llama_index_docmemo.errors import StoreError
from llama_index_docmemo.store.layouts import MultivectorLayout
from llama_index_docmemo.store.muvera import Muvera


def _unit(x: np.ndarray) -> np.ndarray:
    return (x / np.linalg.norm(x, axis=-1, keepdims=True)).astype(np.float32)


def _planted(
    seed: int = 0, n_pages: int = 60, dim: int = 64
) -> tuple[list[np.ndarray], np.ndarray]:
    """Pages of shared background (in varying amounts) plus a few words each, as in
    benchmarks/store_scale.py: a page's mean is mostly its background."""
    rng = np.random.default_rng(seed)
    words = _unit(rng.normal(size=(200, dim)))
    background = _unit(rng.normal(size=(4, dim)))
    pages = []
    for _ in range(n_pages):
        content = words[rng.choice(len(words), size=6, replace=False)]
        amounts = rng.integers(5, 60, size=len(background))
        patches = np.concatenate([np.repeat(content, 4, axis=0), np.repeat(background, amounts, 0)])
        pages.append(_unit(patches + 0.3 * rng.normal(size=patches.shape) / np.sqrt(dim)))
    return pages, words


def _maxsim(pages: list[np.ndarray], query: np.ndarray) -> np.ndarray:
    return np.array([(page @ query.T).max(axis=0).sum() for page in pages])


def test_encodings_are_deterministic_and_of_the_stated_width() -> None:
    muvera = Muvera(k_sim=3, dim_proj=8, reps=5, seed=7)
    page = _unit(np.random.default_rng(1).normal(size=(40, 32)))
    first = muvera.encode_page(page)
    assert first.shape == (muvera.dimension(),) == (5 * 8 * 8,)
    np.testing.assert_array_equal(
        first, Muvera(k_sim=3, dim_proj=8, reps=5, seed=7).encode_page(page)
    )
    assert not np.allclose(first, Muvera(k_sim=3, dim_proj=8, reps=5, seed=8).encode_page(page))
    assert muvera.encode_query(page[:5]).shape == first.shape


def test_a_page_fills_every_bucket_a_query_leaves_empty_ones_at_zero() -> None:
    muvera = Muvera(k_sim=4, dim_proj=4, reps=2)
    one = _unit(np.random.default_rng(2).normal(size=(1, 16)))  # one vector: one bucket a rep
    blocks = muvera.encode_page(one).reshape(2, 16, 4)
    assert (np.abs(blocks).sum(axis=2) > 0).all()  # empty buckets took the nearest vector
    query_blocks = muvera.encode_query(one).reshape(2, 16, 4)
    assert ((np.abs(query_blocks).sum(axis=2) > 0).sum(axis=1) == 1).all()


def test_the_encoding_dot_product_ranks_the_planted_page_first_where_the_mean_does_not() -> None:
    pages, _ = _planted()
    muvera = Muvera()
    encoded = np.stack([muvera.encode_page(p) for p in pages])
    means = _unit(np.stack([page.mean(axis=0) for page in pages]))
    rng = np.random.default_rng(3)
    fde_first = mean_first = 0
    overlap = []
    for target in range(0, 60, 3):
        words = pages[target][:24:4]  # one copy of each of the page's 6 words
        query = _unit(words + 0.3 * rng.normal(size=words.shape) / np.sqrt(words.shape[1]))
        exact = _maxsim(pages, query)
        fde = encoded @ muvera.encode_query(query)
        fde_first += int(np.argmax(fde) == np.argmax(exact))
        mean_first += int(np.argmax(means @ _unit(query.mean(axis=0))) == np.argmax(exact))
        overlap.append(len(set(np.argsort(-exact)[:5]) & set(np.argsort(-fde)[:10])) / 5)
    assert fde_first >= 18 and fde_first > mean_first  # of 20 queries
    assert np.mean(overlap) >= 0.8  # MaxSim's top 5 within the encoding's top 10


def test_the_parameters_are_checked_and_kept_in_the_layout_record() -> None:
    with pytest.raises(StoreError, match="muvera k_sim must be in"):
        Muvera(k_sim=0)
    with pytest.raises(StoreError, match=r"encodes a \(n, dim\) multivector"):
        Muvera().encode_page(np.zeros(8, np.float32))
    layout = MultivectorLayout(first_stage="muvera", muvera=Muvera(reps=4))
    assert layout.first_stage_dim == 4 * 16 * 16
    assert MultivectorLayout.from_payload(layout.payload()) == layout
    older = {k: v for k, v in MultivectorLayout().payload().items() if k != "muvera"}
    assert MultivectorLayout.from_payload(older) == MultivectorLayout()  # a record before MUVERA
