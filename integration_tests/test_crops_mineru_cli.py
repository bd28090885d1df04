"""The real MinerU CLI (``mineru-kit parse --tier flash``, offline) on a generated PDF; skipped when absent.

Point $DOCMEMO_MINERU_BIN at a ``mineru-kit`` in a separate virtualenv to run these without the extra.
"""

from __future__ import annotations

from pathlib import Path

import pytest
from crops_pdfs import TABLE_BOX, make_report_pdf
from llama_index.core.schema import NodeWithScore, QueryBundle, TextNode

import llama_index_docmemo.ingest.layout.mineru_cli as mineru_cli
from llama_index_docmemo.errors import MissingExtraError
from llama_index_docmemo.ingest.layout import (
    LayoutCache,
    index_layout,
    iou,
    mineru_executable,
    read_mineru_output,
)
from llama_index_docmemo.postprocessors import CropPostprocessor

needs_mineru = pytest.mark.skipif(
    mineru_executable() is None,
    reason="mineru-kit not found (install the 'mineru' extra or set DOCMEMO_MINERU_BIN)",
)


def test_missing_mineru_names_the_extra(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    monkeypatch.setenv(mineru_cli.MINERU_BIN_ENV, str(tmp_path / "no-such-mineru-kit"))
    monkeypatch.setattr(mineru_cli.importlib.util, "find_spec", lambda name: None)
    with pytest.raises(MissingExtraError, match=r"llama-index-docmemo\[mineru\]"):
        mineru_cli.run_mineru(tmp_path / "x.pdf", tmp_path)


@pytest.fixture(scope="module")
def mineru_zip(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, Path]:
    folder = tmp_path_factory.mktemp("mineru")
    pdf = make_report_pdf(folder / "report.pdf")
    return pdf, mineru_cli.run_mineru(pdf, folder / "out", timeout_s=600)


@needs_mineru
def test_cli_output_reads_as_blocks(mineru_zip: tuple[Path, Path]) -> None:
    _, out = mineru_zip
    pages = read_mineru_output(out)
    assert sorted(pages) == [1, 2, 3]
    tables = [b for b in pages[1] if b.kind == "table"]
    assert len(tables) == 1 and iou(tables[0].bbox, TABLE_BOX) > 0.9
    assert "1430" in tables[0].html and tables[0].caption.startswith("Table 1")
    assert all(b.source == "mineru-4" for b in pages[1])
    assert [b for b in pages[2] if b.kind in ("table", "chart", "figure")] == []


@needs_mineru
def test_indexed_mineru_layout_feeds_the_postprocessor(
    mineru_zip: tuple[Path, Path], tmp_path: Path
) -> None:
    pdf, out = mineru_zip
    pp = CropPostprocessor(cache_dir=str(tmp_path), detect=False)
    index_layout(pdf, "v-mineru", pp.layout_cache, method="mineru", mineru_output=out)
    assert isinstance(pp.layout_cache, LayoutCache) and pp.layout_cache.get("v-mineru", 1)
    meta = {
        "kind": "page",
        "doc_id": pdf.name,
        "page": 1,
        "doc_version": "v-mineru",
        "source": str(pdf),
    }
    nodes = pp.postprocess_nodes(
        [NodeWithScore(node=TextNode(text="p1", metadata=meta), score=1.0)], QueryBundle("revenue")
    )
    crops = [n for n in nodes if n.node.metadata["kind"] == "table"]
    assert len(crops) == 1 and crops[0].node.metadata["layout_source"] == "mineru-4"
    assert Path(crops[0].node.metadata["image_path"]).is_file()
