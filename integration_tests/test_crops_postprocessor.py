"""CropPostprocessor on a generated PDF: crop nodes, caps, pixel sizes, caching, and a stock LlamaIndex engine."""

from __future__ import annotations

from pathlib import Path

import pytest
from crops_pdfs import TABLE_BOX, make_report_pdf
from llama_index.core import get_response_synthesizer
from llama_index.core.base.base_retriever import BaseRetriever
from llama_index.core.llms import MockLLM
from llama_index.core.query_engine import RetrieverQueryEngine
from llama_index.core.schema import ImageNode, NodeWithScore, QueryBundle, TextNode
from PIL import Image

from llama_index_docmemo.ingest.layout import DetectOptions, LayoutBlock
from llama_index_docmemo.ingest.layout.blocks import containment
from llama_index_docmemo.postprocessors import CropPostprocessor

FAST = DetectOptions(layout_model=False)


@pytest.fixture(scope="module")
def report_pdf(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return make_report_pdf(tmp_path_factory.mktemp("pdf") / "report.pdf")


def page_node(pdf: Path, page: int, score: float = 1.0, version: str = "v1") -> NodeWithScore:
    meta = {
        "kind": "page",
        "doc_id": pdf.name,
        "page": page,
        "doc_version": version,
        "source": str(pdf),
        "section": "",
    }
    return NodeWithScore(node=TextNode(text=f"page {page} text", metadata=meta), score=score)


def crops_of(nodes: list[NodeWithScore]) -> list[NodeWithScore]:
    return [n for n in nodes if n.node.metadata["kind"] != "page"]


def test_crop_nodes_follow_page_nodes(report_pdf: Path, tmp_path: Path) -> None:
    pp = CropPostprocessor(cache_dir=str(tmp_path), detect_options=FAST)
    pages = [page_node(report_pdf, 1, 0.9), page_node(report_pdf, 2, 0.5)]
    out = pp.postprocess_nodes(pages, QueryBundle("Show the staff count by region"))
    assert out[:2] == pages
    crops = crops_of(out)
    assert [c.node.metadata["kind"] for c in crops] == [
        "chart",
        "table",
    ]  # "staff ... region" is the chart's caption
    table = crops[1]
    meta = table.node.metadata
    assert isinstance(table.node, ImageNode) and table.score == 0.9
    assert {k: meta[k] for k in ("doc_id", "page", "doc_version", "source")} == {
        "doc_id": "report.pdf",
        "page": 1,
        "doc_version": "v1",
        "source": str(report_pdf),
    }
    box = tuple(meta["bbox"])  # the grid and its caption 8 pt above
    assert containment(TABLE_BOX, box) == 1.0 and TABLE_BOX[1] - 20 < box[1] < TABLE_BOX[1] - 8
    assert meta["caption"] == "Table 1: Revenue by region in 2023"
    assert "East | 1430 | 390 | 51" in table.node.get_content()
    assert Path(meta["image_path"]).is_file() and table.node.image_path == meta["image_path"]
    assert Path(meta["image_path"]).is_relative_to(tmp_path / "crops" / "v1")


def test_caps_and_pixel_sizes(report_pdf: Path, tmp_path: Path) -> None:
    pp = CropPostprocessor(
        cache_dir=str(tmp_path), detect_options=FAST, max_crops_per_page=10, max_crops=10
    )
    crops = crops_of(
        pp.postprocess_nodes([page_node(report_pdf, 3)], QueryBundle("segment tables"))
    )
    assert len(crops) == 5  # seven tables on the page, five table crops at most
    for crop in crops:
        with Image.open(crop.node.metadata["image_path"]) as img:
            # 220 x 100 pt, its caption line above (18.75 pt), +4 pt padding, at 200 dpi
            assert img.size == (pytest.approx(633, abs=2), pytest.approx(352, abs=2))
    small = CropPostprocessor(
        cache_dir=str(tmp_path), detect_options=FAST, max_table_crops=2, max_long_side=300
    )
    crops = crops_of(small.postprocess_nodes([page_node(report_pdf, 3)], QueryBundle("segment")))
    assert len(crops) == 2
    for crop in crops:
        with Image.open(crop.node.metadata["image_path"]) as img:
            assert max(img.size) <= 300


def test_long_side_cap_on_a_page_sized_block(report_pdf: Path, tmp_path: Path) -> None:
    pp = CropPostprocessor(cache_dir=str(tmp_path), detect=False)
    whole = LayoutBlock(page=1, kind="figure", bbox=(0, 0, 612, 792), caption="whole page")
    tiny = LayoutBlock(page=1, kind="table", bbox=(10, 10, 40, 30), caption="too small to read")
    pp.layout_cache.save("v1", {1: [whole, tiny]})
    (crop,) = crops_of(pp.postprocess_nodes([page_node(report_pdf, 1)], QueryBundle("page")))
    assert crop.node.metadata["caption"] == "whole page"
    with Image.open(crop.node.metadata["image_path"]) as img:
        assert max(img.size) == 1500  # 792 pt at 200 dpi would be 2200 px


def test_layout_and_crops_are_cached(
    report_pdf: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    pp = CropPostprocessor(cache_dir=str(tmp_path), detect_options=FAST)
    first = crops_of(pp.postprocess_nodes([page_node(report_pdf, 1)], QueryBundle("revenue")))
    paths = [Path(c.node.metadata["image_path"]) for c in first]
    stamps = [p.stat().st_mtime_ns for p in paths]
    assert pp.layout_cache.get("v1", 1) is not None and pp.layout_cache.get("v1", 2) is None

    import llama_index_docmemo.postprocessors.crops as crops_module

    def fail(*args: object, **kwargs: object) -> None:
        raise AssertionError("detection or rendering ran again")

    monkeypatch.setattr(crops_module, "detect_layout_pymupdf", fail)
    monkeypatch.setattr(crops_module, "render_crop", fail)
    again = CropPostprocessor(cache_dir=str(tmp_path), detect_options=FAST)
    second = crops_of(again.postprocess_nodes([page_node(report_pdf, 1)], QueryBundle("revenue")))
    assert [c.node.node_id for c in second] == [c.node.node_id for c in first]
    assert [p.stat().st_mtime_ns for p in paths] == stamps
    # A new version of the document shares nothing with the old one.
    monkeypatch.undo()
    other = crops_of(
        pp.postprocess_nodes([page_node(report_pdf, 1, version="v2")], QueryBundle("revenue"))
    )
    assert all("/v2/" in c.node.metadata["image_path"] for c in other)


def test_missing_source_gives_no_crops_not_an_error(tmp_path: Path) -> None:
    pp = CropPostprocessor(cache_dir=str(tmp_path), detect_options=FAST)
    node = page_node(tmp_path / "gone.pdf", 1)
    assert pp.postprocess_nodes([node], QueryBundle("x")) == [node]


def test_non_page_nodes_pass_through(tmp_path: Path) -> None:
    pp = CropPostprocessor(cache_dir=str(tmp_path))
    plain = NodeWithScore(node=TextNode(text="a chunk", metadata={"file_name": "x.txt"}), score=0.3)
    assert pp.postprocess_nodes([plain], QueryBundle("x")) == [plain]


class PageRetriever(BaseRetriever):
    """A stock-API retriever returning DocMemo-style page nodes (page 1, then page 2)."""

    def __init__(self, pdf: Path) -> None:
        super().__init__()
        self.pdf = pdf

    def _retrieve(self, query_bundle: QueryBundle) -> list[NodeWithScore]:
        return [page_node(self.pdf, 1, 0.8), page_node(self.pdf, 2, 0.4)]


def test_stock_retriever_query_engine_receives_crops(report_pdf: Path, tmp_path: Path) -> None:
    engine = RetrieverQueryEngine.from_args(
        PageRetriever(report_pdf),
        llm=MockLLM(),
        node_postprocessors=[CropPostprocessor(cache_dir=str(tmp_path), detect_options=FAST)],
        response_synthesizer=get_response_synthesizer(llm=MockLLM(), response_mode="compact"),
    )
    response = engine.query("What was the revenue in the North region?")
    kinds = [n.node.metadata["kind"] for n in response.source_nodes]
    assert kinds == ["page", "page", "table", "chart"]
    assert Path(response.source_nodes[2].node.metadata["image_path"]).is_file()


async def test_async_engine_path(report_pdf: Path, tmp_path: Path) -> None:
    engine = RetrieverQueryEngine.from_args(
        PageRetriever(report_pdf),
        llm=MockLLM(),
        node_postprocessors=[CropPostprocessor(cache_dir=str(tmp_path), detect_options=FAST)],
    )
    response = await engine.aquery("staff by region")
    assert [n.node.metadata["kind"] for n in response.source_nodes][2:] == ["chart", "table"]


def test_blocks_for_one_page_shares_the_node_path_cache(
    report_pdf: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The evaluation's box grounding asks for a page's blocks without a node; it must see what
    the postprocessor would crop, and fill the same cache."""
    pp = CropPostprocessor(cache_dir=str(tmp_path), detect_options=FAST)
    blocks = pp.blocks_for("v1", str(report_pdf), 1)
    assert any(b.kind == "table" and containment(TABLE_BOX, b.bbox) > 0.9 for b in blocks)
    import llama_index_docmemo.postprocessors.crops as crops_module

    def fail(*args: object, **kwargs: object) -> None:
        raise AssertionError("detection ran again")

    monkeypatch.setattr(crops_module, "detect_layout_pymupdf", fail)
    again = CropPostprocessor(cache_dir=str(tmp_path), detect_options=FAST)
    assert again.blocks_for("v1", str(report_pdf), 1) == blocks
    crops = crops_of(again.postprocess_nodes([page_node(report_pdf, 1)], QueryBundle("revenue")))
    assert crops, "the node path reads the blocks blocks_for stored"
