"""report.json shape (issue 5), report.md's two views and simulated label, PNG plots."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from llama_index_docmemo.evaluation.datasets import QAItem
from llama_index_docmemo.evaluation.metrics import QuestionRun
from llama_index_docmemo.evaluation.report import write_report
from llama_index_docmemo.types import PageRef

ITEMS = [
    QAItem("a", "d.pdf", "q", "Blue", (1, 2), "Str"),
    QAItem("b", "d.pdf", "q", "Not answerable", (), "None"),
]
RUNS = {
    "docmemo": [
        QuestionRun(
            "docmemo",
            "a",
            reads=[[PageRef("d.pdf", 1)], [PageRef("d.pdf", 2)]],
            answer="blue",
            llm_calls=2,
        ),
        QuestionRun("docmemo", "b", reads=[[PageRef("d.pdf", 3)]], answer="Not answerable"),
    ],
    "static": [
        QuestionRun(
            "static", "a", reads=[[PageRef("d.pdf", 1), PageRef("d.pdf", 5)]], answer="red"
        ),
        QuestionRun("static", "b", reads=[[PageRef("d.pdf", 3)]], answer="Not answerable"),
    ],
}
SETTINGS = {"k": 5, "rounds": 2, "seed": 0, "fn": 0.2, "fp": 0.05}


def test_report_json_has_the_issue_shape(tmp_path: Path) -> None:
    report = write_report(
        tmp_path, dataset="tiny", reasoner="offline", items=ITEMS, runs=RUNS, settings=SETTINGS
    )
    on_disk = json.loads((tmp_path / "report.json").read_text())
    assert on_disk == report
    assert set(report) == {"dataset", "reasoner", "n_questions", "engines"}
    assert report["n_questions"] == 2
    keys = {
        "evidence_recall",
        "all_hit",
        "pages_read",
        "rounds",
        "llm_calls",
        "seconds_per_question",
        "accuracy",
        "per_round",
    }
    for entry in report["engines"].values():
        assert set(entry) == keys
        assert [set(r) for r in entry["per_round"]] == [{"round", "evidence_recall", "all_hit"}] * 2
    dm, st = report["engines"]["docmemo"], report["engines"]["static"]
    assert dm["all_hit"] == 1.0 and st["all_hit"] == 0.0
    assert dm["per_round"][0]["evidence_recall"] == 0.5
    assert st["per_round"][1]["evidence_recall"] == 0.5  # one-round engine carries its value
    assert dm["accuracy"] == 1.0 and st["accuracy"] == 0.5
    md = (tmp_path / "report.md").read_text()
    assert "## Equal budget of pages read" in md and "## Per round at fixed k" in md
    assert "simulated" not in md
    assert "| docmemo | 100.0 | 100.0 | +100.0 |" in md


def test_simulated_reports_are_labelled_and_have_no_accuracy(tmp_path: Path) -> None:
    report = write_report(
        tmp_path, dataset="tiny", reasoner="simulated", items=ITEMS, runs=RUNS, settings=SETTINGS
    )
    assert all(e["accuracy"] is None for e in report["engines"].values())
    md = (tmp_path / "report.md").read_text()
    assert "(simulated reasoner)" in md.splitlines()[0]
    assert md.count("simulated reasoner") >= 3  # title and both views


def test_plots_are_written(tmp_path: Path) -> None:
    pytest.importorskip("matplotlib")
    from llama_index_docmemo.evaluation.plots import write_plots

    report = write_report(
        tmp_path, dataset="tiny", reasoner="simulated", items=ITEMS, runs=RUNS, settings=SETTINGS
    )
    for path in write_plots(report, tmp_path):
        assert path.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
