"""The same behavioural contract for every encoder that can run here: the CPU default always,
ColQwen2.5 (tiny random weights) when the ``colqwen`` extra is installed."""

from __future__ import annotations

from collections.abc import Callable

import numpy as np
import pytest
from PIL import Image, ImageDraw

from llama_index_docmemo.encoders import default_encoder
from llama_index_docmemo.encoders.base import PageEncoder
from llama_index_docmemo.types import PageInput, PageRef

TEXTS = [
    "Revenue grew 12 percent in 2023 on strong demand in the Nordic region.",
    "The board approved a dividend of 4.10 per share; the annual meeting is in May.",
    "Segment margin table: retail 8.1, wholesale 5.4, services 11.9.",
]


def _image(i: int) -> Image.Image:
    image = Image.new("RGB", (120, 160), (250, 250, 245))
    draw = ImageDraw.Draw(image)
    for row in range(4):
        draw.rectangle(
            (10, 20 + 30 * row, 40 + 20 * ((i + row) % 4), 26 + 30 * row), fill=(0, 0, 0)
        )
    return image


def _colqwen() -> PageEncoder:
    pytest.importorskip("torch")
    pytest.importorskip("torchvision")
    pytest.importorskip("colpali_engine")
    from colqwen_tiny import tiny_model, tiny_processor

    from llama_index_docmemo.encoders.colqwen import ColQwenEncoder

    processor = tiny_processor()
    return ColQwenEncoder.from_model(tiny_model(processor, seed=0), processor, name="tiny")


FACTORIES: dict[str, Callable[[], PageEncoder]] = {
    "cpu-default": default_encoder,
    "colqwen": _colqwen,
}


@pytest.fixture(scope="module", params=sorted(FACTORIES))
def encoder(request: pytest.FixtureRequest) -> PageEncoder:
    return FACTORIES[request.param]()


def _pages() -> list[PageInput]:
    return [
        PageInput(PageRef("d.pdf", i + 1), text, load_image=lambda i=i: _image(i))
        for i, text in enumerate(TEXTS)
    ]


def test_one_embedding_per_page_with_the_declared_shape(encoder: PageEncoder) -> None:
    embeddings = encoder.encode_pages(_pages())
    assert len(embeddings) == len(TEXTS)
    for emb in embeddings:
        assert emb.multivector.dtype == np.float32 and emb.pooled.dtype == np.float32
        assert emb.multivector.ndim == 2 and emb.multivector.shape[1] == encoder.dim
        assert emb.pooled.shape == (encoder.dim,)
        assert np.isfinite(emb.multivector).all() and np.isfinite(emb.pooled).all()
        assert np.abs(emb.multivector).sum(axis=1).min() > 0  # no padding rows kept
        assert (emb.sparse is not None) == encoder.sparse


def test_queries_live_in_the_same_space(encoder: PageEncoder) -> None:
    queries = encoder.encode_queries(["dividend per share", "segment margin"])
    assert len(queries) == 2
    for q in queries:
        assert q.multivector.shape[1] == encoder.dim and q.pooled.shape == (encoder.dim,)
    single = encoder.encode_query("dividend per share")
    assert np.allclose(single.multivector, queries[0].multivector, atol=1e-5)


def test_encoding_is_deterministic_and_batch_independent(encoder: PageEncoder) -> None:
    pages = _pages()
    batch = encoder.encode_pages(pages)
    alone = [encoder.encode_pages([p])[0] for p in pages]
    for a, b in zip(batch, alone, strict=True):
        assert np.allclose(a.multivector, b.multivector, atol=1e-4)
        assert np.allclose(a.pooled, b.pooled, atol=1e-4)
