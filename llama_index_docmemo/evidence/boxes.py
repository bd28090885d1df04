"""Where on the page a citation stands: its box from the PDF's text layer (PyMuPDF ``search_for``).

A figure's box is the place where the page writes it (``stated``), inside its quote's box when
the page writes the figure several times; a fact's box covers its quote (the union of the quote's
line boxes). Boxes are in PDF points, [x0, y0, x1, y1] with the origin at the top left (PyMuPDF's,
and the crops'). A page without a text layer (OCR'd) has no place to search: its citation keeps
the box of the crop it was read in, or None. Opening the PDF is blocking I/O: the loop runs
:func:`locate_boxes` on its CPU executor.
"""

from __future__ import annotations

import logging
from collections.abc import Sequence
from dataclasses import dataclass

import pymupdf

from llama_index_docmemo.errors import DocMemoError
from llama_index_docmemo.ingest.pdf import RENDER_ERRORS, open_pdf

logger = logging.getLogger(__name__)

_SEARCH_CHARS = 80


@dataclass(frozen=True)
class BoxRequest:
    """Find ``stated`` (inside ``quote`` when given) on page ``page`` (1-based) of ``source``."""

    source: str
    page: int
    stated: str
    quote: str = ""


def _search(page: pymupdf.Page, text: str) -> list[pymupdf.Rect]:
    """The line boxes of ``text`` on the page (a long text by its first words when whole fails)."""
    text = " ".join(text.split())
    if not text:
        return []
    hits = page.search_for(text)
    if not hits and len(text) > _SEARCH_CHARS:
        hits = page.search_for(text[:_SEARCH_CHARS].rsplit(" ", 1)[0])
    return list(hits)


def _union(rects: Sequence[pymupdf.Rect]) -> pymupdf.Rect:
    box = pymupdf.Rect(rects[0])
    for rect in rects[1:]:
        box |= rect
    return box


def box_on_page(page: pymupdf.Page, request: BoxRequest) -> list[float] | None:
    """The box of one request on an open page, or None when the text layer does not hold it."""
    quote_rects = _search(page, request.quote) if request.quote else []
    if request.stated == request.quote:
        return _rounded(_union(quote_rects)) if quote_rects else None
    hits = _search(page, request.stated)
    if not hits:
        return None
    inside = [h for q in quote_rects for h in hits if q.intersects(h)]
    return _rounded((inside or hits)[0])


def _rounded(rect: pymupdf.Rect) -> list[float]:
    return [round(v, 2) for v in (rect.x0, rect.y0, rect.x1, rect.y1)]


def locate_boxes(requests: Sequence[BoxRequest]) -> list[list[float] | None]:
    """The box of each request (None where the page cannot be opened or does not hold it); each
    PDF is opened once."""
    out: list[list[float] | None] = [None] * len(requests)
    by_source: dict[str, list[int]] = {}
    for n, request in enumerate(requests):
        by_source.setdefault(request.source, []).append(n)
    for source, numbers in by_source.items():
        try:
            with open_pdf(source) as pdf:
                for n in numbers:
                    if 1 <= requests[n].page <= pdf.page_count:
                        out[n] = box_on_page(pdf[requests[n].page - 1], requests[n])
        except (DocMemoError, OSError, ValueError, *RENDER_ERRORS) as exc:
            logger.warning("no citation boxes from %s: %s", source, exc)
    return out
