"""report.json shape (issue 10): curves with intervals, paired tests vs DocMemo, labels; PNG plots."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from llama_index_docmemo.evaluation.curves import budgets, curve, paired, reader_rates
from llama_index_docmemo.evaluation.datasets import QAItem
from llama_index_docmemo.evaluation.metrics import QuestionRun
from llama_index_docmemo.evaluation.report import write_report
from llama_index_docmemo.types import PageRef


def p(*pages: int) -> list[PageRef]:
    return [PageRef("d.pdf", n) for n in pages]


ITEMS = [
    QAItem("a", "d.pdf", "q", "Blue", (1, 2), "Str"),
    QAItem("b", "d.pdf", "q", "Red", (7,), "Str"),
    QAItem("c", "d.pdf", "q", "Not answerable", (), "None"),
]
BY_QID = {i.qid: i for i in ITEMS}
RUNS = {
    0: {
        "docmemo": [
            QuestionRun("docmemo", "a", reads=[p(1), p(2)], answer="blue", useful=p(1, 2)),
            QuestionRun("docmemo", "b", reads=[p(3), p(7)], answer="red", useful=p(3)),
            QuestionRun("docmemo", "c", reads=[p(3), p(4)], answer="Not answerable"),
        ],
        "static@1": [
            QuestionRun("static@1", "a", reads=[p(1)], answer="red"),
            QuestionRun("static@1", "b", reads=[p(7)], answer="red", useful=p(7)),
            QuestionRun("static@1", "c", reads=[p(3)], answer="Not answerable"),
        ],
    },
    1: {
        "docmemo": [
            QuestionRun("docmemo", "a", reads=[p(1), p(5)], answer="blue"),
            QuestionRun("docmemo", "b", reads=[p(7), p(3)], answer="red"),
            QuestionRun("docmemo", "c", reads=[p(3), p(4)], answer="x"),
        ],
        "static@1": [
            QuestionRun("static@1", "a", reads=[p(2)], answer="red"),
            QuestionRun("static@1", "b", reads=[p(7)], answer="red"),
            QuestionRun("static@1", "c", reads=[p(3)], answer="x"),
        ],
    },
}
SETTINGS = {
    "k": 1,
    "rounds": 2,
    "fn": 0.2,
    "fp": 0.05,
    "split": "report",
    "stop": {"mode": "never"},
}


def test_curve_counts_the_first_n_pages_and_averages_seeds() -> None:
    assert budgets(5, 3) == [5, 10, 15]
    dm = curve(RUNS, "docmemo", BY_QID, [1, 2])
    # after 1 page: a never all-hit; b hit in seed 1 only -> per-question means (0, .5) -> .25
    assert dm[0]["all_hit"] == pytest.approx(0.25) and dm[0]["n"] == 2
    # after 2 pages: a hit in seed 0 only, b in both -> (.5, 1) -> .75
    assert dm[1]["all_hit"] == pytest.approx(0.75)
    assert dm[1]["per_seed"]["all_hit"] == [1.0, 0.5]
    assert dm[1]["recall"] == pytest.approx((0.75 + 1.0) / 2)
    lo, hi = dm[1]["all_hit_ci"]
    assert lo <= 0.75 <= hi
    st = curve(RUNS, "static@1", BY_QID, [1, 2])
    assert st[1]["all_hit"] == st[0]["all_hit"] == 0.5 and st[1]["pages_read"] == 1.0


def test_paired_counts_question_seed_pairs() -> None:
    result = paired(RUNS, "static@1", BY_QID, 2)
    assert result is not None
    # seed 0: a docmemo only; seed 1: b both; a neither -> docmemo_only 1, baseline_only 0
    assert (result["docmemo_only"], result["baseline_only"]) == (1, 0)
    assert result["diff"] == pytest.approx(0.75 - 0.5)
    assert result["per_seed_diff"] == [0.5, 0.0]


def test_reader_rates_are_measured_against_gold() -> None:
    rates = reader_rates(RUNS[0]["docmemo"], BY_QID)
    # gold read: a1, a2, b7 -> b7 not labelled useful: fn 1/3; others: b3, c3, c4 -> b3 useful
    assert rates.fn == pytest.approx(1 / 3) and rates.fp == pytest.approx(1 / 3)
    assert (rates.gold_read, rates.other_read) == (3, 3)


def test_report_json_has_the_issue_shape(tmp_path: Path) -> None:
    report = write_report(
        tmp_path, dataset="tiny", reasoner="offline", items=ITEMS, runs=RUNS, settings=SETTINGS
    )
    assert json.loads((tmp_path / "report.json").read_text()) == report
    assert report["split"] == "report" and report["seeds"] == [0, 1]
    assert report["stop"]["label"] == "fixed budget (no early stop)"
    for entry in report["engines"].values():
        assert [c["pages"] for c in entry["curve"]] == [1, 2]
        for point in entry["curve"]:
            assert {"pages", "all_hit", "all_hit_ci", "recall", "recall_ci"} <= set(point)
    assert "paired_vs_docmemo" not in report["engines"]["docmemo"]
    pair = report["engines"]["static@1"]["paired_vs_docmemo"]
    assert {"diff", "ci", "docmemo_only", "baseline_only"} <= set(pair)
    assert pair["diff"] == pytest.approx(0.25) and len(pair["per_budget"]) == 2
    md = (tmp_path / "report.md").read_text()
    assert "Split: **report**" in md and "## All-hit after n pages read" in md
    assert "| static@1 |" in md and "docmemo_only" in md
    assert "simulated" not in md


def test_simulated_and_oracle_reports_are_labelled(tmp_path: Path) -> None:
    settings = {**SETTINGS, "stop": {"mode": "oracle"}}
    report = write_report(
        tmp_path, dataset="tiny", reasoner="simulated", items=ITEMS, runs=RUNS, settings=settings
    )
    assert all(e["accuracy"] is None for e in report["engines"].values())
    assert report["stop"]["label"] == "upper bound (oracle stop)"
    md = (tmp_path / "report.md").read_text()
    assert "(simulated reader)" in md.splitlines()[0]
    assert "UPPER BOUND (ORACLE STOP)" in md.splitlines()[0] and "upper bound" in md


def test_plots_are_written(tmp_path: Path) -> None:
    pytest.importorskip("matplotlib")
    from llama_index_docmemo.evaluation.plots import plot_reader_map, write_plots

    report = write_report(
        tmp_path, dataset="tiny", reasoner="simulated", items=ITEMS, runs=RUNS, settings=SETTINGS
    )
    cells = [
        {"fn": fn, "fp": fp, "gain_vs_static_paged": 0.01 * fn, "gain_vs_neighbours": -0.01}
        for fn in (0.0, 0.2)
        for fp in (0.0, 0.1)
    ]
    paths = [*write_plots(report, tmp_path), plot_reader_map(cells, tmp_path / "m.png", title="t")]
    for path in paths:
        assert path.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
