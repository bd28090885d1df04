"""A question over a whole collection on the real components: three companies' filings indexed
into Qdrant Edge on disk, asked through the engine with no document named, the offline reader
reading; tenants still fence the documents the stage may weigh."""

from __future__ import annotations

from pathlib import Path

import pymupdf
import pytest

from llama_index_docmemo import DocMemoQueryEngine, DocumentIndexer, PageFilter, open_store
from llama_index_docmemo.config import DocMemoConfig
from llama_index_docmemo.encoders import default_encoder

COMPANIES = {"ACME": 118.0, "GLOBEX": 342.5, "INITECH": 77.25}
FILLER = (
    "Segment results were discussed with the board. Operating income, net sales and cash flows "
    "from operating activities are presented in the consolidated statements."
)


def _filing(path: Path, company: str, capex: float) -> None:
    pdf = pymupdf.open()
    for number in range(1, 13):
        page = pdf.new_page()
        if number == 1:
            text = (
                f"UNITED STATES SECURITIES AND EXCHANGE COMMISSION\nFORM 10-K\nAnnual report for "
                f"the fiscal year ended December 31, 2023\n{company.title()} Corporation"
            )
        elif number == 9:
            text = (
                "Consolidated statements of cash flows\nInvesting activities\n"
                f"Capital expenditures (purchases of property and equipment) {capex} million"
            )
        else:
            text = f"{FILLER} Page {number}."
        page.insert_textbox(pymupdf.Rect(72, 72, 540, 700), text, fontsize=11)
    pdf.save(path)


@pytest.fixture(scope="module")
def collection(tmp_path_factory: pytest.TempPathFactory) -> Path:
    root = tmp_path_factory.mktemp("collection")
    docs, store_path = root / "filings", root / "store"
    docs.mkdir()
    for company, capex in COMPANIES.items():
        _filing(docs / f"{company}_2023_10K.pdf", company, capex)
    encoder = default_encoder()
    with open_store(path=store_path, encoder=encoder) as store:
        report = DocumentIndexer(store, encoder).index_paths(sorted(docs.glob("*.pdf")), root=docs)
        assert not report.failed
        other = root / "other"
        other.mkdir()
        _filing(other / "HOOLI_2023_10K.pdf", "HOOLI", 999.0)
        DocumentIndexer(store, encoder).index_paths([other / "HOOLI_2023_10K.pdf"], tenant="rival")
    return store_path


@pytest.mark.parametrize("company", ["GLOBEX", "INITECH"])
def test_a_question_naming_no_file_reads_the_named_company(collection: Path, company: str) -> None:
    with open_store(path=collection, encoder=default_encoder()) as store:
        engine = DocMemoQueryEngine.from_defaults(store=store, evidence_images=False)
        result = engine.run(f"What were {company.title()}'s capital expenditures in fiscal 2023?")
    rounds = result.trace.rounds
    named = f"{company}_2023_10K.pdf"
    assert rounds[0].documents[0].doc_id == named
    assert {p.doc_id for p in rounds[0].selected} == {named}
    assert any((p.doc_id, p.page) == (named, 9) for r in rounds[:2] for p in r.selected)
    assert rounds[-1].documents[0].doc_id == named  # still the best-believed at the end


def test_the_document_stage_never_weighs_another_tenants_filing(collection: Path) -> None:
    with open_store(path=collection, encoder=default_encoder()) as store:
        engine = DocMemoQueryEngine.from_defaults(
            store=store,
            evidence_images=False,
            page_filter=PageFilter(),
            config=DocMemoConfig(card_lead=0.0),  # weigh documents though no card names Hooli
        )
        result = engine.run("What were Hooli's capital expenditures in fiscal 2023?")
    weighed = {d.doc_id for r in result.trace.rounds for d in r.documents}
    read = {p.doc_id for r in result.trace.rounds for p in r.selected}
    assert "HOOLI_2023_10K.pdf" not in weighed | read
    assert weighed  # the stage ran over the caller's own three filings
