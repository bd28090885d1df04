"""Citations end to end: ``docmemo ask --json`` on a generated PDF (always) and a dev PDF (with the
data), a planted figure seen unverified, ``[n]`` markers against ``source_nodes``, and the
``--html`` page screenshotted in headless Chromium with the cited boxes drawn."""

from __future__ import annotations

import asyncio
import json
import shutil
import subprocess
from pathlib import Path

import pytest
from PIL import Image
from screenshots import box_pixels

from llama_index_docmemo.cli import main
from llama_index_docmemo.config import DocMemoConfig
from llama_index_docmemo.demo.document import DEMO_QUESTIONS, write_demo_pdf
from llama_index_docmemo.evaluation.setup import open_eval_store
from llama_index_docmemo.ingest.ocr import find_tessdata
from llama_index_docmemo.query_engine import DocMemoQueryEngine
from llama_index_docmemo.readers.base import Feedback, Reader, ReaderInput
from llama_index_docmemo.types import EvidenceNote
from tests.ingest_samples import make_scanned_slides

CITATION_KEYS = {
    "text", "doc_id", "page", "bbox", "quote", "verified", "how", "kind", "box_from", "computed"
}
NORDIC = DEMO_QUESTIONS[1]  # "How many employees were in the Nordic region at the end of 2024?"


@pytest.fixture(scope="module")
def store(tmp_path_factory: pytest.TempPathFactory) -> Path:
    root = tmp_path_factory.mktemp("cite")
    (root / "docs").mkdir()
    write_demo_pdf(root / "docs" / "report.pdf")
    assert main(["index", str(root / "docs"), "--store", str(root / "store"), "--quiet"]) == 0
    return root / "store"


def ask_json(capsys: pytest.CaptureFixture[str], *args: str) -> dict:
    assert main(["ask", *args, "--json"]) == 0
    return json.loads(capsys.readouterr().out)


def test_ask_json_gives_verified_citations_with_pages_and_boxes(store, capsys) -> None:
    out = ask_json(capsys, NORDIC.question, "--store", str(store))
    assert out["answer"] == "1,184" and out["abstained"] is None
    (citation,) = [c for c in out["citations"] if c["kind"] == "figure"]
    assert set(citation) == CITATION_KEYS
    assert citation["verified"] is True and citation["how"] == "text_layer"
    assert (citation["doc_id"], citation["page"]) == ("report.pdf", NORDIC.evidence_pages[0])
    x0, y0, x1, y1 = citation["bbox"]
    assert 0 <= x0 < x1 <= 612 and 0 <= y0 < y1 <= 842 and citation["box_from"] == "search_for"
    assert "1,184" in citation["quote"]


class PlantedReader(Reader):
    """Names the first page shown useful and answers with a figure the pages may not hold."""

    name = "planted"

    def __init__(self, answer: str) -> None:
        self.answer = answer

    def read(self, inp: ReaderInput) -> Feedback:
        page = inp.pages[0].ref
        return Feedback(
            answer=self.answer,
            useful_pages=[page],
            notes=[EvidenceNote(page=page, fact=self.answer)],
            status="answered",
        )


def engine(store_path: Path, answer: str, **config: object) -> DocMemoQueryEngine:
    store, encoder = open_eval_store(store_path)
    return DocMemoQueryEngine.from_defaults(
        store=store,
        encoder=encoder,
        reader=PlantedReader(answer),
        config=DocMemoConfig(**config),
        evidence_images=False,
    )


def test_a_planted_figure_is_unverified_and_the_answer_says_so(store) -> None:
    response = engine(store, "The Nordic region had 9,731 employees.").query(NORDIC.question)
    citations = response.metadata["docmemo"]["citations"]
    assert [(c["text"], c["verified"], c["page"]) for c in citations] == [("9,731", False, None)]
    assert response.response.endswith("(Unverified: a figure of this answer is on no page read.)")


def test_markers_point_into_source_nodes_and_nodes_carry_the_quote(store) -> None:
    response = engine(store, "The Nordic region had 1,184 employees.", citation_markers=True).query(
        NORDIC.question
    )
    assert response.response == "The Nordic region had 1,184 [1] employees."
    node = response.source_nodes[0].node
    (citation,) = response.metadata["docmemo"]["citations"]
    assert node.metadata["page"] == citation["page"] == NORDIC.evidence_pages[0]
    assert node.metadata["docmemo_bbox"] == citation["bbox"]
    quote = node.metadata["docmemo_quote"]
    start, end = node.metadata["docmemo_quote_start"], node.metadata["docmemo_quote_end"]
    assert "1,184" in quote and node.get_content()[start:end] == quote
    assert "docmemo_quote" not in node.get_content(metadata_mode="llm")


def test_abstention_turns_a_weakly_cited_answer_into_not_found(store) -> None:
    config = {"abstain": "unverified"}
    response = engine(store, "It was 9,731.", **config).query(NORDIC.question)
    trace = response.metadata["docmemo"]
    assert response.response.startswith("Not found") and "Best candidate pages: report.pdf p." in (
        response.response
    )
    assert trace["status"] == "unanswerable" and trace["abstained"]
    kept = engine(store, "It was 1,184.", **config).query(NORDIC.question)
    assert kept.response == "It was 1,184." and kept.metadata["docmemo"]["abstained"] is None


BROWSER = shutil.which("chromium") or shutil.which("chromium-browser")


@pytest.mark.skipif(BROWSER is None, reason="headless Chromium (chromium) is not installed")
def test_the_html_page_shows_the_cited_box_in_a_browser(store, tmp_path: Path, capsys) -> None:
    page = tmp_path / "answer.html"
    assert main(["ask", NORDIC.question, "--store", str(store), "--html", str(page)]) == 0
    text = page.read_text()
    assert 'href="#page-report-pdf-11"' in text and 'id="page-report-pdf-11"' in text
    shot = tmp_path / "shot.png"
    subprocess.run(
        [
            str(BROWSER),
            "--headless",
            "--no-sandbox",
            "--disable-gpu",
            "--hide-scrollbars",
            "--window-size=1200,1400",
            f"--screenshot={shot}",
            page.as_uri(),
        ],
        check=True,
        timeout=120,
        capture_output=True,
    )
    with Image.open(shot) as image:
        drawn = box_pixels(image)
    assert drawn > 20  # the box around "1,184" on the thumbnail of p. 11


def test_ask_json_on_a_dev_pdf(mmlongbench_dir: Path, tmp_path: Path, capsys) -> None:
    docs = tmp_path / "docs"
    docs.mkdir()
    shutil.copy(mmlongbench_dir / "pdfs" / "2303.05039v2.pdf", docs)
    store = tmp_path / "store"
    assert main(["index", str(docs), "--store", str(store), "--quiet"]) == 0
    capsys.readouterr()
    question = "How many items in total of Amazon related datasets in the paper?"
    out = ask_json(capsys, question, "--store", str(store))
    assert out["citations"], out
    for citation in out["citations"]:
        assert set(citation) == CITATION_KEYS and isinstance(citation["verified"], bool)
    verified = [c for c in out["citations"] if c["verified"]]
    assert verified and all(c["doc_id"] == "2303.05039v2.pdf" and c["page"] for c in verified)
    boxed = [c for c in verified if c["bbox"]]
    assert boxed and all(len(c["bbox"]) == 4 and c["bbox"][0] < c["bbox"][2] for c in boxed)


def test_the_async_path_gives_the_same_citations(store) -> None:
    answer = "The Nordic region had 1,184 employees."
    sync = engine(store, answer).query(NORDIC.question).metadata["docmemo"]["citations"]
    response = asyncio.run(engine(store, answer).aquery(NORDIC.question))
    assert response.metadata["docmemo"]["citations"] == sync and sync[0]["bbox"]


@pytest.mark.skipif(find_tessdata() is None, reason="Tesseract language data is not installed")
def test_a_figure_on_an_ocr_page_is_boxed_from_the_ocr_words(tmp_path: Path) -> None:
    docs = tmp_path / "docs"
    docs.mkdir()
    make_scanned_slides(docs / "deck.pdf", ["Units sold 4,212 in 2019", "Plan for next year"])
    assert main(["index", str(docs), "--store", str(tmp_path / "store"), "--quiet"]) == 0
    answer = "They sold 4,212 units in 2019."  # two boxes on one OCR'd page
    plain = engine(tmp_path / "store", answer).query("How many units sold?")
    assert [c["bbox"] for c in plain.metadata["docmemo"]["citations"]] == [None, None]  # default
    response = engine(tmp_path / "store", answer, ocr_boxes=True).query("How many units sold?")
    units, year = response.metadata["docmemo"]["citations"]
    for citation in (units, year):
        assert (citation["page"], citation["verified"], citation["how"]) == (1, True, "ocr_text")
        assert citation["box_from"] == "ocr_words"
        x0, y0, x1, y1 = citation["bbox"]  # the slide writes it at x 60, baseline 120, 36 pt
        assert 60 < x0 < x1 < 720 and 70 < y0 < y1 < 140
    assert units["bbox"][2] < year["bbox"][0]  # "4,212" stands left of "2019"
