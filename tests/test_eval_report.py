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
        tmp_path, dataset="tiny", reader="offline", items=ITEMS, runs=RUNS, settings=SETTINGS
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
        tmp_path, dataset="tiny", reader="simulated", items=ITEMS, runs=RUNS, settings=settings
    )
    assert all(e["accuracy"] is None for e in report["engines"].values())
    assert report["stop"]["label"] == "upper bound (oracle stop)"
    md = (tmp_path / "report.md").read_text()
    assert "(simulated reader)" in md.splitlines()[0]
    assert "UPPER BOUND (ORACLE STOP)" in md.splitlines()[0] and "upper bound" in md


def test_curves_plot_draws_each_engine_with_its_intervals(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    matplotlib = pytest.importorskip("matplotlib")
    from PIL import Image

    switched: list[object] = []
    monkeypatch.setattr(matplotlib, "use", lambda *a, **k: switched.append(a))
    from llama_index_docmemo.evaluation.plots import curves_figure, write_plots

    report = write_report(
        tmp_path, dataset="tiny", reader="simulated", items=ITEMS, runs=RUNS, settings=SETTINGS
    )
    fig = curves_figure(report)
    for ax, key in zip(fig.axes[:2], ("all_hit", "recall"), strict=True):
        assert [t.get_text() for t in fig.axes[1].get_legend().get_texts()] == [
            "docmemo",
            "static@1",
        ]
        for container, name in zip(ax.containers, ("docmemo", "static@1"), strict=True):
            line, _, (bars,) = container.lines
            points = report["engines"][name]["curve"]
            assert list(line.get_ydata()) == pytest.approx([c[key] for c in points])
            assert [round(x) for x in line.get_xdata()] == [c["pages"] for c in points]
            # each error bar spans the point's 95% interval
            spans = [v for segment in bars.get_segments() for v in sorted(segment[:, 1])]
            assert spans == pytest.approx([v for c in points for v in c[f"{key}_ci"]])
    (path,) = write_plots(report, tmp_path)
    assert not switched  # the host's matplotlib backend is never switched
    with Image.open(path) as image:
        assert image.format == "PNG"
        assert image.size == tuple(round(v * fig.dpi) for v in fig.get_size_inches())


def test_reader_map_puts_each_gain_in_its_fn_fp_cell() -> None:
    pytest.importorskip("matplotlib")
    from llama_index_docmemo.evaluation.plots import reader_map_figure

    cells = [
        {"fn": fn, "fp": fp, "gain_vs_static_paged": fn + fp / 10, "gain_vs_neighbours": -fp}
        for fn in (0.0, 0.2, 0.4)
        for fp in (0.0, 0.1)
    ]
    fig = reader_map_figure(cells, title="t")
    static_paged, neighbours = (ax.images[0].get_array() for ax in fig.axes[:2])
    assert static_paged.shape == (3, 2)  # rows: fn, columns: fp
    assert static_paged[2, 1] == pytest.approx(100 * (0.4 + 0.01))
    assert neighbours[1, 1] == pytest.approx(-10.0) and neighbours[2, 0] == pytest.approx(0.0)
