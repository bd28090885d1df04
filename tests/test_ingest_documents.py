"""LlamaIndex Documents from the readers-file PDF readers become the same parsed pages as files do."""

from __future__ import annotations

from pathlib import Path

from llama_index.core.schema import Document
from llama_index.readers.file import PDFReader, PyMuPDFReader

from llama_index_docmemo.ingest.documents import parse_documents
from llama_index_docmemo.ingest.pdf import read_pdf
from tests.ingest_samples import make_report, make_scanned_slides


class FakeOcr:
    name = "fake"

    def read(self, page: object) -> str:
        return "Words read from the scanned slide image"


def test_pymupdf_reader_documents_match_the_file_reader(tmp_path: Path) -> None:
    path = make_report(tmp_path / "report.pdf", toc=True)
    parsed, failures = parse_documents(PyMuPDFReader().load_data(path))
    direct = read_pdf(path)
    assert failures == [] and len(parsed) == 1
    doc = parsed[0]
    assert doc.doc_id == "report.pdf" and doc.source == str(path)
    assert doc.doc_version == direct.doc_version and doc.n_pages == 5
    assert [p.page for p in doc.pages] == [1, 2, 3, 4, 5]
    assert [p.text for p in doc.pages] == [p.text for p in direct.pages]
    assert doc.toc == direct.toc and doc.pages[0].width == 595


def test_pdf_reader_documents_are_numbered_by_order_not_label(tmp_path: Path) -> None:
    path = make_report(tmp_path / "report.pdf")
    documents = PDFReader().load_data(path)
    for document in documents:
        document.metadata["page_label"] = "iv"
    parsed, failures = parse_documents(documents)
    assert failures == [] and parsed[0].doc_id == "report.pdf"
    assert [p.page for p in parsed[0].pages] == [1, 2, 3, 4, 5]
    assert "1 Introduction" in parsed[0].pages[1].text


def test_documents_without_a_file_hash_their_text_and_flag_empty_pages() -> None:
    docs = [
        Document(text="First page text", metadata={"file_name": "memo.pdf", "source": "1"}),
        Document(text="", metadata={"file_name": "memo.pdf", "source": "2"}),
        Document(text="continued", metadata={"file_name": "memo.pdf", "source": "1"}),
    ]
    parsed, failures = parse_documents(docs)
    assert failures == []
    memo = parsed[0]
    assert memo.source == "memo.pdf" and memo.n_pages == 2
    assert memo.pages[0].text == "First page text\ncontinued"
    assert memo.unread_pages == [2]
    again, _ = parse_documents(docs)
    assert again[0].doc_version == memo.doc_version
    changed, _ = parse_documents([Document(text="Other", metadata={"file_name": "memo.pdf"})])
    assert changed[0].doc_version != memo.doc_version


def test_documents_naming_no_file_are_failures_and_others_still_parse() -> None:
    orphan = Document(text="floating text", id_="abc")
    good = Document(text="page", metadata={"file_name": "a.pdf"})
    parsed, failures = parse_documents([orphan, good])
    assert [p.doc_id for p in parsed] == ["a.pdf"]
    assert failures[0].path == "Document abc" and "file_name" in failures[0].reason


def test_empty_pages_of_a_readable_file_get_ocr_text(tmp_path: Path) -> None:
    path = make_scanned_slides(tmp_path / "deck.pdf", ["One", "Two"])
    parsed, _ = parse_documents(PyMuPDFReader().load_data(path), ocr=FakeOcr())
    assert parsed[0].ocr_pages == [1, 2] and not parsed[0].unread_pages
    assert parsed[0].pages[0].text == "Words read from the scanned slide image"
    without, _ = parse_documents(PyMuPDFReader().load_data(path))
    assert without[0].unread_pages == [1, 2]
