"""Where on the page a citation stands: its box from the PDF's text layer (PyMuPDF ``search_for``),
or from the OCR word boxes of a page without one.

A figure's box is the place where the page writes it (``stated``), inside its quote's box when
the page writes the figure several times; a fact's box covers its quote (the union of the quote's
line boxes). Boxes are in PDF points, [x0, y0, x1, y1] with the origin at the top left (PyMuPDF's,
and the crops'). A page read by OCR is OCR'd again for its word boxes (Tesseract inside MuPDF,
about half a second a page; only pages with a verified citation): without Tesseract its
citations have no box. Opening the PDF and OCR are blocking: the loop runs :func:`locate_boxes`
on its CPU executor.
"""

from __future__ import annotations

import logging
import threading
from collections.abc import Sequence
from dataclasses import dataclass

import pymupdf

from llama_index_docmemo.errors import DocMemoError
from llama_index_docmemo.ingest.ocr import OcrUnavailableError, TesseractOcr
from llama_index_docmemo.ingest.pdf import RENDER_ERRORS, open_pdf

logger = logging.getLogger(__name__)

_SEARCH_CHARS = 80
_TESSERACT = threading.Lock()
"""MuPDF will not run Tesseract from two threads of one process (ingest/ocr.py): one at a time."""


@dataclass(frozen=True)
class BoxRequest:
    """Find ``stated`` (inside ``quote`` when given) on page ``page`` (1-based) of ``source``."""

    source: str
    page: int
    stated: str
    quote: str = ""
    ocr: bool = False  # search the page's OCR words, not its text layer


def _search(page: pymupdf.Page, text: str, textpage: pymupdf.TextPage | None) -> list[pymupdf.Rect]:
    """The line boxes of ``text`` on the page (a long text by its first words when whole fails)."""
    text = " ".join(text.split())
    if not text:
        return []
    hits = page.search_for(text, textpage=textpage)
    if not hits and len(text) > _SEARCH_CHARS:
        hits = page.search_for(text[:_SEARCH_CHARS].rsplit(" ", 1)[0], textpage=textpage)
    return list(hits)


def _union(rects: Sequence[pymupdf.Rect]) -> pymupdf.Rect:
    box = pymupdf.Rect(rects[0])
    for rect in rects[1:]:
        box |= rect
    return box


def box_on_page(
    page: pymupdf.Page, request: BoxRequest, textpage: pymupdf.TextPage | None = None
) -> list[float] | None:
    """The box of one request on an open page (in ``textpage``, its OCR words, when given), or
    None when the page's text does not hold it."""
    quote_rects = _search(page, request.quote, textpage) if request.quote else []
    if request.stated == request.quote:
        return _rounded(_union(quote_rects)) if quote_rects else None
    hits = _search(page, request.stated, textpage)
    if not hits:
        return None
    inside = [h for q in quote_rects for h in hits if q.intersects(h)]
    return _rounded((inside or hits)[0])


def _rounded(rect: pymupdf.Rect) -> list[float]:
    return [round(v, 2) for v in (rect.x0, rect.y0, rect.x1, rect.y1)]


def locate_boxes(requests: Sequence[BoxRequest]) -> list[list[float] | None]:
    """The box of each request (None where the page cannot be opened or does not hold it); each
    PDF is opened once, each OCR'd page OCR'd once."""
    out: list[list[float] | None] = [None] * len(requests)
    by_source: dict[str, list[int]] = {}
    for n, request in enumerate(requests):
        by_source.setdefault(request.source, []).append(n)
    ocr = _ocr_engine() if any(r.ocr for r in requests) else None
    for source, numbers in by_source.items():
        try:
            with open_pdf(source) as pdf:
                # an OCR text layer refers to its page object weakly: the pages are kept open
                pages: dict[int, pymupdf.Page] = {}
                textpages: dict[int, pymupdf.TextPage] = {}
                for n in numbers:
                    request = requests[n]
                    if not 1 <= request.page <= pdf.page_count or (request.ocr and ocr is None):
                        continue
                    if request.page not in pages:
                        pages[request.page] = pdf[request.page - 1]
                    page = pages[request.page]
                    textpage = None
                    if request.ocr and ocr is not None:
                        if request.page not in textpages:
                            with _TESSERACT:
                                textpages[request.page] = ocr.textpage(page)
                        textpage = textpages[request.page]
                    out[n] = box_on_page(page, request, textpage)
        except (DocMemoError, OSError, ValueError, *RENDER_ERRORS) as exc:
            logger.warning("no citation boxes from %s: %s", source, exc)
    return out


def _ocr_engine() -> TesseractOcr | None:
    """Tesseract for the OCR word boxes, or None (logged) when its language data is missing."""
    try:
        return TesseractOcr()
    except OcrUnavailableError as exc:
        logger.warning("no boxes on OCR'd pages: %s", exc)
        return None
