"""Stop rules applied to a reader's feedback: never, noisy, oracle (upper bound), the reader's own."""

from __future__ import annotations

import pytest

from llama_index_docmemo.evaluation.simulated import SimulatedReader
from llama_index_docmemo.evaluation.stopping import ORACLE_LABEL, StopControl, StopRule, stop_label
from llama_index_docmemo.readers.base import Feedback, PageView, Reader, ReaderInput
from llama_index_docmemo.types import PageRef

GOLD = [PageRef("d.pdf", 2)]


def shown(*pages: int, round_: int = 1, final: bool = False) -> ReaderInput:
    return ReaderInput(
        question="q",
        query="q",
        pages=[PageView(ref=PageRef("d.pdf", p), text="") for p in pages],
        round=round_,
        final_round=final,
    )


def control(rule: StopRule) -> StopControl:
    ctl = StopControl(SimulatedReader(fn=0.0, fp=0.0), rule)
    ctl.inner.set_question(GOLD, key="q1")
    ctl.set_question(GOLD, key="q1")
    return ctl


def test_never_reads_on_after_the_gold_page_and_keeps_labels() -> None:
    ctl = control(StopRule("never"))
    feedback = ctl.read(shown(1, 2))
    assert feedback.status == "need_more" and feedback.answer is None
    assert feedback.useful_pages == [PageRef("d.pdf", 2)]
    assert ctl.useful == {PageRef("d.pdf", 2)}
    assert ctl.judged == {PageRef("d.pdf", 1), PageRef("d.pdf", 2)}
    last = ctl.read(shown(3, round_=2, final=True))
    assert last.status == "answered"  # the final round keeps the reader's own answer


def test_oracle_stops_exactly_when_gold_is_recognised() -> None:
    ctl = control(StopRule("oracle"))
    assert ctl.read(shown(1)).status == "need_more"
    assert ctl.read(shown(2, round_=2)).status == "answered"
    assert stop_label("oracle") == ORACLE_LABEL == "upper bound (oracle stop)"


def test_noisy_rates_match_the_stated_probabilities() -> None:
    rule = StopRule("noisy", p_early=0.2, p_miss=0.3, seed=1)
    draws = 4000
    early = sum(
        rule.says_answered(own=False, gold_recognised=False, key=f"q{i}", round_=1, final=False)
        for i in range(draws)
    )
    late = sum(
        not rule.says_answered(own=True, gold_recognised=True, key=f"q{i}", round_=1, final=False)
        for i in range(draws)
    )
    assert early / draws == pytest.approx(0.2, abs=0.025)
    assert late / draws == pytest.approx(0.3, abs=0.025)
    # the same (seed, question, round) gives every engine the same decision
    assert rule.says_answered(
        own=False, gold_recognised=False, key="q7", round_=2, final=False
    ) == rule.says_answered(own=True, gold_recognised=False, key="q7", round_=2, final=False)


def test_never_turns_an_early_unanswerable_into_need_more() -> None:
    class Gives(Reader):
        def read(self, inp: ReaderInput) -> Feedback:
            return Feedback(status="unanswerable", answer="Not answerable")

    ctl = StopControl(Gives(), StopRule("never"))
    ctl.set_question(GOLD, key="q")
    assert ctl.read(shown(1)).status == "need_more"
    assert ctl.read(shown(3, round_=3, final=True)).status == "unanswerable"
    own = StopControl(Gives(), StopRule("reader"))
    assert own.read(shown(1)).status == "unanswerable"


def test_rule_is_validated() -> None:
    with pytest.raises(ValueError, match="stop mode"):
        StopRule("sometimes")  # type: ignore[arg-type]
    with pytest.raises(ValueError, match="p_miss"):
        StopRule("noisy", p_miss=1.5)
