"""Page thumbnails for the HTML report, with the answer's figures highlighted where the page states them.

A figure found in a page's text is boxed on the thumbnail where PyMuPDF finds that text in the page's
text layer; on an OCR'd page (no text layer) there is no position to box, and the report says so.
Thumbnails are PNG files beside the report (``pages/``), named by page and highlights, so a resumed
run renders each once.
"""

from __future__ import annotations

import hashlib
import re
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

import pymupdf
from PIL import Image, ImageDraw

from llama_index_docmemo.errors import DocMemoError
from llama_index_docmemo.ingest.pdf import RENDER_ERRORS, open_pdf

LONG_SIDE = 520
FILL = (255, 214, 0, 96)
OUTLINE = (230, 120, 0, 255)


@dataclass(frozen=True)
class Thumbnail:
    """A rendered page: the file (relative to the report), its size, and the figures boxed on it."""

    path: str
    width: int
    height: int
    boxed: tuple[str, ...]


def _file_name(doc: str, page: int, marks: Sequence[str]) -> str:
    stem = re.sub(r"[^A-Za-z0-9_.-]+", "_", doc)[:60]
    digest = hashlib.sha256(repr((doc, page, sorted(marks))).encode()).hexdigest()[:10]
    return f"{stem}-p{page}-{digest}.png"


def render_thumbnail(
    source: str | Path, doc: str, page: int, marks: Sequence[str], out_dir: Path
) -> Thumbnail | None:
    """Page ``page`` of the PDF at ``source`` with every occurrence of ``marks`` boxed, written
    into ``out_dir``; None when the page cannot be rendered."""
    name = _file_name(doc, page, marks)
    target = out_dir / name
    try:
        with open_pdf(source) as pdf:
            pdf_page = pdf[page - 1]
            scale = LONG_SIDE / max(pdf_page.rect.width, pdf_page.rect.height)
            boxes = {mark: pdf_page.search_for(mark) for mark in marks}
            if target.is_file():
                with Image.open(target) as done:
                    width, height = done.size
            else:
                pix = pdf_page.get_pixmap(matrix=pymupdf.Matrix(scale, scale), alpha=False)
                image = Image.frombytes("RGB", (pix.width, pix.height), pix.samples)
                width, height = image.size
                _draw_boxes(image, [r for rects in boxes.values() for r in rects], scale)
                out_dir.mkdir(parents=True, exist_ok=True)
                image.save(target, format="PNG")
    except (DocMemoError, OSError, ValueError, IndexError, *RENDER_ERRORS):
        return None
    boxed = tuple(mark for mark, rects in boxes.items() if rects)
    return Thumbnail(f"{out_dir.name}/{name}", width, height, boxed)


def _draw_boxes(image: Image.Image, rects: Sequence[pymupdf.Rect], scale: float) -> None:
    if not rects:
        return
    overlay = Image.new("RGBA", image.size, (0, 0, 0, 0))
    draw = ImageDraw.Draw(overlay)
    for rect in rects:
        box = (
            rect.x0 * scale - 2,
            rect.y0 * scale - 2,
            rect.x1 * scale + 2,
            rect.y1 * scale + 2,
        )
        draw.rectangle(box, fill=FILL, outline=OUTLINE, width=2)
    image.paste(Image.alpha_composite(image.convert("RGBA"), overlay).convert("RGB"))
