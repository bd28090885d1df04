"""ColQwenEncoder on a tiny randomly initialised ColQwen2.5: the real colpali-engine code path.

The weights mean nothing, so these tests check structure (which rows are kept, batching,
pooling, determinism, loading from a folder) and that the store ranks pages exactly as a
numpy MaxSim over the encoder's own vectors does.
"""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import Any

import numpy as np
import pytest

pytest.importorskip("torch")
pytest.importorskip("torchvision")
pytest.importorskip("colpali_engine")

from colqwen_tiny import maxsim, tiny_model, tiny_processor  # noqa: E402
from PIL import Image, ImageDraw  # noqa: E402

from llama_index_docmemo.encoders.colqwen import ColQwenEncoder, pool_mean  # noqa: E402
from llama_index_docmemo.errors import DocMemoError  # noqa: E402
from llama_index_docmemo.memory.schema import DocumentSchema  # noqa: E402
from llama_index_docmemo.store import EdgePageStore  # noqa: E402
from llama_index_docmemo.types import PageEmbedding, PageInput, PageRecord, PageRef  # noqa: E402

SIZES = ((100, 140), (200, 120), (84, 84), (150, 150), (60, 200))
QUERIES = ("what was the revenue in 2023?", "table", "figure 3 shows the architecture")


def page_image(index: int, size: tuple[int, int]) -> Image.Image:
    """A page-like picture: light background, a few dark 'text lines' placed by ``index``."""
    image = Image.new("RGB", size, (245, 245, 240))
    draw = ImageDraw.Draw(image)
    rng = np.random.default_rng(index)
    for _ in range(4):
        x, y = int(rng.integers(0, size[0] // 2)), int(rng.integers(0, size[1] - 8))
        draw.rectangle((x, y, x + int(rng.integers(10, size[0] // 2)), y + 4), fill=(20, 20, 20))
    return image


def page_inputs(sizes: tuple[tuple[int, int], ...] = SIZES) -> list[PageInput]:
    return [
        PageInput(PageRef("doc.pdf", i + 1), "", load_image=lambda i=i, s=s: page_image(i, s))
        for i, s in enumerate(sizes)
    ]


@pytest.fixture(scope="module")
def parts() -> tuple[Any, Any]:
    processor = tiny_processor()
    return tiny_model(processor, seed=0), processor


@pytest.fixture(scope="module")
def encoder(parts: tuple[Any, Any]) -> ColQwenEncoder:
    model, processor = parts
    return ColQwenEncoder.from_model(model, processor, name="colqwen2.5:tiny", batch_size=3)


@pytest.fixture(scope="module")
def pages(encoder: ColQwenEncoder) -> list[PageEmbedding]:
    return encoder.encode_pages(page_inputs())


def test_pages_keep_exactly_the_image_token_grid(
    encoder: ColQwenEncoder, pages: list[PageEmbedding]
) -> None:
    assert encoder.dim == 128 and encoder.modality == "image"
    for size, page in zip(SIZES, pages, strict=True):
        columns, rows = encoder.page_grid(size)
        assert page.multivector.shape == (columns * rows, 128)
        assert page.multivector.dtype == np.float32 and page.pooled.dtype == np.float32
        assert page.grid == (rows, columns)  # row-major: what the rows_cols layout pools


def test_no_padding_or_zero_rows_are_kept(pages: list[PageEmbedding]) -> None:
    for page in pages:
        norms = np.linalg.norm(page.multivector, axis=1)
        np.testing.assert_allclose(norms, 1.0, atol=2e-3)


def test_page_and_query_rows_do_not_depend_on_batch_padding(
    parts: tuple[Any, Any], pages: list[PageEmbedding]
) -> None:
    model, processor = parts
    one_by_one = ColQwenEncoder.from_model(model, processor, name="t", batch_size=1)
    for batched, single in zip(pages, one_by_one.encode_pages(page_inputs()), strict=True):
        np.testing.assert_allclose(batched.multivector, single.multivector, atol=2e-3)
    together = one_by_one.encode_queries(QUERIES)
    for query, batched in zip(QUERIES, together, strict=True):
        alone = one_by_one.encode_query(query)
        assert batched.multivector.shape == alone.multivector.shape
        np.testing.assert_allclose(batched.multivector, alone.multivector, atol=2e-3)


def test_query_rows_are_its_tokens_without_padding(encoder: ColQwenEncoder) -> None:
    short, long = encoder.encode_queries(["a", "a much longer question about the report"])
    assert short.multivector.shape[0] < long.multivector.shape[0]
    for query in (short, long):
        np.testing.assert_allclose(np.linalg.norm(query.multivector, axis=1), 1.0, atol=2e-3)


def test_pooled_vector_is_the_normalised_mean(pages: list[PageEmbedding]) -> None:
    for page in pages:
        mean = page.multivector.mean(axis=0)
        np.testing.assert_allclose(page.pooled, mean / np.linalg.norm(mean), atol=1e-6)
        np.testing.assert_allclose(pool_mean(page.multivector), page.pooled)


def test_same_seed_same_vectors_other_seed_other_vectors(
    encoder: ColQwenEncoder, pages: list[PageEmbedding]
) -> None:
    again = encoder.encode_pages(page_inputs())
    for first, second in zip(pages, again, strict=True):
        np.testing.assert_array_equal(first.multivector, second.multivector)
    processor = tiny_processor()
    other = ColQwenEncoder.from_model(tiny_model(processor, seed=1), processor, name="t")
    assert not np.allclose(
        other.encode_pages(page_inputs()[:1])[0].multivector, pages[0].multivector
    )


def test_float16_storage_rounds_and_float32_keeps(parts: tuple[Any, Any]) -> None:
    model, processor = parts
    exact = ColQwenEncoder.from_model(model, processor, name="t", storage_dtype="float32")
    half = ColQwenEncoder.from_model(model, processor, name="t", storage_dtype="float16")
    full_rows = exact.encode_pages(page_inputs()[:1])[0].multivector
    half_rows = half.encode_pages(page_inputs()[:1])[0].multivector
    np.testing.assert_array_equal(half_rows, full_rows.astype(np.float16).astype(np.float32))
    assert not np.array_equal(half_rows, full_rows)


def test_page_without_image_is_refused(encoder: ColQwenEncoder) -> None:
    with pytest.raises(DocMemoError, match=r"doc\.pdf#p7"):
        encoder.encode_pages([PageInput(PageRef("doc.pdf", 7), "text only")])


def test_bad_settings_are_refused(parts: tuple[Any, Any]) -> None:
    model, processor = parts
    with pytest.raises(ValueError, match="batch_size"):
        ColQwenEncoder.from_model(model, processor, name="t", batch_size=0)
    with pytest.raises(ValueError, match="storage_dtype"):
        ColQwenEncoder.from_model(model, processor, name="t", storage_dtype="int8")  # type: ignore[arg-type]


def test_loads_from_a_local_folder(
    parts: tuple[Any, Any], pages: list[PageEmbedding], tmp_path: Path
) -> None:
    model, processor = parts
    folder = tmp_path / "tiny-colqwen"
    model.save_pretrained(folder)
    processor.save_pretrained(folder)
    loaded = ColQwenEncoder(folder, device="cpu")
    assert loaded.name == "colqwen2.5:tiny-colqwen"
    for stored, reloaded in zip(pages, loaded.encode_pages(page_inputs()), strict=True):
        np.testing.assert_array_equal(stored.multivector, reloaded.multivector)


def test_a_file_is_not_a_model_folder(tmp_path: Path) -> None:
    file = tmp_path / "model.bin"
    file.write_bytes(b"")
    with pytest.raises(DocMemoError, match="not a folder"):
        ColQwenEncoder(file)


@pytest.fixture
def edge_store(encoder: ColQwenEncoder, tmp_path: Path) -> Iterator[EdgePageStore]:
    store = EdgePageStore(tmp_path / "store", encoder_name=encoder.name, dim=encoder.dim)
    yield store
    store.close()


def index_pages(store: EdgePageStore, pages: list[PageEmbedding]) -> None:
    n = len(pages)
    schema = DocumentSchema(doc_id="doc.pdf", doc_version="v1", n_pages=n)
    records = [
        PageRecord(doc_id="doc.pdf", doc_version="v1", page=p, n_pages=n, text="", source="doc.pdf")
        for p in range(1, n + 1)
    ]
    store.upsert_document(schema, records, pages)


def test_store_round_trip_ranks_as_numpy_maxsim(
    encoder: ColQwenEncoder, pages: list[PageEmbedding], edge_store: EdgePageStore
) -> None:
    index_pages(edge_store, pages)
    assert edge_store.count_pages() == len(pages)
    for query in encoder.encode_queries(QUERIES):
        hits = edge_store.search(query, limit=len(pages), prefetch_limit=len(pages))
        expected = {
            p + 1: maxsim(query.multivector, page.multivector) for p, page in enumerate(pages)
        }
        assert sorted(h.ref.page for h in hits) == sorted(expected)
        for hit in hits:
            assert hit.score == pytest.approx(
                expected[hit.ref.page], abs=2e-3 * len(query.multivector)
            )
        scores = [h.score for h in hits]
        assert scores == sorted(scores, reverse=True)


def test_a_page_used_as_query_finds_itself(
    pages: list[PageEmbedding], edge_store: EdgePageStore
) -> None:
    index_pages(edge_store, pages)
    for number, page in enumerate(pages, start=1):
        hits = edge_store.search(page, limit=1)
        assert hits[0].ref == PageRef("doc.pdf", number)
