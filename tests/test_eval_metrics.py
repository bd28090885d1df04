"""Evaluation metrics on hand-made cases: recall, all-hit, per-round carry-over, accuracy rules."""

from __future__ import annotations

import pytest

from llama_index_docmemo.evaluation.datasets import QAItem
from llama_index_docmemo.evaluation.metrics import (
    QuestionRun,
    all_hit,
    answer_correct,
    cumulative_reads,
    evidence_recall,
    summarize,
)
from llama_index_docmemo.types import PageRef


def ref(page: int, doc: str = "d.pdf") -> PageRef:
    return PageRef(doc, page)


def item(
    qid: str, pages: tuple[int, ...], *, valid: bool = True, answer: str = "x", fmt: str = "Str"
) -> QAItem:
    return QAItem(
        qid=qid,
        doc_id="d.pdf",
        question="q",
        answer=answer,
        evidence_pages=pages,
        answer_format=fmt,
        evidence_valid=valid,
    )


def test_recall_and_all_hit() -> None:
    gold = {ref(2), ref(5)}
    assert evidence_recall([ref(2), ref(3)], gold) == 0.5
    assert not all_hit([ref(2), ref(3)], gold)
    assert evidence_recall([ref(5), ref(2)], gold) == 1.0
    assert all_hit([ref(5), ref(2), ref(9)], gold)
    assert evidence_recall([ref(2, "other.pdf")], {ref(2)}) == 0.0


def test_cumulative_reads_carry_the_last_round() -> None:
    rounds = cumulative_reads([[ref(1)], [ref(2)]], 4)
    assert rounds == [{ref(1)}, {ref(1), ref(2)}, {ref(1), ref(2)}, {ref(1), ref(2)}]


def test_summarize_excludes_invalid_and_unanswerable_from_page_metrics() -> None:
    items = {
        "a": item("a", (1, 2)),
        "b": item("b", (3,)),
        "c": item("c", (), answer="Not answerable", fmt="None"),
        "d": item("d", (4,), valid=False),
    }
    runs = [
        QuestionRun("e", "a", reads=[[ref(1)], [ref(2), ref(9)]], llm_calls=2, seconds=1.0),
        QuestionRun("e", "b", reads=[[ref(7)]], llm_calls=1, seconds=3.0),
        QuestionRun("e", "c", reads=[[ref(1)], [ref(2)], [ref(3)]]),
        QuestionRun("e", "d", reads=[[ref(4)]]),
    ]
    m = summarize(runs, items, n_rounds=3, score_answers=False)
    assert (m.n_questions, m.n_page_scored, m.n_excluded) == (4, 2, 2)
    assert m.evidence_recall == pytest.approx(0.5)  # a: 1.0, b: 0.0
    assert m.all_hit == pytest.approx(0.5)
    assert m.pages_read == pytest.approx(2.0)  # a read 3, b read 1
    assert m.rounds == pytest.approx(1.5)
    assert m.llm_calls == pytest.approx(1.5)
    assert m.seconds_per_question == pytest.approx(2.0)
    assert m.accuracy is None
    assert [(r.round, r.evidence_recall, r.all_hit) for r in m.per_round] == [
        (1, 0.25, 0.0),
        (2, 0.5, 0.5),
        (3, 0.5, 0.5),
    ]


def test_summarize_accuracy_over_scorable_answers() -> None:
    items = {
        "a": item("a", (1,), answer="Blue"),
        "b": item("b", (), answer="Not answerable", fmt="None"),
    }
    runs = [
        QuestionRun("e", "a", reads=[[ref(1)]], answer="blue."),
        QuestionRun("e", "b", reads=[[ref(1)]], answer="Paris"),
    ]
    m = summarize(runs, items, n_rounds=1, score_answers=True)
    assert m.accuracy == pytest.approx(0.5)
    assert m.n_accuracy_scored == 2


def test_an_abstention_earns_no_credit_even_on_an_unanswerable_question() -> None:
    """Saying "no answer was found in the pages read" is not the verdict "not answerable"."""
    items = {"u": item("u", (), answer="Not answerable", fmt="None")}
    said = "No answer was found in the 15 pages read. The most relevant passages: ..."
    abstained = [QuestionRun("e", "u", reads=[[ref(1)]], answer=said, status="need_more")]
    judged = [QuestionRun("e", "u", reads=[[ref(1)]], answer=said, status="unanswerable")]
    assert summarize(abstained, items, n_rounds=1, score_answers=True).accuracy == 0.0
    assert summarize(judged, items, n_rounds=1, score_answers=True).accuracy == 1.0


def test_pages_read_counts_a_reread_page_once() -> None:
    assert QuestionRun("e", "a", reads=[[ref(1), ref(2)], [ref(1)]]).pages_read == 2


@pytest.mark.parametrize(
    ("pred", "gold", "fmt", "expected"),
    [
        ("Less well-off", "Less well-off", "Str", True),
        ("  less WELL off. ", "Less well-off", "Str", True),
        ("more well-off", "Less well-off", "Str", False),
        ("5", "5", "Int", True),
        ("5.0", "5", "Int", True),
        ("There are 5", "5", "Int", True),
        ("1,200", "1200", "Int", True),
        ("6", "5", "Int", False),
        ("between 5 and 6", "5", "Int", False),
        ("17.6", "17.5", "Float", True),  # within 1 %
        ("18", "17.5", "Float", False),
        ("51%", "51%", "Float", True),
        ("0.51", "51%", "Float", True),  # a percentage written as a fraction
        ("$4.2", "4.2", "Float", True),
        ("['TIME', 'The Economist']", "['The Economist', 'TIME']", "List", True),
        ("The Economist, TIME", "['The Economist', 'TIME']", "List", True),
        ("['The Economist']", "['The Economist', 'TIME']", "List", False),
        ("[8000, 1500]", "[1500, 8000]", "List", True),
        ("Not answerable", "Not answerable", "None", True),
        ("The document does not answer this: not answerable.", "Not answerable", "None", True),
        ("42", "Not answerable", "None", False),
        (None, "Not answerable", "None", True),
        ("Not answerable", "5", "Int", False),
        (None, "blue", "Str", False),
        ("anything", "free-form answer", None, None),
    ],
)
def test_answer_rules(pred: str | None, gold: str, fmt: str | None, expected: bool | None) -> None:
    assert answer_correct(pred, gold, fmt) is expected
