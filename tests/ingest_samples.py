"""PDFs generated for the ingestion tests: a structured report, an image-only page, and broken files."""

from __future__ import annotations

import random
from pathlib import Path

import pymupdf

BODY = (
    "The quarterly revenue grew by twelve percent while operating costs stayed flat across regions.",
    "Customer retention improved after the loyalty programme launched in the second quarter.",
    "Analysts expect the trend to continue as new markets open in the coming fiscal year.",
)


def _body(topic: str, n: int = 3) -> list[tuple[str, float, bool]]:
    return [(f"On {topic}: {line}", 10, False) for line in BODY[:n]]


REPORT_PAGES: list[list[tuple[str, float, bool]]] = [
    [("Annual Widget Report 2024", 24, True), ("Prepared by the finance team", 10, False)],
    [("1 Introduction", 18, True), *_body("scope")],
    [("1.1 Background", 14, True), *_body("history")],
    [("2 Results", 18, True), ("Revenue table: widgets sold 4,200 units", 10, False)],
    [("2.1 Regional split", 14, True), *_body("regions", 2)],
]

ZERO_PAGES = (
    b"%PDF-1.4\n1 0 obj << /Type /Catalog /Pages 2 0 R >> endobj\n"
    b"2 0 obj << /Type /Pages /Kids [] /Count 0 >> endobj\n"
    b"trailer << /Root 1 0 R >>\n%%EOF\n"
)


def write_pages(
    doc: pymupdf.Document,
    pages: list[list[tuple[str, float, bool]]],
    width: float = 595,
    height: float = 842,
) -> None:
    """Append pages whose lines are (text, font size, bold), with a running footer."""
    for number, lines in enumerate(pages, start=1):
        page = doc.new_page(width=width, height=height)
        y = 72.0
        for text, size, bold in lines:
            page.insert_text((72, y), text, fontsize=size, fontname="hebo" if bold else "helv")
            y += size * 1.8
        page.insert_text((72, height - 30), f"Widget Corp confidential - page {number}", fontsize=8)


def make_report(path: Path, *, toc: bool = False, extra: str = "") -> Path:
    """A 5-page report with headings by font size; ``toc`` adds an outline; ``extra`` changes page 5."""
    path.parent.mkdir(parents=True, exist_ok=True)
    doc = pymupdf.open()
    pages = [list(p) for p in REPORT_PAGES]
    if extra:
        pages[-1].append((extra, 10, False))
    write_pages(doc, pages)
    if toc:
        doc.set_toc(
            [[1, "Introduction", 2], [2, "Background", 3], [1, "Results", 4], [2, "Regional", 5]]
        )
    doc.set_metadata({"title": "Annual Widget Report"})
    doc.save(path)
    return path


def text_image_png(text: str, width: float = 720, height: float = 540) -> bytes:
    """A PNG (150 dpi) of ``text`` in large type: what a scanned slide looks like."""
    scratch = pymupdf.open()
    page = scratch.new_page(width=width, height=height)
    page.insert_text((60, 120), text, fontsize=36)
    return page.get_pixmap(dpi=150).tobytes("png")


def make_scanned_slides(path: Path, texts: list[str]) -> Path:
    """Landscape pages that are only an image of text (no text layer)."""
    doc = pymupdf.open()
    for text in texts:
        page = doc.new_page(width=720, height=540)
        page.insert_image(page.rect, stream=text_image_png(text))
    doc.save(path)
    return path


def make_encrypted(path: Path) -> Path:
    doc = pymupdf.open()
    write_pages(doc, REPORT_PAGES[:2])
    doc.save(path, encryption=pymupdf.PDF_ENCRYPT_AES_256, user_pw="secret", owner_pw="owner")
    return path


def make_truncated(path: Path, source: Path) -> Path:
    data = source.read_bytes()
    path.write_bytes(data[: len(data) * 2 // 3])
    return path


def make_corrupt(path: Path) -> Path:
    noise = random.Random(7).randbytes(4000)
    path.write_bytes(b"%PDF-1.7\n" + noise)
    return path


def make_bad_files(folder: Path, good: Path) -> dict[str, Path]:
    """One file of each kind of bad input, keyed by the word its error must contain."""
    folder.mkdir(parents=True, exist_ok=True)
    empty = folder / "empty.pdf"
    empty.write_bytes(b"")
    zero = folder / "zero.pdf"
    zero.write_bytes(ZERO_PAGES)
    text = folder / "notes.pdf"
    text.write_text("just some notes, not a PDF\n")
    return {
        "corrupt": make_corrupt(folder / "corrupt.pdf"),
        "encrypted": make_encrypted(folder / "locked.pdf"),
        "empty": empty,
        "no pages": zero,
        "truncated": make_truncated(folder / "cut.pdf", good),
        "not a PDF": text,
    }
