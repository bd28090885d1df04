"""The simulated reader: label error rates, determinism, status rule, labelling."""

from __future__ import annotations

from llama_index_docmemo.evaluation.simulated import SimulatedReader
from llama_index_docmemo.readers.base import PageView, ReaderInput
from llama_index_docmemo.types import PageRef


def inp(pages: list[int], round_: int = 1, doc: str = "d.pdf") -> ReaderInput:
    return ReaderInput(
        question="q", query="q", pages=[PageView(PageRef(doc, p), "") for p in pages], round=round_
    )


def test_error_rates_match_fn_and_fp() -> None:
    gold = [PageRef("d.pdf", p) for p in range(1, 4001)]
    r = SimulatedReader(gold, fn=0.2, fp=0.05, seed=3)
    fn_rate = sum(not r.label(ref) for ref in gold) / len(gold)
    others = [PageRef("d.pdf", p) for p in range(4001, 12001)]
    fp_rate = sum(r.label(ref) for ref in others) / len(others)
    assert abs(fn_rate - 0.2) < 0.02
    assert abs(fp_rate - 0.05) < 0.01


def test_labels_are_seeded_and_independent_of_call_order() -> None:
    gold = [PageRef("d.pdf", p) for p in range(1, 50)]
    a = SimulatedReader(gold, seed=1, key="q1")
    b = SimulatedReader(gold, seed=1, key="q1")
    refs = [PageRef("d.pdf", p) for p in range(1, 200)]
    assert [a.label(x) for x in refs] == [b.label(x) for x in reversed(refs)][::-1]
    c = SimulatedReader(gold, seed=2, key="q1")
    assert [a.label(x) for x in refs] != [c.label(x) for x in refs]


def test_perfect_reader_answers_once_every_gold_page_is_recognised() -> None:
    r = SimulatedReader([PageRef("d.pdf", 2), PageRef("d.pdf", 7)], fn=0.0, fp=0.0)
    fb1 = r.read(inp([1, 2, 3]))
    assert fb1.status == "need_more"
    assert fb1.useful_pages == [PageRef("d.pdf", 2)]
    assert fb1.irrelevant_pages == [PageRef("d.pdf", 1), PageRef("d.pdf", 3)]
    assert fb1.refined_query is None
    fb2 = r.read(inp([7, 8], round_=2))
    assert fb2.status == "answered"
    assert r.read(inp([7], round_=1)).status == "need_more"  # round 1 starts a new question


def test_false_negative_gold_page_keeps_it_need_more() -> None:
    r = SimulatedReader([PageRef("d.pdf", 1)], fn=1.0, fp=0.0)
    fb = r.read(inp([1]))
    assert fb.status == "need_more" and fb.irrelevant_pages == [PageRef("d.pdf", 1)]


def test_question_without_gold_never_answers_and_set_question_resets() -> None:
    r = SimulatedReader((), fn=0.0, fp=0.0)
    assert r.read(inp([1, 2])).status == "need_more"
    r.set_question([PageRef("d.pdf", 1)], key="next")
    assert r.read(inp([1])).status == "answered"
    assert r.name == "simulated"


def test_rates_are_validated() -> None:
    import pytest

    with pytest.raises(ValueError, match="fn"):
        SimulatedReader((), fn=1.5)
