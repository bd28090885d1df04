"""PDF files -> pages with PyMuPDF: text, size, outline, styled lines, content hash; rendering on demand.

Every way a file can be unusable (missing, empty, not a PDF, corrupt, encrypted, truncated, no pages, a page
that cannot be read) raises :class:`IngestError` naming the file (and the page).
"""

from __future__ import annotations

import hashlib
import io
import logging
import os
import stat
from pathlib import Path

import pymupdf
from PIL import Image

from llama_index_docmemo.errors import IngestError
from llama_index_docmemo.ingest.ocr import OcrEngine, needs_ocr, ocr_pages
from llama_index_docmemo.ingest.parsed import ParsedDocument, ParsedPage, TextLine, TocEntry
from llama_index_docmemo.ingest.visible_text import visible_text

logger = logging.getLogger(__name__)

RENDER_ERRORS: tuple[type[Exception], ...] = (pymupdf.mupdf.FzErrorBase, RuntimeError)
"""What MuPDF raises when a page cannot be rendered or analysed (e.g. FzErrorLimit "Overly large
image" for a 20,000 pt page or a huge embedded image): callers skip that page with a warning."""

_HEAD_BYTES = 1024
_TAIL_BYTES = 2048
_BOLD_FLAG = 16


def _check_file(path: Path) -> None:
    """Raise IngestError unless ``path`` is a non-empty regular file that starts like a PDF."""
    if not path.exists():
        raise IngestError(str(path), "no such file")
    if not path.is_file():
        raise IngestError(str(path), "not a regular file")
    if path.stat().st_size == 0:
        raise IngestError(str(path), "empty file (0 bytes)")
    with path.open("rb") as fh:
        head = fh.read(_HEAD_BYTES)
    if b"%PDF-" not in head:
        raise IngestError(str(path), f"not a PDF (no %PDF- header; starts with {head[:16]!r})")


def file_sha256(path: str | os.PathLike[str]) -> str:
    """Content hash of a file, used as ``doc_version`` (a FIFO or device is refused, never read)."""
    if not stat.S_ISREG(os.stat(path).st_mode):
        raise IngestError(str(path), "not a regular file")
    digest = hashlib.sha256()
    with Path(path).open("rb") as fh:
        for chunk in iter(lambda: fh.read(1 << 20), b""):
            digest.update(chunk)
    return digest.hexdigest()


def _ends_with_eof(path: Path) -> bool:
    with path.open("rb") as fh:
        fh.seek(max(0, path.stat().st_size - _TAIL_BYTES))
        return b"%%EOF" in fh.read()


def open_pdf(path: str | os.PathLike[str]) -> pymupdf.Document:
    """Open a PDF for reading, or raise IngestError saying why it cannot be."""
    path = Path(path)
    _check_file(path)
    try:
        doc = pymupdf.open(path, filetype="pdf")
    except Exception as exc:  # MuPDF raises several types for unparsable files
        raise IngestError(str(path), f"corrupt PDF: MuPDF cannot parse it ({exc})") from exc
    try:
        _check_document(doc, path)
    except BaseException:
        doc.close()
        raise
    return doc


def _check_document(doc: pymupdf.Document, path: Path) -> None:
    """Raise IngestError unless the opened file has pages MuPDF can count (a truncated file
    may open and then fail on its page tree: ``code=7: Invalid number of pages``)."""
    try:
        if doc.needs_pass:
            raise IngestError(str(path), "encrypted: the file is password-protected")
        pages = doc.page_count
    except RENDER_ERRORS as exc:
        raise IngestError(
            str(path), f"corrupt PDF: MuPDF cannot read its pages ({exc}); truncated copy?"
        ) from exc
    if pages == 0:
        raise IngestError(str(path), "no pages")
    if doc.is_repaired and not _ends_with_eof(path):
        raise IngestError(
            str(path), "truncated: the file ends before its %%EOF marker (incomplete copy?)"
        )


def _image_cover(page: pymupdf.Page) -> float:
    """Share of the page covered by images (overlaps counted once per image, capped at 1)."""
    area = abs(page.rect)
    if not area:
        return 0.0
    covered = sum(abs(pymupdf.Rect(info["bbox"]) & page.rect) for info in page.get_image_info())
    return min(1.0, covered / area)


def _styled_lines(page_dict: dict, page_no: int) -> list[TextLine]:
    lines: list[TextLine] = []
    for block in page_dict.get("blocks", ()):
        for line in block.get("lines", ()):
            spans = [s for s in line.get("spans", ()) if s.get("text", "").strip()]
            if not spans:
                continue
            text = " ".join("".join(s["text"] for s in spans).split())
            size = max(s["size"] for s in spans)
            bold = all(s["flags"] & _BOLD_FLAG or "bold" in s["font"].lower() for s in spans)
            lines.append(TextLine(page=page_no, text=text, size=round(size, 1), bold=bool(bold)))
    return lines


def _read_page(
    page: pymupdf.Page, page_no: int, with_lines: bool
) -> tuple[ParsedPage, list[TextLine]]:
    """Text layer of one page (the text a reader can see, ``ingest/visible_text.py``); a page that
    needs OCR comes back marked ``unread``."""
    textpage = page.get_textpage(flags=pymupdf.TEXTFLAGS_TEXT)
    page_dict = page.get_text("dict", textpage=textpage)
    text = visible_text(page, textpage, page_dict)
    rect = page.rect
    parsed = ParsedPage(page=page_no, text=text.strip(), width=rect.width, height=rect.height)
    if needs_ocr(text, lambda: _image_cover(page)):
        parsed.unread = True
        return parsed, []
    if not with_lines:
        return parsed, []
    return parsed, _styled_lines(page_dict, page_no)


def read_pdf(
    path: str | os.PathLike[str],
    *,
    doc_id: str | None = None,
    ocr: OcrEngine | None = None,
) -> ParsedDocument:
    """Read every page of a PDF (OCR with ``ocr`` for pages without a text layer).

    Args:
        path: the PDF file.
        doc_id: identifier to store it under (default: the file name, e.g. "report.pdf").
        ocr: engine for text-less pages; None leaves them empty and marks them ``unread``.

    Styled lines (for heading detection) are kept for page 1 (the title) and, when the file has no
    outline, for every page.
    """
    path = Path(path)
    with open_pdf(path) as doc:
        version = file_sha256(path)
        try:
            toc = [
                TocEntry(level=level, title=" ".join(title.split()), page=target)
                for level, title, target, *_ in doc.get_toc(simple=True)
                if title.strip() and 1 <= target <= doc.page_count
            ]
            title = " ".join((doc.metadata or {}).get("title", "").split())
        except RENDER_ERRORS as exc:
            raise IngestError(str(path), f"corrupt PDF: cannot read its outline ({exc})") from exc
        pages: list[ParsedPage] = []
        lines: list[TextLine] = []
        for index in range(doc.page_count):
            try:
                with_lines = not toc or index == 0
                page, page_lines = _read_page(doc[index], index + 1, with_lines)
            except Exception as exc:  # a damaged content stream
                raise IngestError(str(path), f"cannot read page: {exc}", page=index + 1) from exc
            pages.append(page)
            lines.extend(page_lines)
    parsed = ParsedDocument(
        doc_id=doc_id or path.name,
        doc_version=version,
        source=str(path),
        n_pages=len(pages),
        pages=pages,
        title_hint=title,
        toc=toc,
        lines=lines,
    )
    if ocr is not None:
        apply_ocr(parsed, ocr)
    return parsed


def apply_ocr(parsed: ParsedDocument, engine: OcrEngine, *, workers: int | None = None) -> None:
    """Fill the ``unread`` pages of a document read from its PDF with ``engine``'s text.

    ``workers``: OCR processes for this document (see :func:`ocr_pages`); a caller that already
    runs documents in parallel passes 1.
    """
    texts = ocr_pages(parsed.source, parsed.unread_pages, engine, workers)
    for page in parsed.pages:
        text = texts.get(page.page)
        if text is not None:
            page.text, page.ocr, page.unread = text, True, False


def render_page(path: str | os.PathLike[str], page: int, long_side: int = 1500) -> Image.Image:
    """Render 1-based ``page`` of a PDF as an RGB image whose longer side is ``long_side`` pixels."""
    if long_side < 1:
        raise ValueError(f"long_side must be positive, got {long_side}")
    with open_pdf(path) as doc:
        if not 1 <= page <= doc.page_count:
            raise IngestError(str(path), f"no such page (the file has {doc.page_count})", page=page)
        try:
            pdf_page = doc[page - 1]
            scale = long_side / max(pdf_page.rect.width, pdf_page.rect.height)
            pix = pdf_page.get_pixmap(matrix=pymupdf.Matrix(scale, scale), alpha=False)
        except (*RENDER_ERRORS, ZeroDivisionError) as exc:
            raise IngestError(str(path), f"cannot render the page: {exc}", page=page) from exc
        return Image.frombytes("RGB", (pix.width, pix.height), pix.samples)


def render_page_png(path: str | os.PathLike[str], page: int, long_side: int = 1500) -> bytes:
    """:func:`render_page` encoded as PNG bytes (for data URLs and files; never stored in payloads)."""
    buffer = io.BytesIO()
    render_page(path, page, long_side).save(buffer, format="PNG")
    return buffer.getvalue()
