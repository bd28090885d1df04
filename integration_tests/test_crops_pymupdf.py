"""PyMuPDF detection on generated PDFs (ruled tables, vector bar charts) and on real report pages."""

from __future__ import annotations

from dataclasses import replace
from pathlib import Path

import pytest
from crops_pdfs import (
    CHART_BARS_BOX,
    GRID_PHOTOS,
    PHOTO_BOX,
    SCAN_FIGURE_BOX,
    SLIDE_CHART_BOX,
    SLIDE_PANELS,
    TABLE_BOX,
    make_figures_pdf,
    make_panel_slide_pdf,
    make_photo_grid_pdf,
    make_report_pdf,
    make_scanned_pdf,
    make_slide_pdf,
)

from llama_index_docmemo.errors import IngestError
from llama_index_docmemo.ingest.layout import (
    DetectOptions,
    detect_layout_pymupdf,
    iou,
    layout_model_available,
)
from llama_index_docmemo.ingest.layout.blocks import CROP_KINDS, containment, union_box

WITH_MODEL = pytest.param(
    DetectOptions(),
    marks=pytest.mark.skipif(not layout_model_available(), reason="pymupdf-layout not installed"),
    id="layout-model",
)
LINES_ONLY = pytest.param(DetectOptions(layout_model=False), id="no-layout-model")


@pytest.fixture(scope="module")
def report_pdf(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return make_report_pdf(tmp_path_factory.mktemp("pdf") / "report.pdf")


@pytest.mark.parametrize("options", [WITH_MODEL, LINES_ONLY])
def test_table_and_chart_found_with_captions(report_pdf: Path, options: DetectOptions) -> None:
    blocks = detect_layout_pymupdf(report_pdf, 1, replace(options, caption_in_box=False))
    (table,) = [b for b in blocks if b.kind == "table"]
    assert iou(table.bbox, TABLE_BOX) > 0.95
    assert table.caption == "Table 1: Revenue by region in 2023"
    assert table.text.splitlines()[0] == "Region | Revenue | Profit | Staff"
    assert "East | 1430 | 390 | 51" in table.text
    (chart,) = [b for b in blocks if b.kind == "chart"]
    assert iou(chart.bbox, CHART_BARS_BOX) > 0.8
    assert chart.caption == "Figure 2: Staff count by region"
    assert all(b.source == "pymupdf" and b.page == 1 for b in blocks)


@pytest.mark.parametrize("options", [WITH_MODEL, LINES_ONLY])
def test_a_crop_box_takes_in_its_caption(report_pdf: Path, options: DetectOptions) -> None:
    """MMLongBench-Doc's evidence boxes, and a reader, see a figure with its caption."""
    tight = detect_layout_pymupdf(report_pdf, 1, replace(options, caption_in_box=False))
    blocks = detect_layout_pymupdf(report_pdf, 1, options)
    captions = {b.text: b.bbox for b in blocks if b.kind == "caption"}
    for kind in ("table", "chart"):
        (before,) = [b for b in tight if b.kind == kind]
        (after,) = [b for b in blocks if b.kind == kind]
        assert after.caption == before.caption
        assert after.bbox == union_box(before.bbox, captions[after.caption])
        assert after.bbox != before.bbox


@pytest.mark.parametrize("options", [WITH_MODEL, LINES_ONLY])
def test_photo_and_chart_side_by_side_stay_apart(tmp_path: Path, options: DetectOptions) -> None:
    """The model marks the chart's label row as a thin 'picture': that sliver must not hide the chart,
    and the photo's frame is no table."""
    pdf = make_figures_pdf(tmp_path / "figures.pdf")
    blocks = [b for b in detect_layout_pymupdf(pdf, 1, options) if b.kind in CROP_KINDS]
    assert sorted(b.kind for b in blocks) == ["chart", "figure"]
    (photo,) = [b for b in blocks if b.kind == "figure"]
    (chart,) = [b for b in blocks if b.kind == "chart"]
    assert photo.caption == "Figure 1: Aerial view of the northern site"
    assert chart.caption == "Figure 2: Staff count by region"
    assert containment(PHOTO_BOX, photo.bbox) > 0.99 and photo.bbox[3] > PHOTO_BOX[3] + 10
    assert iou(photo.bbox, chart.bbox) == 0.0


@pytest.mark.parametrize("options", [WITH_MODEL, LINES_ONLY])
def test_photos_in_a_ruled_grid_stay_four_figures(tmp_path: Path, options: DetectOptions) -> None:
    """The grid's rules are no table and no chart, and photos side by side are not merged; more than
    three figures also get one block spanning them (fewer do not)."""
    pdf = make_photo_grid_pdf(tmp_path / "cover.pdf")
    blocks = [b for b in detect_layout_pymupdf(pdf, 1, options) if b.kind in CROP_KINDS]
    assert [b.kind for b in blocks] == ["figure"] * 5
    for photo in GRID_PHOTOS:
        assert max(iou(b.bbox, photo) for b in blocks) > 0.95
    spanning = (GRID_PHOTOS[0][0], GRID_PHOTOS[0][1], GRID_PHOTOS[3][2], GRID_PHOTOS[3][3])
    assert max(iou(b.bbox, spanning) for b in blocks) > 0.97
    four = replace(options, group_figures_over=4)
    assert len([b for b in detect_layout_pymupdf(pdf, 1, four) if b.kind in CROP_KINDS]) == 4


def test_an_image_only_slide_is_cut_into_its_regions(tmp_path: Path) -> None:
    """No text layer, one full-page image: the chart panel is found by whitespace cuts."""
    pdf = make_slide_pdf(tmp_path / "slide.pdf")
    blocks = [b for b in detect_layout_pymupdf(pdf, 1) if b.kind in CROP_KINDS]
    assert max(iou(b.bbox, SLIDE_CHART_BOX) for b in blocks) > 0.95
    assert all(b.kind == "figure" for b in blocks)
    assert len(blocks) == 3  # the chart, the text column, the title band
    off = detect_layout_pymupdf(pdf, 1, DetectOptions(raster_regions=False))
    assert [b for b in off if b.kind in CROP_KINDS] == []


def test_screenshots_set_close_on_a_slide_are_crops_beside_their_panel(tmp_path: Path) -> None:
    """Panels 10 pt apart are one region at the 14 pt gap; the fine cut adds each of them."""
    pdf = make_panel_slide_pdf(tmp_path / "panels.pdf")
    boxes = [b.bbox for b in detect_layout_pymupdf(pdf, 1) if b.kind in CROP_KINDS]
    spanning = union_box(SLIDE_PANELS[0], SLIDE_PANELS[3])
    assert max(iou(b, spanning) for b in boxes) > 0.95
    for panel in SLIDE_PANELS:
        assert max(iou(b, panel) for b in boxes) > 0.95
    coarse = detect_layout_pymupdf(pdf, 1, DetectOptions(raster_fine_gap=None))
    assert all(max(iou(b.bbox, panel) for b in coarse) < 0.5 for panel in SLIDE_PANELS)


def test_a_scanned_page_with_an_ocr_layer_gives_its_drawing_not_its_prose(tmp_path: Path) -> None:
    """One full-page image with invisible OCR words: the words are blanked, the drawing is cut out."""
    pdf = make_scanned_pdf(tmp_path / "scan.pdf")
    lines_only = DetectOptions(layout_model=False)
    blocks = [b for b in detect_layout_pymupdf(pdf, 1, lines_only) if b.kind in CROP_KINDS]
    assert len(blocks) == 1 and iou(blocks[0].bbox, SCAN_FIGURE_BOX) > 0.95
    off = detect_layout_pymupdf(pdf, 1, replace(lines_only, raster_regions=False))
    assert [b for b in off if b.kind in CROP_KINDS] == []


def test_prose_page_has_no_crop_blocks(report_pdf: Path) -> None:
    assert [
        b for b in detect_layout_pymupdf(report_pdf, 2) if b.kind in ("table", "chart", "figure")
    ] == []


def test_plain_ruled_grids_keep_their_full_extent(report_pdf: Path) -> None:
    """The default find_tables(use_layout=False) returns each whole grid (use_layout=True cut columns off here)."""
    tight = DetectOptions(caption_in_box=False)
    tables = [b for b in detect_layout_pymupdf(report_pdf, 3, tight) if b.kind == "table"]
    assert len(tables) == 7
    assert all(
        b.width == pytest.approx(220, abs=1) and b.height == pytest.approx(100, abs=1)
        for b in tables
    )
    assert sorted(b.caption for b in tables)[0] == "Table 3: Segment 0"


def test_bad_page_and_bad_file_are_named(report_pdf: Path, tmp_path: Path) -> None:
    with pytest.raises(IngestError, match=r"page 9 outside 1\.\.3"):
        detect_layout_pymupdf(report_pdf, 9)
    bogus = tmp_path / "bogus.pdf"
    bogus.write_bytes(b"not a pdf")
    with pytest.raises(IngestError, match="bogus.pdf"):
        detect_layout_pymupdf(bogus, 1)


@pytest.mark.data
def test_real_report_table_and_chart(mmlongbench_dir: Path) -> None:
    """Pew report: page 19 has a sample-size table, page 5 a vector chart (gold boxes from MMLongBench-Doc)."""
    pdf = mmlongbench_dir / "pdfs" / "PH_2016.06.08_Economy-Final.pdf"
    table_gold, chart_gold = (64, 274, 546, 389), (366, 229, 514, 383)
    tables = [b for b in detect_layout_pymupdf(pdf, 19) if b.kind == "table"]
    assert max(iou(b.bbox, table_gold) for b in tables) >= 0.5
    charts = [b for b in detect_layout_pymupdf(pdf, 5) if b.kind in ("chart", "figure")]
    assert max(iou(b.bbox, chart_gold) for b in charts) >= 0.5
