"""A PDF page rendered small with boxes drawn on it: what the cited regions look like.

One home for drawing boxes on a page: ``docmemo ask --html`` draws its citations' boxes with it,
``docmemo compare``'s thumbnails their found figures.
"""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path

import pymupdf
from PIL import Image, ImageDraw

from llama_index_docmemo.errors import DocMemoError
from llama_index_docmemo.ingest.pdf import RENDER_ERRORS, open_pdf

LONG_SIDE = 520
FILL = (255, 214, 0, 96)
OUTLINE = (230, 120, 0, 255)
Box = Sequence[float]
"""[x0, y0, x1, y1] in PDF points, origin top left."""
PAGE_ERRORS: tuple[type[Exception], ...] = (
    DocMemoError,
    OSError,
    ValueError,
    IndexError,
    *RENDER_ERRORS,
)
"""What opening and rendering a page may raise (the caller shows the page as not renderable)."""


def draw_boxes(image: Image.Image, boxes: Sequence[Box], scale: float) -> None:
    """Draw ``boxes`` (PDF points; ``scale`` pixels a point) on ``image``, filled and outlined."""
    if not boxes:
        return
    overlay = Image.new("RGBA", image.size, (0, 0, 0, 0))
    draw = ImageDraw.Draw(overlay)
    for x0, y0, x1, y1 in boxes:
        box = (x0 * scale - 2, y0 * scale - 2, x1 * scale + 2, y1 * scale + 2)
        draw.rectangle(box, fill=FILL, outline=OUTLINE, width=2)
    image.paste(Image.alpha_composite(image.convert("RGBA"), overlay).convert("RGB"))


def render_boxed(
    page: pymupdf.Page, boxes: Sequence[Box], long_side: int = LONG_SIDE
) -> Image.Image:
    """An open page rendered with its long side ``long_side`` pixels and ``boxes`` drawn."""
    scale = long_side / max(page.rect.width, page.rect.height)
    pix = page.get_pixmap(matrix=pymupdf.Matrix(scale, scale), alpha=False)
    image = Image.frombytes("RGB", (pix.width, pix.height), pix.samples)
    draw_boxes(image, boxes, scale)
    return image


def render_page_boxed(
    source: str | Path, page: int, boxes: Sequence[Box], long_side: int = LONG_SIDE
) -> Image.Image:
    """Page ``page`` (1-based) of the PDF at ``source`` with ``boxes`` drawn (``PAGE_ERRORS``
    when it cannot be)."""
    with open_pdf(source) as pdf:
        return render_boxed(pdf[page - 1], boxes, long_side)
