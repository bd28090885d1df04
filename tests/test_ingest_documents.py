"""LlamaIndex Documents from the readers-file PDF readers become the same parsed pages as files do."""

from __future__ import annotations

from pathlib import Path

import pytest
from llama_index.core.schema import Document
from llama_index.readers.file import PDFReader, PyMuPDFReader

from llama_index_docmemo.errors import DocumentIdentityError
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
        Document(text="continued", metadata={"file_name": "memo.pdf", "source": "1"}),
        Document(text="", metadata={"file_name": "memo.pdf", "source": "2"}),
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


def test_pages_of_several_files_of_one_name_without_their_folder_are_refused() -> None:
    pages = [
        Document(text=f"page {n}", metadata={"file_name": "report.pdf", "page_label": str(n)})
        for n in (1, 2, 3, 1, 2)
    ]
    with pytest.raises(DocumentIdentityError, match="'report.pdf'.*page 1 comes 2 times"):
        parse_documents(pages)
    totals = [
        Document(text="a", metadata={"file_name": "r.pdf", "source": "1", "total_pages": n})
        for n in (3, 5)
    ]
    with pytest.raises(DocumentIdentityError, match=r"they count \[3, 5\] pages"):
        parse_documents(totals)


def test_a_document_naming_no_file_is_a_document_of_its_own_under_its_id() -> None:
    orphan = Document(text="floating text", id_="faq/42", metadata={"team": "risk"})
    good = Document(text="page", metadata={"file_name": "a.pdf"})
    parsed, failures = parse_documents([orphan, good])
    assert failures == []
    assert sorted(p.doc_id for p in parsed) == ["a.pdf", "faq/42"]
    faq = next(p for p in parsed if p.doc_id == "faq/42")
    assert faq.pages[0].text == "floating text" and faq.metadata == {"team": "risk"}


def test_reader_metadata_is_kept_per_document_and_page_and_reserved_keys_are_named() -> None:
    pages = [
        Document(
            text=f"page {n}",
            metadata={
                "file_name": "a.pdf",
                "page_label": str(n),
                "year": 2023,
                "part": n,
                "tenant": "evil",
                "kind": "x",
            },
        )
        for n in (1, 2)
    ]
    (parsed,), _ = parse_documents(pages)
    assert parsed.metadata == {"year": 2023}  # shared by every page
    assert [p.metadata for p in parsed.pages] == [{"part": 1}, {"part": 2}]
    (reserved,) = [w for w in parsed.warnings if "'kind', 'tenant'" in w]
    assert reserved.startswith("a.pdf: ")
    (no_file,) = [w for w in parsed.warnings if "carry no file_path" in w]  # said once


def test_empty_pages_of_a_readable_file_get_ocr_text(tmp_path: Path) -> None:
    path = make_scanned_slides(tmp_path / "deck.pdf", ["One", "Two"])
    parsed, _ = parse_documents(PyMuPDFReader().load_data(path), ocr=FakeOcr())
    assert parsed[0].ocr_pages == [1, 2] and not parsed[0].unread_pages
    assert parsed[0].pages[0].text == "Words read from the scanned slide image"
    without, _ = parse_documents(PyMuPDFReader().load_data(path))
    assert without[0].unread_pages == [1, 2]
