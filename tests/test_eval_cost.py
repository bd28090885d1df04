"""Cost at the stop (issue 28): pages read, reader requests, calls and estimated tokens, per budget."""

from __future__ import annotations

import itertools
from pathlib import Path

import pytest

from llama_index_docmemo.evaluation.cost import (
    TokenEstimate,
    mean_cost,
    question_cost,
    rounds_within,
)
from llama_index_docmemo.evaluation.datasets import QAItem
from llama_index_docmemo.evaluation.metrics import QuestionRun
from llama_index_docmemo.evaluation.report import write_report
from llama_index_docmemo.types import PageRef

ESTIMATE = TokenEstimate(per_page=100, per_request=10, source="test")


def p(*pages: int) -> list[PageRef]:
    return [PageRef("d.pdf", n) for n in pages]


def test_rounds_within_cuts_at_the_nth_distinct_page() -> None:
    reads = [p(1, 2, 3), p(2, 4), p(5, 6)]  # page 2 read again in round 2
    assert rounds_within(reads, 2) == [p(1, 2)]
    assert rounds_within(reads, 3) == [p(1, 2, 3)]
    assert rounds_within(reads, 4) == [p(1, 2, 3), p(2, 4)]
    assert rounds_within(reads, 5) == [p(1, 2, 3), p(2, 4), p(5)]
    assert rounds_within(reads, 99) == reads


@pytest.mark.parametrize("n", range(0, 8))
def test_rounds_within_never_exceeds_the_budget_and_keeps_order(n: int) -> None:
    for sizes in itertools.product(range(0, 4), repeat=3):
        pages = iter(range(1, 20))
        reads = [[PageRef("d", next(pages)) for _ in range(s)] for s in sizes]
        cut = rounds_within(reads, n)
        flat = [ref for r in cut for ref in r]
        assert flat == [ref for r in reads for ref in r][: min(n, sum(sizes))]
        assert all(cut_round for cut_round in cut)  # no empty request is counted


def test_question_cost_pays_every_page_shown_and_each_request() -> None:
    run = QuestionRun("e", "a", reads=[p(1, 2, 3), p(2, 4), []], llm_calls=7)
    at_stop = question_cost(run, ESTIMATE)
    assert (at_stop.pages_read, at_stop.pages_shown, at_stop.requests) == (4, 5, 2)
    assert at_stop.tokens == 2 * 10 + 5 * 100 and at_stop.llm_calls == 7
    first3 = question_cost(run, ESTIMATE, 3)
    assert (first3.pages_read, first3.requests, first3.tokens) == (3, 1, 10 + 300)


def test_mean_cost_covers_page_scored_questions_only() -> None:
    items = {
        "a": QAItem("a", "d.pdf", "q", "x", (1,), "Str"),
        "u": QAItem("u", "d.pdf", "q", "Not answerable", (), "None"),
    }
    runs = [
        QuestionRun("e", "a", reads=[p(1, 2)]),
        QuestionRun("e", "u", reads=[p(1, 2), p(3, 4)]),
    ]
    cost = mean_cost(runs, items, ESTIMATE)
    assert cost["pages_read"] == 2 and cost["requests"] == 1 and cost["tokens"] == 210
    assert mean_cost([], items, ESTIMATE)["tokens"] == 0.0


def test_estimate_is_validated() -> None:
    with pytest.raises(ValueError, match=">= 0"):
        TokenEstimate(per_page=-1, per_request=0, source="x")


ITEMS = [QAItem("a", "d.pdf", "q", "x", (1, 4), "Str"), QAItem("b", "d.pdf", "q", "y", (9,), "Str")]
SETTINGS = {"k": 2, "rounds": 2, "fn": 0.2, "fp": 0.05, "split": "tune", "stop": {"mode": "noisy"}}
RUNS = {
    0: {
        "docmemo": [  # a stops after one round with both gold pages; b reads 4 and misses
            QuestionRun("docmemo", "a", reads=[p(1, 4)]),
            QuestionRun("docmemo", "b", reads=[p(1, 2), p(3, 5)]),
        ],
        "static-paged": [
            QuestionRun("static-paged", "a", reads=[p(1, 2), p(3, 4)]),
            QuestionRun("static-paged", "b", reads=[p(9, 2)]),
        ],
    }
}


def test_report_has_cost_at_the_stop_and_on_the_curve(tmp_path: Path) -> None:
    report = write_report(
        tmp_path,
        dataset="tiny",
        reader="simulated",
        items=ITEMS,
        runs=RUNS,
        settings=SETTINGS,
        estimate=ESTIMATE,
    )
    docmemo, paged = report["engines"]["docmemo"], report["engines"]["static-paged"]
    assert docmemo["cost"]["pages_read"] == 3.0 and docmemo["cost"]["requests"] == 1.5
    assert docmemo["cost"]["tokens"] == (210 + 420) / 2
    assert docmemo["cost"]["all_hit"] == 0.5 and paged["cost"]["all_hit"] == 1.0
    # at a 2-page budget static-paged has found only b; its a needs the second request
    assert [c["requests"] for c in paged["curve"]] == [1.0, 1.5]
    assert [c["tokens"] for c in paged["curve"]] == [210.0, 315.0]
    assert [c["pages_read"] for c in docmemo["curve"]] == [2.0, 3.0]
    assert report["token_estimate"] == {"per_page": 100, "per_request": 10, "source": "test"}
    md = (tmp_path / "report.md").read_text()
    assert "## Cost per question at the stop (simulated reader)" in md
    assert "| docmemo | 3.0 | 1.50 | 0.00 | 315 | 50.0" in md
    assert "10 a request + 100 a page shown (test)" in md


@pytest.mark.parametrize(
    ("model", "image"), [("gpt-4o", 765), ("Qwen/Qwen2.5-VL-7B-Instruct", 2214)]
)
def test_token_estimate_prices_a_page_by_the_models_image_rule(model: str, image: int) -> None:
    from llama_index_docmemo.evaluation.cost import PAGE_TEXT_TOKENS, token_estimate

    estimate = token_estimate(model)
    assert estimate.per_page == image + PAGE_TEXT_TOKENS
    assert model in estimate.source and str(image) in estimate.source
