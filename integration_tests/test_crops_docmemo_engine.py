"""Adaptive granularity inside DocMemoQueryEngine: crops of the pages read reach the reader,
the per-query table-crop cap holds across rounds, and crops on useful pages become sources."""

from __future__ import annotations

from pathlib import Path

import pytest
from crops_pdfs import make_report_pdf
from PIL import Image

from llama_index_docmemo.config import DocMemoConfig
from llama_index_docmemo.encoders import default_encoder
from llama_index_docmemo.indexing import DocumentIndexer
from llama_index_docmemo.postprocessors.crops import CropPostprocessor
from llama_index_docmemo.query_engine import DocMemoQueryEngine
from llama_index_docmemo.readers.base import Feedback, Reader, ReaderInput
from llama_index_docmemo.store import open_store


class CropReader(Reader):
    """Records what it is shown; calls every page with a crop useful, never answers."""

    name = "crop-reader"

    def __init__(self) -> None:
        self.inputs: list[ReaderInput] = []

    def read(self, inp: ReaderInput) -> Feedback:
        self.inputs.append(inp)
        with_crops = list(dict.fromkeys(c.page for c in inp.crops))
        return Feedback(useful_pages=with_crops, status="need_more")


@pytest.fixture(scope="module")
def engine_parts(tmp_path_factory: pytest.TempPathFactory):
    root = tmp_path_factory.mktemp("crops_engine")
    pdf = make_report_pdf(root / "report.pdf")
    encoder = default_encoder()
    store = open_store(path=root / "store", encoder=encoder)
    report = DocumentIndexer(store, encoder).index_paths([pdf])
    assert report.ok, report.summary()
    yield store, encoder, root
    store.close()


@pytest.mark.parametrize("max_tables", [5, 1])
def test_crops_reach_the_reader_within_the_query_cap(engine_parts, max_tables: int) -> None:
    store, encoder, root = engine_parts
    reader = CropReader()
    engine = DocMemoQueryEngine.from_defaults(
        store=store,
        encoder=encoder,
        reader=reader,
        config=DocMemoConfig(pages_per_round=1, rounds=3, max_table_crops=max_tables),
        crop_postprocessor=CropPostprocessor(cache_dir=str(root / "cache")),
        evidence_images=False,
    )
    result = engine.run("segment table revenue by region")
    crops = [c for inp in reader.inputs for c in inp.crops]
    assert crops, "no crop reached the reader"
    assert sum(c.kind == "table" for c in crops) <= max_tables
    path = crops[0].load_image()  # the crop's PNG in the cache, read when a request is sent
    with Image.open(path) as image:
        assert image.format == "PNG" and max(image.size) <= 1500
    assert sum(r.crops for r in result.trace.rounds[-1:]) == len(crops)
    crop_sources = [n for n in result.source_nodes if n.node.metadata.get("kind") != "page"]
    assert crop_sources and all(Path(n.node.metadata["image_path"]).is_file() for n in crop_sources)


def test_switch_off_means_no_crops(engine_parts) -> None:
    store, encoder, root = engine_parts
    reader = CropReader()
    engine = DocMemoQueryEngine.from_defaults(
        store=store,
        encoder=encoder,
        reader=reader,
        config=DocMemoConfig(pages_per_round=2, rounds=1, adaptive_granularity=False),
        crop_postprocessor=CropPostprocessor(cache_dir=str(root / "cache")),
        evidence_images=False,
    )
    engine.run("revenue by region table")
    assert all(not inp.crops for inp in reader.inputs)
