"""DocumentIndexer with the real pieces: Qdrant Edge store on disk, the default CPU encoder, Tesseract.

Generated PDFs: index, search, close, reopen, re-ingest (no-op), a changed file replacing its pages, and a
batch of bad files that leaves the good ones indexed.
"""

from __future__ import annotations

from pathlib import Path

import pytest

from llama_index_docmemo.encoders.factory import default_encoder
from llama_index_docmemo.indexing import DocumentIndexer
from llama_index_docmemo.ingest.ocr import find_tessdata
from llama_index_docmemo.store import open_store
from llama_index_docmemo.store.scope import PageFilter
from llama_index_docmemo.types import PageRef
from tests.ingest_samples import make_bad_files, make_report, make_scanned_slides


@pytest.fixture(scope="module")
def encoder():
    return default_encoder()


def _search(store, encoder, query: str, doc: str | None = None, tenant=None) -> list[PageRef]:
    page_filter = PageFilter(doc_ids=(doc,), tenant=tenant) if doc else None
    hits = store.search(encoder.encode_query(query), limit=3, page_filter=page_filter)
    return [hit.ref for hit in hits]


def test_index_close_reopen_reingest_and_replace(tmp_path: Path, encoder) -> None:
    docs = tmp_path / "docs"
    report_pdf = make_report(docs / "report.pdf", toc=True)
    plain_pdf = make_report(docs / "plain.pdf")
    with open_store(tmp_path / "store", encoder=encoder) as store:
        report = DocumentIndexer(store, encoder, ocr=False).index_paths([docs], tenant="acme")
        indexed = sorted([str(report_pdf), str(plain_pdf)])
        assert report.ok and sorted(report.indexed) == indexed
        assert report.pages == 10 and store.count_pages() == 10
        top = _search(store, encoder, "widgets sold units revenue table", "report.pdf", "acme")
        assert top[0] == (PageRef("report.pdf", 4))

    with open_store(tmp_path / "store", encoder=encoder) as store:
        assert store.count_pages(PageFilter(tenant="acme")) == 10
        schema = store.get_schema("report.pdf", tenant="acme")
        assert schema is not None and schema.section_of(5) == "Results > Regional"
        record = store.get_pages([PageRef("report.pdf", 3)])[0]
        assert record.section == "Introduction > Background" and record.tenant == "acme"

        indexer = DocumentIndexer(store, encoder, ocr=False)
        again = indexer.index_paths([docs], tenant="acme")
        assert again.indexed == [] and len(again.unchanged) == 2 and again.pages == 0

        old_version = store.document_version("plain.pdf", tenant="acme")
        make_report(plain_pdf, extra="Zeppelin hangar acoustics were measured in spring")
        changed = indexer.index_paths([docs], tenant="acme")
        assert changed.indexed == [str(plain_pdf)]
        assert changed.unchanged == [str(report_pdf)]
        assert store.document_version("plain.pdf", tenant="acme") not in (None, old_version)
        assert store.count_pages() == 10, "the old version's pages are gone"
        assert _search(store, encoder, "zeppelin hangar acoustics")[0] == PageRef("plain.pdf", 5)


def test_bad_files_in_a_batch_are_listed_and_the_good_ones_indexed(tmp_path: Path, encoder) -> None:
    folder = tmp_path / "batch"
    good = make_report(folder / "good.pdf")
    other = make_report(folder / "other.pdf", extra="second good file")
    bad = make_bad_files(folder / "bad", good)
    with open_store(tmp_path / "store", encoder=encoder) as store:
        report = DocumentIndexer(store, encoder, ocr=False).index_paths(
            [folder, bad["not a PDF"]], progress=True
        )
        assert sorted(report.indexed) == sorted([str(good), str(other)])
        failed = dict(report.failed)
        assert len(failed) == len(bad)
        for kind, path in bad.items():
            assert kind in failed[str(path)]
        assert store.count_pages() == 10
        assert {s.doc_id for s in store.list_documents()} == {"good.pdf", "other.pdf"}


def test_scanned_slides_get_tesseract_text_and_are_searchable(tmp_path: Path, encoder) -> None:
    if find_tessdata() is None:
        pytest.skip("Tesseract language data absent: apt-get install tesseract-ocr")
    deck = make_scanned_slides(tmp_path / "deck.pdf", ["Quarterly market share", "Hiring plan"])
    with open_store(tmp_path / "store", encoder=encoder) as store:
        report = DocumentIndexer(store, encoder, ocr=True).index_paths([deck])
        assert report.ocr_pages == 2 and not report.unread_pages
        records = store.get_pages([PageRef("deck.pdf", 1), PageRef("deck.pdf", 2)])
        assert "market share" in records[0].text.lower() and records[0].ocr
        assert "hiring" in records[1].text.lower()
        assert _search(store, encoder, "hiring plan")[0] == PageRef("deck.pdf", 2)
        assert store.get_schema("deck.pdf").doc_type == "slides"


def test_parallel_ocr_reads_the_same_text_as_serial(tmp_path: Path) -> None:
    from llama_index_docmemo.ingest.ocr import TesseractOcr, find_tessdata, ocr_pages

    if find_tessdata() is None:
        pytest.skip("Tesseract language data not installed (apt-get install tesseract-ocr)")
    texts = [f"Slide {i}: quarterly revenue grew" for i in range(1, 7)]
    pdf = make_scanned_slides(tmp_path / "slides.pdf", texts)
    engine = TesseractOcr()
    pages = list(range(1, 7))
    serial = ocr_pages(pdf, pages, engine, workers=1)
    parallel = ocr_pages(pdf, pages, engine, workers=2)
    assert parallel == serial
    assert all(serial[p] and f"Slide {p}" in serial[p] for p in pages)
