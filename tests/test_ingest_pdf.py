"""PDF reading: pages, sizes, outline, hash, rendering, and a clear error for each kind of bad file."""

from __future__ import annotations

import hashlib
import io
from pathlib import Path

import pytest
from PIL import Image

from llama_index_docmemo.errors import IngestError
from llama_index_docmemo.ingest.parsed import TocEntry
from llama_index_docmemo.ingest.pdf import open_pdf, read_pdf, render_page, render_page_png
from tests.ingest_samples import make_bad_files, make_report, make_scanned_slides


class UpperOcr:
    """An OCR engine double that reports the page number it was asked to read."""

    name = "fake"

    def __init__(self) -> None:
        self.read_pages: list[int] = []

    def read(self, page: object) -> str:
        number = page.number + 1  # type: ignore[attr-defined]
        self.read_pages.append(number)
        return f"SLIDE TEXT FROM OCR PAGE {number}"


def test_pages_are_one_based_with_text_size_and_hash(tmp_path: Path) -> None:
    path = make_report(tmp_path / "report.pdf")
    parsed = read_pdf(path)
    assert parsed.doc_id == "report.pdf"
    assert parsed.source == str(path)
    assert parsed.doc_version == hashlib.sha256(path.read_bytes()).hexdigest()
    assert parsed.n_pages == 5
    assert [p.page for p in parsed.pages] == [1, 2, 3, 4, 5]
    assert "1 Introduction" in parsed.pages[1].text
    assert "Regional split" in parsed.pages[4].text
    assert (parsed.pages[0].width, parsed.pages[0].height) == (595, 842)
    assert parsed.title_hint == "Annual Widget Report"
    assert not parsed.ocr_pages and not parsed.unread_pages


def test_doc_id_can_be_chosen(tmp_path: Path) -> None:
    assert read_pdf(make_report(tmp_path / "r.pdf"), doc_id="custom").doc_id == "custom"


def test_outline_is_read_and_limits_styled_lines_to_page_one(tmp_path: Path) -> None:
    parsed = read_pdf(make_report(tmp_path / "toc.pdf", toc=True))
    assert parsed.toc[:2] == [TocEntry(1, "Introduction", 2), TocEntry(2, "Background", 3)]
    assert {line.page for line in parsed.lines} == {1}


def test_styled_lines_carry_size_and_weight(tmp_path: Path) -> None:
    parsed = read_pdf(make_report(tmp_path / "r.pdf"))
    heading = next(line for line in parsed.lines if line.text == "1 Introduction")
    body = next(line for line in parsed.lines if line.text.startswith("On scope: The quarterly"))
    assert heading.page == 2 and heading.size == 18 and heading.bold
    assert body.size == 10 and not body.bold


def test_image_only_pages_go_to_ocr_or_are_flagged_unread(tmp_path: Path) -> None:
    path = make_scanned_slides(tmp_path / "deck.pdf", ["Market share", "Growth plan"])
    engine = UpperOcr()
    parsed = read_pdf(path, ocr=engine)
    assert engine.read_pages == [1, 2]
    assert parsed.ocr_pages == [1, 2] and not parsed.unread_pages
    assert parsed.pages[1].text == "SLIDE TEXT FROM OCR PAGE 2"
    unread = read_pdf(path)
    assert unread.unread_pages == [1, 2] and unread.pages[0].text == ""


class BrokenOcr:
    name = "broken"

    def read(self, page: object) -> str:
        raise RuntimeError("engine crashed")


def test_an_ocr_failure_leaves_the_page_unread_not_the_file_failed(tmp_path: Path) -> None:
    parsed = read_pdf(make_scanned_slides(tmp_path / "d.pdf", ["A", "B"]), ocr=BrokenOcr())
    assert parsed.unread_pages == [1, 2] and not parsed.ocr_pages


def test_pages_with_text_never_reach_ocr(tmp_path: Path) -> None:
    engine = UpperOcr()
    read_pdf(make_report(tmp_path / "r.pdf"), ocr=engine)
    assert engine.read_pages == []


def test_render_page_long_side_and_png(tmp_path: Path) -> None:
    path = make_report(tmp_path / "r.pdf")
    image = render_page(path, 2, long_side=600)
    assert image.mode == "RGB" and max(image.size) == 600
    assert image.size[0] == pytest.approx(600 * 595 / 842, abs=1)
    png = render_page_png(path, 1, long_side=300)
    assert png.startswith(b"\x89PNG") and max(Image.open(io.BytesIO(png)).size) == 300


@pytest.mark.parametrize("page", [0, 6])
def test_render_page_out_of_range_names_file_and_page(tmp_path: Path, page: int) -> None:
    path = make_report(tmp_path / "r.pdf")
    with pytest.raises(IngestError, match="no such page") as info:
        render_page(path, page)
    assert info.value.page == page and info.value.path == str(path)


@pytest.mark.parametrize(
    "kind", ["corrupt", "encrypted", "empty", "no pages", "truncated", "not a PDF"]
)
def test_bad_files_raise_a_clear_error_naming_the_file(tmp_path: Path, kind: str) -> None:
    bad = make_bad_files(tmp_path / "bad", make_report(tmp_path / "good.pdf"))[kind]
    with pytest.raises(IngestError) as info:
        read_pdf(bad)
    assert kind in info.value.reason
    assert str(bad) in str(info.value)


def test_missing_file_and_folder(tmp_path: Path) -> None:
    with pytest.raises(IngestError, match="no such file"):
        open_pdf(tmp_path / "absent.pdf")
    with pytest.raises(IngestError, match="not a regular file"):
        open_pdf(tmp_path)
