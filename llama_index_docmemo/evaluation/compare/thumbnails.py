"""Page thumbnails for the HTML report, with an answer's cited boxes drawn.

The boxes are the citations' (:func:`llama_index_docmemo.loop.result.locate_boxes`: where the
page writes the figure or the quote), drawn by :func:`~llama_index_docmemo.evidence.pages.render_boxed`, the
drawing of ``docmemo ask --html``. Thumbnails are PNG files beside the report (``pages/``), named
by page and boxes, so a resumed run renders each once.
"""

from __future__ import annotations

import hashlib
import re
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

from PIL import Image

from llama_index_docmemo.evidence.pages import LONG_SIDE, PAGE_ERRORS, Box, render_page_boxed


@dataclass(frozen=True)
class Thumbnail:
    """A rendered page: the file (relative to the report) and its size."""

    path: str
    width: int
    height: int


def _file_name(doc_id: str, page: int, boxes: Sequence[Box]) -> str:
    stem = re.sub(r"[^A-Za-z0-9_.-]+", "_", doc_id)[:60]
    drawn = sorted(tuple(round(v, 2) for v in box) for box in boxes)
    digest = hashlib.sha256(repr((doc_id, page, drawn)).encode()).hexdigest()[:10]
    return f"{stem}-p{page}-{digest}.png"


def render_thumbnail(
    source: str | Path, doc_id: str, page: int, boxes: Sequence[Box], out_dir: Path
) -> Thumbnail | None:
    """Page ``page`` of the PDF at ``source`` with ``boxes`` (PDF points) drawn, written into
    ``out_dir`` (once); None when the page cannot be rendered."""
    name = _file_name(doc_id, page, boxes)
    target = out_dir / name
    try:
        if target.is_file():
            with Image.open(target) as done:
                width, height = done.size
        else:
            image = render_page_boxed(source, page, boxes, LONG_SIDE)
            width, height = image.size
            out_dir.mkdir(parents=True, exist_ok=True)
            image.save(target, format="PNG")
    except PAGE_ERRORS:
        return None
    return Thumbnail(f"{out_dir.name}/{name}", width, height)
