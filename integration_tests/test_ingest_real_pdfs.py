"""Ingestion on real MMLongBench-Doc PDFs (a few, for time): pages, hashes, outline, headings, OCR."""

from __future__ import annotations

import csv
from pathlib import Path

import pymupdf
import pytest

from llama_index_docmemo.encoders.factory import default_encoder
from llama_index_docmemo.indexing import DocumentIndexer
from llama_index_docmemo.ingest.ocr import TesseractOcr, alnum_count, find_tessdata
from llama_index_docmemo.ingest.pdf import read_pdf
from llama_index_docmemo.ingest.structure import build_schema
from llama_index_docmemo.store import open_store
from llama_index_docmemo.store.scope import PageFilter

pytestmark = pytest.mark.data

TEN_K = "ADOBE_2015_10K.pdf"  # has an outline
PAPER = "2023.acl-long.386.pdf"  # no outline: headings come from fonts
DECK = "germanwingsdigitalcrisisanalysis-150403064828-conversion-gate01_95.pdf"  # image-only


@pytest.fixture(scope="module")
def catalog(mmlongbench_dir: Path) -> dict[str, dict[str, str]]:
    with (mmlongbench_dir / "docs.tsv").open() as fh:
        return {row["doc"]: row for row in csv.DictReader(fh, delimiter="\t")}


@pytest.mark.parametrize("name", [TEN_K, PAPER])
def test_pages_and_hash_match_the_catalog(mmlongbench_dir: Path, catalog, name: str) -> None:
    parsed = read_pdf(mmlongbench_dir / "pdfs" / name)
    assert parsed.n_pages == int(catalog[name]["n_pages"])
    assert parsed.doc_version == catalog[name]["sha256"]
    assert not parsed.unread_pages


def test_ten_k_outline_gives_item_sections(mmlongbench_dir: Path) -> None:
    schema = build_schema(read_pdf(mmlongbench_dir / "pdfs" / TEN_K))
    assert schema.doc_type == "10-K"
    assert any(s.title.startswith("Item 7") for s in schema.sections)
    assert schema.section_of(5).startswith("Part I > Item 1. Business")


def test_paper_headings_detected_from_fonts(mmlongbench_dir: Path) -> None:
    schema = build_schema(read_pdf(mmlongbench_dir / "pdfs" / PAPER))
    assert schema.doc_type == "paper"
    assert schema.title.startswith("Fact-Checking Complex Claims")
    titles = [s.title for s in schema.sections]
    assert "Introduction" in titles and "Related Work" in titles


def test_scanned_deck_pages_get_ocr_text(mmlongbench_dir: Path, tmp_path: Path) -> None:
    if find_tessdata() is None:
        pytest.skip("Tesseract language data absent: apt-get install tesseract-ocr")
    subset = tmp_path / "deck.pdf"
    with pymupdf.open(mmlongbench_dir / "pdfs" / DECK) as deck:
        deck.select([0, 1, 2])
        deck.save(subset)
    parsed = read_pdf(subset, ocr=TesseractOcr())
    assert parsed.ocr_pages == [1, 2, 3]
    assert all(alnum_count(p.text) >= 20 for p in parsed.pages)
    assert "germanwings" in " ".join(p.text for p in parsed.pages).lower()
    assert build_schema(parsed).doc_type == "slides"


def test_index_real_documents_into_edge(mmlongbench_dir: Path, catalog, tmp_path: Path) -> None:
    encoder = default_encoder()
    names = [PAPER, "PIP_Seniors-and-Tech-Use_040314.pdf"]
    with open_store(tmp_path / "store", encoder=encoder) as store:
        report = DocumentIndexer(store, encoder, ocr=False).index_paths(
            [mmlongbench_dir / "pdfs" / n for n in names]
        )
        assert report.ok and report.pages == sum(int(catalog[n]["n_pages"]) for n in names)
        hits = store.search(
            encoder.encode_query("program-guided fact-checking with reasoning programs"),
            limit=5,
            page_filter=PageFilter(doc_ids=(PAPER,)),
        )
        assert hits and {h.ref.doc_id for h in hits} == {PAPER}
        paths = [str(mmlongbench_dir / "pdfs" / n) for n in names]
        rerun = DocumentIndexer(store, encoder, ocr=False).index_paths(paths)
        assert rerun.unchanged == paths and rerun.indexed == []
