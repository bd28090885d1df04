"""Document-level metrics of a run (pure): right document in round 1, documents read, document
and page F1 of the evidence, pages before the first gold page."""

from __future__ import annotations

import pytest

from llama_index_docmemo.evaluation.datasets import QAItem
from llama_index_docmemo.evaluation.documents import document_scores, document_summary, f1
from llama_index_docmemo.evaluation.metrics import QuestionRun
from llama_index_docmemo.types import PageRef

ITEM = QAItem(qid="q", doc_id="a.pdf", question="?", answer="1", evidence_pages=[3, 9])


def _run(reads: list[list[tuple[str, int]]], useful: list[tuple[str, int]]) -> QuestionRun:
    return QuestionRun(
        engine="e",
        qid="q",
        reads=[[PageRef(*r) for r in round_] for round_ in reads],
        useful=[PageRef(*u) for u in useful],
    )


def test_f1_of_sets() -> None:
    assert f1({1, 2}, {2, 3}) == pytest.approx(0.5)
    assert f1(set(), {1}) == 0.0 and f1({1}, set()) == 0.0 and f1({1}, {1}) == 1.0


def test_a_run_in_the_wrong_document_first() -> None:
    run = _run(
        [[("b.pdf", 1), ("b.pdf", 2)], [("a.pdf", 5), ("a.pdf", 3)], [("c.pdf", 1)]],
        useful=[("b.pdf", 2), ("a.pdf", 3)],
    )
    scores = document_scores(run, ITEM)
    assert not scores.right_document_round1
    assert scores.documents_read == 3
    assert scores.document_f1 == pytest.approx(2 / 3)  # precision 1/2, recall 1
    assert scores.page_f1 == pytest.approx(0.5)  # precision 1/2, recall 1/2
    assert scores.pages_to_first_gold == 3


def test_a_run_that_never_reads_gold() -> None:
    scores = document_scores(_run([[("a.pdf", 1)]], useful=[]), ITEM)
    assert scores.right_document_round1 and scores.pages_to_first_gold is None
    assert scores.document_f1 == 0.0 and scores.page_f1 == 0.0


def test_summary_averages_seeds_per_question_then_questions() -> None:
    good = _run([[("a.pdf", 3), ("a.pdf", 9)]], useful=[("a.pdf", 3), ("a.pdf", 9)])
    bad = _run([[("b.pdf", 1)]], useful=[])
    unscored = QAItem(
        qid="u", doc_id="a.pdf", question="?", answer="Not answerable", evidence_pages=[]
    )
    summary = document_summary(
        [[good, QuestionRun(engine="e", qid="u", reads=[[]])], [bad]],
        {"q": ITEM, "u": unscored},
    )
    assert summary["n_questions"] == 1
    assert summary["right_document_round1"]["mean"] == pytest.approx(0.5)
    assert summary["page_f1"]["mean"] == pytest.approx(0.5)
    assert summary["pages_to_first_gold"] == 0.0 and summary["never_gold"] == pytest.approx(0.5)
