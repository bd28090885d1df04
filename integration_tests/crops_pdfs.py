"""Generated PDFs with real ruled tables, vector bar charts and raster photos, for the crop tests."""

from __future__ import annotations

import io
from collections.abc import Sequence
from pathlib import Path

import pymupdf
from PIL import Image, ImageDraw

ROWS = [
    ["Region", "Revenue", "Profit", "Staff"],
    ["North", "1200", "300", "45"],
    ["South", "980", "210", "38"],
    ["East", "1430", "390", "51"],
    ["West", "760", "120", "29"],
]
TABLE_BOX = (72.0, 220.0, 512.0, 320.0)
CHART_BARS_BOX = (100.0, 420.0, 400.0, 620.0)


def draw_table(
    page: pymupdf.Page, x0: float, y0: float, caption: str, rows: list[list[str]] = ROWS
) -> None:
    """A fully ruled grid: 110 pt columns, 20 pt rows, caption 8 pt above."""
    cw, rh = 110.0, 20.0
    page.insert_text((x0, y0 - 8), caption, fontsize=10)
    for r, row in enumerate(rows):
        for c, cell in enumerate(row):
            page.insert_text((x0 + c * cw + 4, y0 + r * rh + 14), cell, fontsize=10)
    ncols = len(rows[0])
    for r in range(len(rows) + 1):
        page.draw_line((x0, y0 + r * rh), (x0 + ncols * cw, y0 + r * rh))
    for c in range(ncols + 1):
        page.draw_line((x0 + c * cw, y0), (x0 + c * cw, y0 + len(rows) * rh))


def draw_bar_chart(page: pymupdf.Page, x0: float, base: float, caption: str) -> None:
    """Axes, four filled bars and their labels, caption below."""
    page.draw_line((x0, base), (x0 + 300, base))
    page.draw_line((x0, base), (x0, base - 200))
    for i, h in enumerate([120, 80, 160, 60]):
        rect = pymupdf.Rect(x0 + 20 + i * 70, base - h, x0 + 70 + i * 70, base)
        page.draw_rect(rect, color=(0, 0, 0), fill=(0.2, 0.4, 0.8))
        page.insert_text((x0 + 25 + i * 70, base + 14), ROWS[i + 1][0], fontsize=9)
    page.insert_text((x0, base + 40), caption, fontsize=10)


def make_report_pdf(path: Path) -> Path:
    """Page 1: prose, a revenue table and a staff bar chart. Page 2: prose only. Page 3: seven small tables."""
    doc = pymupdf.open()
    page = doc.new_page(width=612, height=792)
    page.insert_text((72, 72), "Quarterly report of the Example Company", fontsize=16)
    for i in range(6):
        page.insert_text(
            (72, 100 + 14 * i),
            "Revenue grew in every region and the outlook is stable.",
            fontsize=10,
        )
    draw_table(page, TABLE_BOX[0], TABLE_BOX[1], "Table 1: Revenue by region in 2023")
    draw_bar_chart(page, CHART_BARS_BOX[0], CHART_BARS_BOX[3], "Figure 2: Staff count by region")
    prose = doc.new_page(width=612, height=792)
    for i in range(30):
        prose.insert_text(
            (72, 72 + 20 * i), "Management discussion of results without any table.", fontsize=10
        )
    many = doc.new_page(width=612, height=792)
    for i in range(7):
        draw_table(
            many,
            72 + (i % 2) * 260,
            60 + (i // 2) * 180,
            f"Table {i + 3}: Segment {i}",
            [r[:2] for r in ROWS],
        )
    doc.save(str(path))
    doc.close()
    return path


PHOTO_BOX = (72.0, 170.0, 272.0, 320.0)  # 4:3, as the image


def _photo_png() -> bytes:
    """A raster 'photo': coloured strokes on white (no text, so only its image box marks it)."""
    image = Image.new("RGB", (400, 300), "white")
    pen = ImageDraw.Draw(image)
    for i in range(8):
        pen.line((0, 40 * i, 400, 300 - 30 * i), fill=(200, 30 * i, 40), width=4)
    pen.ellipse((100, 80, 300, 220), outline="navy", width=6)
    buffer = io.BytesIO()
    image.save(buffer, "PNG")
    return buffer.getvalue()


def _image_page_pdf(
    path: Path, image: Image.Image, size: tuple[float, float], words: Sequence[float] = ()
) -> Path:
    """A one-page PDF of ``size`` points that is ``image`` (an image-only slide or scan), with
    invisible OCR-layer text at each baseline of ``words``."""
    buffer = io.BytesIO()
    image.save(buffer, "PNG")
    doc = pymupdf.open()
    page = doc.new_page(width=size[0], height=size[1])
    page.insert_image(page.rect, stream=buffer.getvalue())
    for baseline in words:
        page.insert_text((72, baseline), SCAN_WORDS, fontsize=10, render_mode=3)
    doc.save(str(path))
    doc.close()
    return path


def make_figures_pdf(path: Path) -> Path:
    """One page: a framed raster photo and, beside it, a vector bar chart, each captioned below."""
    doc = pymupdf.open()
    page = doc.new_page(width=612, height=792)
    page.insert_text((72, 60), "Results of the field study", fontsize=14)
    for i in range(5):
        page.insert_text(
            (72, 90 + 14 * i),
            "The photographs below were taken at the northern site in spring.",
            fontsize=10,
        )
    page.insert_image(pymupdf.Rect(PHOTO_BOX), stream=_photo_png())
    page.draw_rect(pymupdf.Rect(66, 164, 278, 326))  # a ruled frame around the photo
    page.insert_text((72, 341), "Figure 1: Aerial view of the northern site", fontsize=10)
    draw_bar_chart(page, 290, 370, "Figure 2: Staff count by region")
    for i in range(8):
        page.insert_text(
            (72, 440 + 14 * i),
            "Discussion of the figures continues with more prose text here.",
            fontsize=10,
        )
    doc.save(str(path))
    doc.close()
    return path


SLIDE_CHART_BOX = (60.0, 150.0, 460.0, 480.0)  # points on a 768 x 576 slide


def make_slide_pdf(path: Path) -> Path:
    """An image-only slide (no text layer): a title band, a bar-chart panel and a text column, as pixels."""
    scale = 2  # pixels per point
    image = Image.new("RGB", (768 * scale, 576 * scale), (20, 40, 120))
    pen = ImageDraw.Draw(image)
    pen.rectangle((60 * scale, 40 * scale, 500 * scale, 90 * scale), fill="white")  # title
    x0, y0, x1, y1 = (int(v * scale) for v in SLIDE_CHART_BOX)
    pen.rectangle((x0, y0, x1, y1), fill="white")
    for i, height in enumerate((200, 120, 260, 90)):
        left = x0 + (40 + 90 * i) * scale
        pen.rectangle(
            (left, y1 - (20 + height) * scale, left + 60 * scale, y1 - 20 * scale), fill="orange"
        )
    for line in range(6):
        top = (170 + 24 * line) * scale  # lines 8 pt apart: one text block
        pen.rectangle((520 * scale, top, 720 * scale, top + 16 * scale), fill="white")
    return _image_page_pdf(path, image, (768, 576))


GRID_PHOTOS = [
    (72.0 + 156 * c, 100.0 + 118.5 * r, 222.0 + 156 * c, 212.5 + 118.5 * r)
    for r in range(2)
    for c in range(2)
]


def make_photo_grid_pdf(path: Path) -> Path:
    """A cover: four photos, 6 pt apart, each in a ruled cell (a layout, not a table nor one figure)."""
    doc = pymupdf.open()
    page = doc.new_page(width=612, height=792)
    photo = _photo_png()
    for x0, y0, x1, y1 in GRID_PHOTOS:
        page.insert_image(pymupdf.Rect(x0, y0, x1, y1), stream=photo)
        page.draw_rect(pymupdf.Rect(x0 - 2, y0 - 2, x1 + 2, y1 + 2))
    page.insert_text((72, 380), "Annual report 2024", fontsize=20)
    doc.save(str(path))
    doc.close()
    return path


SCAN_FIGURE_BOX = (150.0, 300.0, 450.0, 480.0)  # points on a 612 x 792 page
SCAN_WORDS = "the scanned report text layer as recognised by optical character recognition"


def make_scanned_pdf(path: Path) -> Path:
    """A scanned page: one full-page image of prose lines around a line drawing, with an OCR text
    layer (invisible words) over the lines, as scanners write it."""
    scale = 2  # pixels per point
    image = Image.new("RGB", (612 * scale, 792 * scale), "white")
    pen = ImageDraw.Draw(image)
    lines = [100 + 14 * i for i in range(12)] + [520 + 14 * i for i in range(12)]
    space = pymupdf.get_text_length(" ", fontsize=10)
    for baseline in lines:  # a word's ink where the text layer puts the word
        left = 72.0
        for word in SCAN_WORDS.split():
            right = left + pymupdf.get_text_length(word, fontsize=10)
            pen.rectangle(
                (left * scale, (baseline - 7) * scale, right * scale, baseline * scale), "black"
            )
            left = right + space
    x0, y0, x1, y1 = (int(v * scale) for v in SCAN_FIGURE_BOX)
    pen.rectangle((x0, y0, x1, y1), outline="black", width=4)
    for i in range(6):
        pen.line((x0, y0 + 30 * i * scale, x1, y1 - 20 * i * scale), fill="black", width=3)
    return _image_page_pdf(path, image, (612, 792), lines)


SLIDE_PANELS = [
    (60.0 + 270 * c, 140.0 + 160 * r, 320.0 + 270 * c, 290.0 + 160 * r)
    for r in range(2)
    for c in range(2)
]


def make_panel_slide_pdf(path: Path) -> Path:
    """An image-only slide of four screenshots set 10 pt apart (closer than the 14 pt that parts
    regions), under a title band; white is the slide's colour."""
    scale = 2
    image = Image.new("RGB", (768 * scale, 576 * scale), "white")
    pen = ImageDraw.Draw(image)
    pen.rectangle((60 * scale, 40 * scale, 500 * scale, 80 * scale), fill="navy")
    for x0, y0, x1, y1 in SLIDE_PANELS:
        pen.rectangle((x0 * scale, y0 * scale, x1 * scale, y1 * scale), fill=(90, 140, 200))
    return _image_page_pdf(path, image, (768, 576))
