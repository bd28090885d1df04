"""The answer page (``docmemo ask --html``, ``docmemo demo``) and the terminal's round lines show
the evidence pages with their documents, whether or not a figure of the answer verifies."""

from __future__ import annotations

import re
from pathlib import Path

from llama_index_docmemo.cli.rounds import round_line
from llama_index_docmemo.demo.document import write_demo_pdf
from llama_index_docmemo.evidence.citations import PageText, cite
from llama_index_docmemo.evidence.html import render_answer_html
from llama_index_docmemo.trace import DocumentBelief, FeedbackRecord, PageScore, RoundTrace
from llama_index_docmemo.types import PageRef

DOC = "report.pdf"


def _figures(page: str) -> list[tuple[str, str]]:
    """(id, caption) of each page figure of the answer page."""
    return re.findall(r'<figure id="([^"]+)"><img [^>]*><figcaption>([^<]*)</figcaption>', page)


def test_the_evidence_pages_are_shown_when_no_figure_verifies(tmp_path: Path) -> None:
    pdf = write_demo_pdf(tmp_path / DOC)
    planted = cite("It was 9,731.", [PageText(PageRef(DOC, 6), "Research 212.5")], [], [])
    assert [c.verified for c in planted] == [False]
    evidence = [(PageRef(DOC, 6), 0.67), (PageRef(DOC, 23), 0.55)]
    page = render_answer_html("Q?", "It was 9,731.", planted, {DOC: pdf}, evidence)
    assert _figures(page) == [
        ("page-report-pdf-6", "report.pdf p. 6, evidence (belief 0.67)"),
        ("page-report-pdf-23", "report.pdf p. 23, evidence (belief 0.55)"),
    ]
    assert "data:image/png;base64," in page


def test_cited_pages_come_first_with_their_boxes_then_the_other_evidence(tmp_path: Path) -> None:
    pdf = write_demo_pdf(tmp_path / DOC)
    text = "In 2023 the Group invested NOK 212.5 million in research and development."
    cited = cite("212.5 million", [PageText(PageRef(DOC, 6), text)], [], [PageRef(DOC, 6)])
    cited = [c.model_copy(update={"bbox": [219.0, 192.0, 246.0, 207.0]}) for c in cited]
    evidence = [(PageRef(DOC, 19), 0.7), (PageRef(DOC, 6), 0.6)]
    page = render_answer_html("Q?", "212.5 million", cited, {DOC: pdf}, evidence)
    assert _figures(page) == [
        ("page-report-pdf-6", "report.pdf p. 6, evidence (belief 0.60): 1 cited box(es)"),
        ("page-report-pdf-19", "report.pdf p. 19, evidence (belief 0.70)"),
    ]
    empty = render_answer_html("Q?", "Not found.", [], {DOC: pdf}, [])
    assert _figures(empty) == [] and "none: no page read was judged useful" in empty


def test_round_lines_name_the_document_of_each_run_of_pages() -> None:
    def scores(*pages: tuple[str, int]) -> list[PageScore]:
        return [PageScore(doc_id=doc, page=page, score=1.0) for doc, page in pages]

    feedback = FeedbackRecord(status="need_more", useful=scores(("b.pdf", 3)))
    rnd = RoundTrace(
        round=1,
        query="margin",
        lam=0.0,
        candidates=[],
        selected=scores(("a.pdf", 10), ("a.pdf", 8), ("b.pdf", 3), ("a.pdf", 2)),
        feedback=feedback,
    )
    assert round_line(rnd) == (
        "  round 1: query='margin' read [a.pdf p.10, p.8; b.pdf p.3; a.pdf p.2] -> need_more; "
        "useful [b.pdf p.3]"
    )


def test_round_lines_show_the_document_beliefs_over_several_documents() -> None:
    rnd = RoundTrace(
        round=2,
        query="capex",
        lam=0.8,
        candidates=[],
        selected=[PageScore(doc_id="a.pdf", page=4, score=1.0)],
        documents=[
            DocumentBelief(doc_id="a.pdf", alpha=6.0, beta=1.0, pages=5),
            DocumentBelief(doc_id="b.pdf", alpha=2.0, beta=2.0),
            DocumentBelief(doc_id="c.pdf", alpha=1.0, beta=3.0),
            DocumentBelief(doc_id="d.pdf", alpha=1.0, beta=4.0),
        ],
    )
    assert round_line(rnd).endswith(
        "; documents [a.pdf 0.86 (5 pages), b.pdf 0.50, c.pdf 0.25 and 1 more]"
    )


def test_the_answer_page_shows_the_document_beliefs_of_a_whole_collection_question(
    tmp_path: Path,
) -> None:
    pdf = write_demo_pdf(tmp_path / DOC)
    documents = [
        DocumentBelief(doc_id=DOC, alpha=6.0, beta=1.0, pages=5),
        DocumentBelief(doc_id="other <b>.pdf", alpha=1.0, beta=3.0),
    ]
    page = render_answer_html("Q?", "Not found.", [], {DOC: pdf}, [], documents)
    rows = re.findall(r"<tr><td>([^<]*)</td><td>([^<]*)</td><td>([^<]*)</td><td>(\d+)</td>", page)
    assert rows == [
        (DOC, "0.86", "Beta(6.00, 1.00)", "5"),
        ("other &lt;b&gt;.pdf", "0.25", "Beta(1.00, 3.00)", "0"),
    ]
    assert "<h2>Documents</h2>" not in render_answer_html("Q?", "x", [], {DOC: pdf}, [])
