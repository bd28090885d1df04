"""The loop's stop policy (loop/trust.stop_reason): pure, so every ordering is checked here."""

from __future__ import annotations

import itertools
from dataclasses import replace

import pytest

from llama_index_docmemo.config import BudgetSettings, LoopSettings
from llama_index_docmemo.loop.state import RoundOutcome, stop_reason

GO_ON = RoundOutcome(round=1, shown=5, status="need_more", useful_so_far=0, pages_read=5)
LOOP = LoopSettings(rounds=3)
BUDGET = BudgetSettings()


def test_a_round_with_nothing_to_end_it_goes_on() -> None:
    assert stop_reason(GO_ON, LOOP, BUDGET) is None


@pytest.mark.parametrize(
    ("change", "loop", "budget", "expected"),
    [
        ({"llm_failed": True}, LOOP, BUDGET, "llm_error"),
        ({"shown": 0}, LOOP, BUDGET, "no_candidates"),
        ({}, LoopSettings(static=True), BUDGET, "static"),
        ({"status": "answered"}, LOOP, BUDGET, "answered"),
        ({"status": "unanswerable", "explored": True}, LOOP, BUDGET, "unanswerable"),
        ({"out_of_time": True}, LOOP, BUDGET, "deadline"),
        ({"status": None}, LOOP, BUDGET, "budget"),
        ({"status": None, "has_reader": False}, LOOP, BUDGET, "max_rounds"),
        ({"calls_left": False}, LOOP, BUDGET, "budget"),
        ({"pages_read": 5}, LOOP, BudgetSettings(max_pages=5), "budget"),
        ({"pages_read": 13}, LoopSettings(give_up_after_pages=13), BUDGET, "no_evidence"),
        ({"round": 3}, LOOP, BUDGET, "max_rounds"),
    ],
)
def test_each_reason_ends_the_reading_alone(
    change: dict[str, object], loop: LoopSettings, budget: BudgetSettings, expected: str
) -> None:
    assert stop_reason(replace(GO_ON, **change), loop, budget) == expected


def test_an_unexplored_unanswerable_and_an_unevidenced_answer_go_on() -> None:
    assert stop_reason(replace(GO_ON, status="unanswerable"), LOOP, BUDGET) is None
    needs = LoopSettings(rounds=3, answer_needs_evidence=True)
    assert stop_reason(replace(GO_ON, status="answered"), needs, BUDGET) is None
    found = replace(GO_ON, status="answered", useful_so_far=1)
    assert stop_reason(found, needs, BUDGET) == "answered"


def test_a_page_found_keeps_the_reading_from_giving_up() -> None:
    loop = LoopSettings(rounds=5, give_up_after_pages=5)
    assert stop_reason(replace(GO_ON, useful_so_far=1), loop, BUDGET) is None


ORDER = [
    "llm_error",
    "no_candidates",
    "answered",
    "deadline",
    "budget",
    "no_evidence",
    "max_rounds",
]
CAUSES = {
    "llm_error": {"llm_failed": True},
    "no_candidates": {"shown": 0},
    "answered": {"status": "answered", "useful_so_far": 1},
    "deadline": {"out_of_time": True},
    "budget": {"calls_left": False},
    "no_evidence": {"pages_read": 13},
    "max_rounds": {"round": 7},
}


PAIRS = [
    pair
    for pair in itertools.combinations(ORDER, 2)
    if set(pair) != {"answered", "no_evidence"}  # a useful page and "nothing useful" exclude
]


@pytest.mark.parametrize("causes", PAIRS)
def test_of_two_reasons_the_earlier_is_reported(causes: tuple[str, str]) -> None:
    """A round that both answers and spends the budget reports "answered", a failed LLM beats
    everything: the trace says what ended the query first in the policy's order."""
    first, second = causes
    change = {**CAUSES[second], **CAUSES[first]}
    loop = LoopSettings(rounds=7, give_up_after_pages=13)
    assert stop_reason(replace(GO_ON, **change), loop, BUDGET) == first
