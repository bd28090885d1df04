"""The default CPU encoder: shapes, determinism, edge-case texts, query/page consistency, sparse form."""

from __future__ import annotations

import logging

import numpy as np
import pytest

from llama_index_docmemo.encoders import (
    DEFAULT_ENCODER,
    PageEncoder,
    WordLlamaEncoder,
    default_encoder,
    load_encoder,
)
from llama_index_docmemo.types import PageEmbedding, PageInput, PageRef, SparseVector

PAGES = [
    "Quarterly revenue rose to 4.2 billion dollars, driven by cloud subscriptions in Europe.",
    "The hiking trail climbs through pine forest to a glacier lake above the valley.",
    "Patients received a daily dose of the vaccine; antibody levels were measured weekly.",
    "The orchestra rehearsed the symphony for three weeks before the opening concert.",
]


@pytest.fixture(scope="module")
def encoder() -> WordLlamaEncoder:
    return default_encoder()


def pages(texts: list[str]) -> list[PageInput]:
    return [PageInput(PageRef("doc.pdf", i + 1), text) for i, text in enumerate(texts)]


def maxsim(query: PageEmbedding, page: PageEmbedding) -> float:
    return float((query.multivector @ page.multivector.T).max(axis=1).sum())


def check_sparse(vector: SparseVector | None) -> None:
    assert vector is not None
    assert len(vector.indices) == len(vector.values)
    assert list(vector.indices) == sorted(set(vector.indices))
    assert all(0 <= i < 2**32 for i in vector.indices)
    assert all(v > 0 and np.isfinite(v) for v in vector.values)


def test_default_encoder_identity(encoder: WordLlamaEncoder) -> None:
    assert isinstance(encoder, PageEncoder)
    assert encoder.name == DEFAULT_ENCODER == "wordllama-l2-256-w24+bm25"
    assert encoder.dim == 256
    assert encoder.sparse is True
    assert encoder.modality == "text"


def test_page_shapes_and_dtypes(encoder: WordLlamaEncoder) -> None:
    out = encoder.encode_pages(pages(PAGES))
    assert len(out) == len(PAGES)
    for emb in out:
        assert emb.multivector.dtype == np.float32 and emb.pooled.dtype == np.float32
        assert emb.multivector.ndim == 2 and emb.multivector.shape[1] == 256
        assert emb.pooled.shape == (256,)
        np.testing.assert_allclose(np.linalg.norm(emb.multivector, axis=1), 1.0, atol=1e-5)
        np.testing.assert_allclose(np.linalg.norm(emb.pooled), 1.0, atol=1e-5)
        check_sparse(emb.sparse)


def test_query_shapes(encoder: WordLlamaEncoder) -> None:
    (query,) = encoder.encode_queries(["cloud revenue in Europe"])
    assert query.multivector.shape == (1, 256) and query.multivector.dtype == np.float32
    assert query.pooled.shape == (256,) and query.pooled.dtype == np.float32
    check_sparse(query.sparse)
    assert set(query.sparse.values) == {1.0}  # Qdrant multiplies in the IDF


def test_window_count_follows_text_length(encoder: WordLlamaEncoder) -> None:
    words = " ".join(f"word{i}" for i in range(120))  # 10 half-windows of 12 words -> 9 windows
    (emb,) = encoder.encode_pages(pages([words]))
    assert emb.multivector.shape == (9, 256)


def test_deterministic_and_batch_independent(encoder: WordLlamaEncoder) -> None:
    alone = [encoder.encode_pages(pages([t]))[0] for t in PAGES]
    batched = WordLlamaEncoder(batch_size=3).encode_pages(pages(PAGES))
    for a, b in zip(alone, batched, strict=True):
        np.testing.assert_array_equal(a.multivector, b.multivector)
        np.testing.assert_array_equal(a.pooled, b.pooled)
        assert a.sparse == b.sparse
    q1, q2 = encoder.encode_queries(["glacier lake", "glacier lake"])
    np.testing.assert_array_equal(q1.multivector, q2.multivector)


@pytest.mark.parametrize("text", ["", "   \n\t  ", "!!! ... ---"])
def test_empty_or_wordless_page(encoder: WordLlamaEncoder, text: str) -> None:
    (emb,) = encoder.encode_pages(pages([text]))
    assert emb.multivector.shape[0] >= 1 and emb.multivector.shape[1] == 256
    assert np.isfinite(emb.multivector).all() and np.isfinite(emb.pooled).all()
    assert emb.sparse is not None
    assert list(emb.sparse.indices) == sorted(set(emb.sparse.indices))


def test_empty_page_scores_zero(encoder: WordLlamaEncoder) -> None:
    (emb,) = encoder.encode_pages(pages([""]))
    (query,) = encoder.encode_queries(["anything at all"])
    assert maxsim(query, emb) == 0.0 and emb.sparse == SparseVector((), ())


def test_empty_query(encoder: WordLlamaEncoder) -> None:
    (query,) = encoder.encode_queries([""])
    assert query.multivector.shape == (1, 256) and np.isfinite(query.pooled).all()
    assert query.sparse == SparseVector((), ())


def test_very_long_page_is_capped(encoder: WordLlamaEncoder) -> None:
    text = " ".join(f"term{i % 5000}" for i in range(60_000))
    (emb,) = encoder.encode_pages(pages([text]))
    assert emb.multivector.shape == (encoder.max_windows, 256)
    check_sparse(emb.sparse)


def test_non_ascii_text(encoder: WordLlamaEncoder) -> None:
    texts = [
        "Überblick: Umsätze in München stiegen um 12 %",
        "東京の売上高は増加した",
        "naïve café — “quoted” €",
    ]
    for emb in encoder.encode_pages(pages(texts)):
        assert np.isfinite(emb.multivector).all()
        assert np.linalg.norm(emb.pooled) == pytest.approx(1.0, abs=1e-5)
        check_sparse(emb.sparse)
        assert emb.sparse.indices  # every one of them has terms


def test_page_wins_for_a_query_made_of_its_own_words(encoder: WordLlamaEncoder) -> None:
    embedded = encoder.encode_pages(pages(PAGES))
    queries = [
        "revenue cloud subscriptions Europe",
        "trail pine glacier lake",
        "vaccine dose antibody",
        "orchestra symphony concert",
    ]
    for expected, query in enumerate(encoder.encode_queries(queries)):
        dense = [maxsim(query, page) for page in embedded]
        assert int(np.argmax(dense)) == expected, query
        pooled = [float(page.pooled @ query.pooled) for page in embedded]
        assert int(np.argmax(pooled)) == expected, query
        lexical = [len(set(query.sparse.indices) & set(page.sparse.indices)) for page in embedded]
        assert int(np.argmax(lexical)) == expected, query


def test_lexical_off() -> None:
    encoder = WordLlamaEncoder(lexical=False)
    assert encoder.sparse is False and encoder.name == "wordllama-l2-256-w24"
    (emb,) = encoder.encode_pages(pages(["some words"]))
    assert emb.sparse is None


@pytest.mark.parametrize("dim", [64, 128])
def test_truncated_dims(dim: int) -> None:
    encoder = WordLlamaEncoder(dim=dim)
    (emb,) = encoder.encode_pages(pages([PAGES[0]]))
    assert emb.multivector.shape[1] == dim and emb.pooled.shape == (dim,)
    assert encoder.name == f"wordllama-l2-{dim}-w24+bm25"


def test_bad_arguments() -> None:
    with pytest.raises(ValueError, match="dim"):
        WordLlamaEncoder(dim=100)
    with pytest.raises(ValueError, match="window"):
        WordLlamaEncoder(window=7)


def test_load_encoder_round_trips_names() -> None:
    for encoder in (WordLlamaEncoder(), WordLlamaEncoder(dim=64, window=12, lexical=False)):
        loaded = load_encoder(encoder.name)
        assert loaded.name == encoder.name and loaded.dim == encoder.dim
        assert loaded.sparse == encoder.sparse
    with pytest.raises(ValueError, match="unknown encoder name"):
        load_encoder("colqwen2.5-v0.2")


def test_load_encoder_names_the_accepted_forms() -> None:
    from llama_index_docmemo.encoders import load_encoder

    with pytest.raises(ValueError, match="colqwen2.5:<model folder or hub id>"):
        load_encoder("e5-large")


@pytest.mark.slow
def test_loading_wordllama_leaves_the_root_logger_alone() -> None:
    import subprocess
    import sys

    code = (
        "import logging; from llama_index_docmemo.encoders import default_encoder; "
        "default_encoder().encode_query('x'); r = logging.getLogger(); "
        "print(len(r.handlers), r.level)"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert out.stdout.split() == ["0", str(logging.WARNING)]
