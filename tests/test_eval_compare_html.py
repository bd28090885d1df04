"""``report.html``'s answer cards: citations linked to their own card's thumbnails, boxes asked
for, unverified claims shown as such, the pages a citation stands on never cut."""

from __future__ import annotations

import re
from collections.abc import Sequence

from llama_index_docmemo.evaluation.compare.html import MAX_THUMBNAILS, render_html
from llama_index_docmemo.evaluation.compare.questions import Question
from llama_index_docmemo.evaluation.compare.records import AnswerRecord, PageCitation
from llama_index_docmemo.evaluation.compare.thumbnails import Thumbnail
from llama_index_docmemo.evaluation.compare.totals import compare_totals
from llama_index_docmemo.evidence.citations import Citation
from llama_index_docmemo.trace import DocumentBelief, QueryTrace, RoundTrace

BOX = [240.0, 90.0, 265.0, 105.0]
ANSWER = "Revenue was 41.5 million; staff 9,731."


def citations(page: int) -> list[Citation]:
    return [
        Citation(
            text="41.5 million",
            kind="figure",
            doc_id="a.pdf",
            page=page,
            bbox=BOX,
            quote="Revenue 41.5 million",
            verified=True,
            how="text_layer",
            box_from="search_for",
            answer_span=(12, 24),
        ),
        Citation(
            text="9,731",
            kind="figure",
            doc_id=None,
            page=None,
            verified=False,
            how="not_found",
            answer_span=(32, 37),
        ),
    ]


def test_each_card_links_its_citations_to_its_own_thumbnails() -> None:
    crowded = [PageCitation(doc_id="a.pdf", page=p) for p in range(1, 10)]  # more than shown
    records = [
        AnswerRecord(
            qid="q", question="?", engine=engine, answer=ANSWER, cited_pages=cited, citations=cites
        )
        for engine, cited, cites in (
            ("docmemo", [PageCitation(doc_id="a.pdf", page=4)], citations(4)),
            ("stock", crowded, citations(9)),  # the cited box is on the last cited page
        )
    ]
    asked: list[tuple[str, int, list[list[float]]]] = []

    def thumbnail_for(doc_id: str, page: int, boxes: Sequence[Sequence[float]]) -> Thumbnail:
        asked.append((doc_id, page, [list(b) for b in boxes]))
        return Thumbnail(f"pages/{doc_id}-{page}.png", 300, 400)

    meta = {
        "engines": ["docmemo", "stock"],
        "docs": "d",
        "pages_in_store": 9,
        "questions": 1,
        "llm": "m",
        "judge": None,
        "budgets": {"docmemo": "6 pages", "stock": "top 6"},
    }
    by_engine = {r.engine: [r] for r in records}
    page = render_html(
        meta,
        compare_totals(by_engine, "docmemo"),
        [Question("q", "?")],
        {"q": records},
        {},
        thumbnail_for,
    )
    cards = re.findall(r'<article class="answer".*?</article>', page)
    assert len(cards) == 2
    ids = re.findall(r'id="([^"]+)"', page)
    assert len(ids) == len(set(ids))  # the same page cited by two engines: two figures
    for card, cited_page in zip(cards, (4, 9), strict=True):
        (link,) = re.findall(r'<a href="#([^"]+)">a.pdf p. (\d+)</a>', card)
        assert int(link[1]) == cited_page and f'id="{link[0]}"' in card
        assert f'id="{link[0]}"><img src="pages/a.pdf-{cited_page}.png"' in card
        assert '<mark class="verified">41.5 million</mark>' in card
        assert '<mark class="unverified">9,731</mark>' in card and "unverified: not found" in card
        assert "Verified figures (on pages cited or read): 1/2" in card
    docmemo, *stock = asked  # the cards render in engine order
    assert docmemo == ("a.pdf", 4, [BOX])
    assert len(stock) == MAX_THUMBNAILS and stock[0] == ("a.pdf", 9, [BOX])  # never cut
    assert all(boxes == [] for _, _, boxes in stock[1:])
    assert "and 3 more cited pages" in cards[1]


def test_the_docmemo_card_shows_the_document_beliefs_of_a_whole_store_question() -> None:
    """Over several documents the DocMemo card shows which documents it weighed, best-believed
    first, with the pages each got; a one-document question (no beliefs) shows no such table."""
    records = [AnswerRecord(qid=q, question="?", engine="docmemo", answer="x") for q in "ab"]
    documents = [
        DocumentBelief(doc_id="b_2019.pdf", alpha=1.5, beta=3.0),
        DocumentBelief(doc_id="a_2020.pdf", alpha=6.0, beta=1.0, pages=5),
    ]
    round_ = RoundTrace(
        round=1, query="?", lam=0.5, candidates=[], selected=[], documents=documents
    )
    traces = {
        qid: QueryTrace(
            question="?", answer="x", status="answered", stop_reason="answered", rounds=[r]
        )
        for qid, r in (("a", round_), ("b", round_.model_copy(update={"documents": []})))
    }
    meta = {
        "engines": ["docmemo"],
        "docs": "d",
        "pages_in_store": 9,
        "questions": 2,
        "llm": "m",
        "judge": None,
        "budgets": {"docmemo": "6 pages"},
    }
    page = render_html(
        meta,
        compare_totals({"docmemo": records}, "docmemo"),
        [Question("a", "?"), Question("b", "?")],
        {"a": records[:1], "b": records[1:]},
        traces,
        lambda doc, page, boxes: Thumbnail(f"pages/{doc}-{page}.png", 300, 400),
    )
    first, second = re.findall(r'<article class="answer".*?</article>', page)
    assert "Document beliefs (DocMemo)" in first and "Document beliefs" not in second
    rows = re.findall(r"<tr><td>([^<]+)</td><td>([0-9.]+)</td>.*?<td>(\d+)</td></tr>", first)
    assert rows == [("a_2020.pdf", "0.86", "5"), ("b_2019.pdf", "0.33", "0")]
