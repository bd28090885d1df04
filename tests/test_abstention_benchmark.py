"""The abstention benchmark's counting (the script itself needs a store and the data)."""

from __future__ import annotations

from benchmark_module import load_benchmark

from llama_index_docmemo.trace import PageScore, QueryTrace

bench = load_benchmark("abstention")


def answer(qid: str, answerable: bool, right: bool, belief: float):
    return bench.Answer(
        qid=qid,
        status="answered",
        answerable=answerable,
        right=right,
        citations=[],
        evidence=[("d.pdf", 1)],
        beliefs={"d.pdf#1": belief},
    )


def test_each_group_is_counted_apart_and_the_best_net_wins() -> None:
    answers = [
        answer("false", answerable=False, right=False, belief=0.5),
        answer("wrong", answerable=True, right=False, belief=0.55),
        answer("right-strong", answerable=True, right=True, belief=0.9),
        answer("right-weak", answerable=True, right=True, belief=0.6),
    ]
    row = bench.trade_off(answers, "low_belief", 0.58)
    assert row["false_answers_avoided"]["k"] == 1 and row["false_answers_avoided"]["n"] == 1
    assert row["wrong_answers_avoided"]["k"] == 1 and row["wrong_answers_avoided"]["n"] == 1
    assert row["true_answers_lost"]["k"] == 0 and row["true_answers_lost"]["n"] == 2
    assert row["net"] == 2
    higher = bench.trade_off(answers, "low_belief", 0.7)
    assert higher["true_answers_lost"]["k"] == 1 and higher["net"] == 1
    rows = [bench.trade_off(answers, "off", 0.0), higher, row]
    assert bench.best_rule(rows) is row


def test_an_answer_is_kept_only_when_the_engine_shows_one() -> None:
    item = bench.QAItem("q", "d.pdf", "How many?", "Not answerable", (), "None")
    trace = QueryTrace(
        question="How many?",
        answer="12",
        status="answered",
        stop_reason="answered",
        evidence=[PageScore(doc_id="d.pdf", page=1, score=0.7)],
    )
    kept = bench.answer_of(item, trace, "offline")
    assert kept is not None and not kept.answerable and kept.beliefs == {"d.pdf#1": 0.7}
    said_nothing = trace.model_copy(
        update={"status": "need_more", "answer": "No answer was found."}
    )
    assert bench.answer_of(item, said_nothing, "offline") is None
    assert (
        bench.answer_of(item, trace.model_copy(update={"status": "unanswerable"}), "offline")
        is None
    )
