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

from PIL import Image

from llama_index_docmemo.evidence.pages import LONG_SIDE, PAGE_ERRORS, render_boxed
from llama_index_docmemo.ingest.pdf import open_pdf


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
            boxes = {mark: pdf_page.search_for(mark) for mark in marks}
            if target.is_file():
                with Image.open(target) as done:
                    width, height = done.size
            else:
                rects = [(r.x0, r.y0, r.x1, r.y1) for found in boxes.values() for r in found]
                image = render_boxed(pdf_page, rects, LONG_SIDE)
                width, height = image.size
                out_dir.mkdir(parents=True, exist_ok=True)
                image.save(target, format="PNG")
    except PAGE_ERRORS:
        return None
    boxed = tuple(mark for mark, rects in boxes.items() if rects)
    return Thumbnail(f"{out_dir.name}/{name}", width, height, boxed)
