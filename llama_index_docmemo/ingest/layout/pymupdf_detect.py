"""Layout detection with PyMuPDF alone: the fallback when no MinerU output exists for a document.

Four signals, each catching what the others miss: PyMuPDF 2.0's bundled layout model (``pymupdf.layout``:
table/picture/caption/formula regions), the line-based table finder, raster image rectangles and clusters of
vector drawings (bar and line charts drawn as paths, which the layout model often reduces to their labels).
"""

from __future__ import annotations

import importlib.util
import re
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np
import pymupdf

from llama_index_docmemo.errors import IngestError
from llama_index_docmemo.ingest.layout.blocks import (
    BBox,
    LayoutBlock,
    area,
    containment,
    iou,
    union_box,
)
from llama_index_docmemo.ingest.layout.drawing_clusters import cluster_boxes
from llama_index_docmemo.ingest.layout.raster_regions import blank_boxes, ink_mask, raster_regions
from llama_index_docmemo.ingest.visible_text import visible_clip_text

SOURCE = "pymupdf"
_CAPTION_START = re.compile(
    r"^\s*(table|tab\.|figure|fig\.|chart|exhibit|graph|diagram)\s*[\dIVX]*", re.I
)
_MAX_TEXT = 4000


@dataclass(frozen=True)
class DetectOptions:
    """Knobs of :func:`detect_layout_pymupdf`.

    Args:
        layout_model: run PyMuPDF's layout model (needs ``pymupdf-layout``; skipped when absent).
        table_use_layout: ``find_tables(use_layout=...)``. False runs the line finder on the whole page
            (keeps plain ruled grids the layout gate can drop); True lets the layout model gate and complete it.
        min_side: smallest width/height (points) of a table, chart or figure kept.
        max_page_share: graphics covering more of the page than this are backgrounds, not figures.
        caption_gap: largest vertical gap (points) between a block and its caption.
        caption_in_box: a block's box takes in its caption, so the crop shows what the figure is.
        raster_regions: split a page that is one picture (no text layer, an image covering it) into
            regions by whitespace cuts (:mod:`.raster_regions`), rendered at ``raster_dpi``;
            ``raster_gap`` is the narrowest blank band (points) between two regions; a region
            covering a quarter of the page or more is cut again along bands of ``raster_fine_gap``
            points (None: not), its parts kept beside it. A scanned page with an OCR text layer
            is cut too, its words blanked first.
        group_figures_over: a page with more figures/charts than this also gets one block spanning
            them all.
        max_vector_items: vector items (lines, rectangles, curves) above which neither the
            layout model nor the line table finder runs on a page: the finder's time grows with
            the square of the items (400 ruled cells: 4 s; 1,800: 16 s; 8,000 squares:
            minutes), the model's with their number (8,000: 6 s); such a page's drawings still
            give chart regions (clustered in linear time), its images figures.
    """

    layout_model: bool = True
    table_use_layout: bool = False
    min_side: float = 24.0
    max_page_share: float = 0.85
    caption_gap: float = 40.0
    caption_in_box: bool = True
    raster_regions: bool = True
    group_figures_over: int = 3
    raster_dpi: int = 36
    raster_gap: float = 14.0
    raster_fine_gap: float | None = 8.0
    max_vector_items: int = 1500


def layout_model_available() -> bool:
    """Whether PyMuPDF's layout model (the ``pymupdf-layout`` package) can be activated."""
    return importlib.util.find_spec("pymupdf.layout") is not None


def _activate_layout_model() -> bool:
    if not layout_model_available():
        return False
    import pymupdf.layout  # noqa: F401  (activation hooks page.get_layout into pymupdf)

    return True


def detect_layout_pymupdf(
    pdf: str | Path | pymupdf.Document, page: int, options: DetectOptions | None = None
) -> list[LayoutBlock]:
    """Tables, charts, figures, equations and captions of one page (1-based), boxes in points.

    ``pdf`` may be an open document so that several pages of one file share one open.
    """
    opts = options or DetectOptions()
    if isinstance(pdf, pymupdf.Document):
        return _detect_page(pdf, page, opts)
    try:
        doc = pymupdf.open(str(pdf))
    except Exception as exc:  # pymupdf raises several types for unreadable files
        raise IngestError(str(pdf), f"cannot open as PDF: {exc}") from exc
    with doc:
        return _detect_page(doc, page, opts)


def _detect_page(doc: pymupdf.Document, page_no: int, opts: DetectOptions) -> list[LayoutBlock]:
    if not 1 <= page_no <= doc.page_count:
        raise IngestError(doc.name, f"page {page_no} outside 1..{doc.page_count}", page=page_no)
    page = doc[page_no - 1]
    page_box: BBox = tuple(page.rect)  # type: ignore[assignment]
    drawings = page.get_cdrawings()
    # the layout model and the line table finder slow down with every vector item (a page of
    # 8,000 squares: 6 s and minutes); past the cap, clusters, images and raster cuts remain
    dense = sum(len(d.get("items", ())) for d in drawings) > opts.max_vector_items
    regions = [] if dense else _layout_regions(page, opts)
    # A sliver the model calls a picture (a row of axis labels) is no figure and must not hide one.
    pictures = [
        r for r in regions if r.kind == "figure" and min(r.width, r.height) >= opts.min_side
    ]
    # Line grids inside a picture are a chart's axes and gridlines, not a table; a ruled frame around a
    # picture is its border; a ruled part of a table the model saw whole is that table.
    model_tables = [r for r in regions if r.kind == "table"]
    images = [_box(info["bbox"]) for info in page.get_image_info()]
    tables = [
        t
        for t in ([] if dense else _tables(page, opts))
        if not any(_nested(t.bbox, p.bbox) for p in pictures)
        and not any(_part_of(t.bbox, m.bbox) for m in model_tables)
        and not _holds_images(t.bbox, images)
    ]
    tables += [m for m in model_tables if all(iou(m.bbox, t.bbox) < 0.5 for t in tables)]
    graphics = _graphics(
        drawings, images, pictures, tables, page_box, opts
    ) + _picture_page_regions(page, page_box, opts)
    captions = [r for r in regions if r.kind == "caption"] + _caption_lines(page, regions)
    equations = [r for r in regions if r.kind == "equation"]
    titles = [
        r for r in regions if r.kind == "title"
    ]  # charts in reports are often titled, not captioned

    blocks: list[LayoutBlock] = []
    for region in tables + graphics:
        if min(region.width, region.height) < opts.min_side:
            continue
        caption_box = _caption_for(region.bbox, captions, opts.caption_gap)
        caption = _clip_text(page, caption_box) if caption_box else ""
        if not caption:
            title_box = _caption_for(region.bbox, titles, opts.caption_gap, above_only=True)
            caption = _clip_text(page, title_box) if title_box else ""
        text = region.text or _clip_text(page, region.bbox)
        bbox = (
            union_box(region.bbox, caption_box)
            if caption_box and opts.caption_in_box
            else region.bbox
        )
        blocks.append(
            LayoutBlock(
                page=page_no,
                kind=region.kind,
                bbox=bbox,
                caption=caption,
                text=text[:_MAX_TEXT],
                source=SOURCE,
            )
        )
    blocks += _figure_group(blocks, page_no, page_box, opts)
    for kind, regions in (("equation", equations), ("caption", captions)):
        blocks.extend(
            LayoutBlock(
                page=page_no,
                kind=kind,
                bbox=region.bbox,
                text=_clip_text(page, region.bbox),
                source=SOURCE,
            )
            for region in regions
        )
    return blocks


def _figure_group(
    blocks: list[LayoutBlock], page_no: int, page_box: BBox, opts: DetectOptions
) -> list[LayoutBlock]:
    """One block spanning a page's many figures (a photo grid, a row of wheels, an icon menu): a
    question about all of them ("how many ...") needs them in one view, which per-page caps on single
    crops cannot give."""
    figures = [b for b in blocks if b.kind in ("figure", "chart")]
    if len(figures) <= opts.group_figures_over:
        return []
    box = figures[0].bbox
    for block in figures[1:]:
        box = union_box(box, block.bbox)
    if area(box) > opts.max_page_share * area(page_box):
        return []
    caption = " ".join(b.caption for b in figures if b.caption)
    return [
        LayoutBlock(
            page=page_no, kind="figure", bbox=box, caption=caption[:_MAX_TEXT], source=SOURCE
        )
    ]


def _holds_images(table: BBox, images: list[BBox]) -> bool:
    """A ruled grid a quarter of which is raster images is a page layout (a cover, a photo grid)."""
    inside = sum(area(i) * containment(i, table) for i in images)
    return inside >= 0.25 * area(table)


def _part_of(part: BBox, whole: BBox) -> bool:
    return containment(part, whole) >= 0.9 and area(whole) > area(part)


def _inside(part: BBox, picture: BBox) -> bool:
    """Whether a drawing cluster or image is (mostly) a piece of the model's picture."""
    return containment(part, picture) >= 0.5 or iou(part, picture) >= 0.3


def _nested(a: BBox, b: BBox) -> bool:
    """Whether one box lies mostly inside the other."""
    return containment(a, b) >= 0.5 or containment(b, a) >= 0.5


@dataclass
class _Region:
    kind: str
    bbox: BBox
    text: str = ""

    @property
    def width(self) -> float:
        return self.bbox[2] - self.bbox[0]

    @property
    def height(self) -> float:
        return self.bbox[3] - self.bbox[1]


_MODEL_KINDS = {
    "table": "table",
    "picture": "figure",
    "caption": "caption",
    "formula": "equation",
    "section-header": "title",
}


def _layout_regions(page: pymupdf.Page, opts: DetectOptions) -> list[_Region]:
    if not opts.layout_model or not _activate_layout_model():
        return []
    if page.layout_information is None:
        page.get_layout()
    out: list[_Region] = []
    for item in page.layout_information or []:
        kind = _MODEL_KINDS.get(str(item[-1]))
        if kind:
            out.append(_Region(kind, _box(item[:4])))
    return out


def _tables(page: pymupdf.Page, opts: DetectOptions) -> list[_Region]:
    use_layout = opts.table_use_layout and opts.layout_model and _activate_layout_model()
    found = page.find_tables(use_layout=use_layout)
    out: list[_Region] = []
    for table in found.tables:
        try:
            rows = table.extract()
        except Exception:  # a degenerate grid has no cells to read; its region is still a table
            rows = []
        text = "\n".join(
            " | ".join(" ".join(str(c).split()) for c in row if c) for row in rows if any(row)
        )
        out.append(_Region("table", _box(table.bbox), text))
    return out


def _graphics(
    drawings: list[dict[str, Any]],
    images: list[BBox],
    pictures: list[_Region],
    tables: list[_Region],
    page_box: BBox,
    opts: DetectOptions,
) -> list[_Region]:
    """Figures the layout model found, as it drew them, plus the charts (vector drawing clusters,
    in time linear in the drawings: :mod:`.drawing_clusters`) and raster images it missed,
    merged: the model's picture box is the tighter one, while merging it with nearby drawings
    joins neighbouring figures into one region."""
    max_area = opts.max_page_share * area(page_box)
    candidates: list[_Region] = []
    for box, members in cluster_boxes([_box(d["rect"]) for d in drawings], page_box):
        if members >= 3 and not _holds_images(box, images):
            candidates.append(_Region("chart", box))
    candidates += [_Region("figure", box) for box in images]
    kept_pictures = [p for p in pictures if 0 < area(p.bbox) <= max_area]
    others = [
        c
        for c in candidates
        if 0 < area(c.bbox) <= max_area
        and all(containment(c.bbox, t.bbox) < 0.6 for t in tables)
        and not any(_inside(c.bbox, p.bbox) for p in kept_pictures)
    ]
    return kept_pictures + _merge_graphics(others)


def _picture_page_regions(page: pymupdf.Page, page_box: BBox, opts: DetectOptions) -> list[_Region]:
    """Regions of a page that is a single picture.

    A scanned page whose text layer was added by OCR is one picture too: its words are blanked from
    the ink first, so what the cuts find are the drawings and photos between the paragraphs.
    """
    if not opts.raster_regions:
        return []
    if not any(
        containment(page_box, _box(info["bbox"])) >= opts.max_page_share
        for info in page.get_image_info()
    ):
        return []
    pix = page.get_pixmap(dpi=opts.raster_dpi, colorspace=pymupdf.csRGB, alpha=False)
    pixels = np.frombuffer(pix.samples, dtype=np.uint8).reshape(pix.height, pix.width, pix.n)
    size = (page_box[2] - page_box[0], page_box[3] - page_box[1])
    mask = ink_mask(pixels)
    words = [_shift(_box(w[:4]), page_box, -1) for w in page.get_text("words")]
    blank_boxes(mask, words, size)
    boxes = raster_regions(
        mask, size, min_side=opts.min_side, gap=opts.raster_gap, fine_gap=opts.raster_fine_gap
    )
    shifted = [_shift(b, page_box, 1) for b in boxes]
    return [
        _Region("figure", b) for b in shifted if area(b) <= opts.max_page_share * area(page_box)
    ]


def _shift(box: BBox, page_box: BBox, sign: int) -> BBox:
    """``box`` moved by the page's origin (``sign`` 1: from the page's own frame to points)."""
    dx, dy = sign * page_box[0], sign * page_box[1]
    return (box[0] + dx, box[1] + dy, box[2] + dx, box[3] + dy)


def _merge_graphics(items: list[_Region]) -> list[_Region]:
    """Join overlapping or touching graphics: a chart's bars and its labels become one region."""
    merged = list(items)
    changed = True
    while changed:
        changed = False
        for i in range(len(merged)):
            for j in range(i + 1, len(merged)):
                a, b = merged[i], merged[j]
                if _belong_together(a.bbox, b.bbox, adjacent="chart" in (a.kind, b.kind)):
                    kind = "chart" if "chart" in (a.kind, b.kind) else "figure"
                    merged[i] = _Region(kind, union_box(a.bbox, b.bbox))
                    del merged[j]
                    changed = True
                    break
            if changed:
                break
    return merged


def _belong_together(a: BBox, b: BBox, adjacent: bool, gap: float = 10.0) -> bool:
    """Overlapping regions are one; touching ones too when ``adjacent`` (a chart's drawings and
    labels), not two photos side by side in a grid."""
    if iou(a, b) >= 0.3 or containment(a, b) >= 0.8 or containment(b, a) >= 0.8:
        return True
    if not adjacent:
        return False
    grown = (a[0] - gap, a[1] - gap, a[2] + gap, a[3] + gap)
    return containment(b, grown) > 0.0 and _overlap_1d(a[0], a[2], b[0], b[2]) > 0.5 * min(
        a[2] - a[0], b[2] - b[0]
    )


def _overlap_1d(a0: float, a1: float, b0: float, b1: float) -> float:
    return max(0.0, min(a1, b1) - max(a0, b0))


def _caption_lines(page: pymupdf.Page, regions: list[_Region]) -> list[_Region]:
    """Text blocks that read like captions ("Table 3", "Figure 2:") the layout model did not mark."""
    known = [r.bbox for r in regions if r.kind == "caption"]
    out: list[_Region] = []
    for block in page.get_text("blocks"):
        x0, y0, x1, y1, text, _, block_type = block[:7]
        box = (float(x0), float(y0), float(x1), float(y1))
        if block_type != 0 or not _CAPTION_START.match(text) or len(text) > 400:
            continue
        if all(iou(box, k) < 0.5 for k in known):
            out.append(_Region("caption", box))
    return out


def _caption_for(
    box: BBox, captions: list[_Region], max_gap: float, above_only: bool = False
) -> BBox | None:
    """The caption nearest above or below ``box`` that shares its columns."""
    best: tuple[float, BBox] | None = None
    for cap in captions:
        c = cap.bbox
        if _overlap_1d(box[0], box[2], c[0], c[2]) <= 0:
            continue
        below = c[1] >= box[3] - 2
        if below and above_only:
            continue
        gap = c[1] - box[3] if below else box[1] - c[3]
        if -2 <= gap <= max_gap and (best is None or gap < best[0]):
            best = (gap, c)
    return best[1] if best else None


def _clip_text(page: pymupdf.Page, box: BBox) -> str:
    return " ".join(visible_clip_text(page, pymupdf.Rect(box)).split())


def _box(value: Any) -> BBox:
    x0, y0, x1, y1 = (float(v) for v in list(value)[:4])
    return (x0, y0, x1, y1)
