"""``report.json`` and ``report.md`` from the runs: per round at fixed k, and at equal budget of pages read."""

from __future__ import annotations

import json
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

from llama_index_docmemo.evaluation.datasets import QAItem
from llama_index_docmemo.evaluation.metrics import EngineMetrics, QuestionRun, summarize

SIMULATED = "simulated"


def engine_entry(metrics: EngineMetrics) -> dict[str, Any]:
    """One engine's entry of ``report.json``."""
    return {
        "evidence_recall": metrics.evidence_recall,
        "all_hit": metrics.all_hit,
        "pages_read": metrics.pages_read,
        "rounds": metrics.rounds,
        "llm_calls": metrics.llm_calls,
        "seconds_per_question": metrics.seconds_per_question,
        "accuracy": metrics.accuracy,
        "per_round": [
            {"round": r.round, "evidence_recall": r.evidence_recall, "all_hit": r.all_hit}
            for r in metrics.per_round
        ],
    }


def build_report(
    *,
    dataset: str,
    reasoner: str,
    items: Sequence[QAItem],
    runs: Mapping[str, Sequence[QuestionRun]],
    n_rounds: int,
) -> dict[str, Any]:
    """The report in the shape of issue 5: dataset, reasoner, n_questions, engines{name: metrics}.

    Accuracy is null for the simulated reasoner (its answers are not real).
    """
    by_qid = {item.qid: item for item in items}
    engines = {
        name: summarize(engine_runs, by_qid, n_rounds=n_rounds, score_answers=reasoner != SIMULATED)
        for name, engine_runs in runs.items()
    }
    return {
        "dataset": dataset,
        "reasoner": reasoner,
        "n_questions": len(items),
        "engines": {name: engine_entry(m) for name, m in engines.items()},
    }


def _pct(value: float | None) -> str:
    return "—" if value is None else f"{100 * value:.1f}"


def render_markdown(
    report: Mapping[str, Any],
    *,
    n_scored: int,
    n_excluded: int,
    settings: Mapping[str, Any],
    judge_accuracy: Mapping[str, float] | None = None,
) -> str:
    """Both views as Markdown tables, labelled "simulated" when the simulated reasoner was used."""
    engines: Mapping[str, Mapping[str, Any]] = report["engines"]
    simulated = report["reasoner"] == SIMULATED
    label = " (simulated reasoner)" if simulated else ""
    lines = [
        f"# DocMemo evaluation — {report['dataset']}{label}",
        "",
        f"Reasoner: **{report['reasoner']}**"
        + (
            " — pages labelled from the gold evidence with "
            f"fn={settings.get('fn')}, fp={settings.get('fp')}; no query refinement. "
            "Numbers isolate the retrieval state; they are not answer quality."
            if simulated
            else ""
        ),
        "",
        f"Questions: {report['n_questions']}; page metrics over {n_scored} with valid, non-empty gold "
        f"evidence ({n_excluded} excluded: unanswerable or evidence_valid=false). "
        f"k={settings.get('k')} pages a round, T={settings.get('rounds')} rounds, seed={settings.get('seed')}.",
        "",
        f"## Equal budget of pages read{label}",
        "",
        "`static` and `llamaindex-topk` read, for each question, as many pages as `docmemo` read; "
        "every Δ is against that `static` run (ablations read about as many pages: see the column).",
        "",
        "| engine | evidence recall | all-hit | Δ all-hit vs static | pages read | rounds | LLM calls "
        "| s/question | accuracy |" + (" judge accuracy |" if judge_accuracy is not None else ""),
        "|---|---|---|---|---|---|---|---|---|" + ("---|" if judge_accuracy is not None else ""),
    ]
    static_hit = engines.get("static", {}).get("all_hit")
    for name, e in engines.items():
        delta = "—" if static_hit is None else f"{100 * (e['all_hit'] - static_hit):+.1f}"
        lines.append(
            f"| {name} | {_pct(e['evidence_recall'])} | {_pct(e['all_hit'])} | {delta} | "
            f"{e['pages_read']:.1f} | {e['rounds']:.2f} | {e['llm_calls']:.2f} | "
            f"{e['seconds_per_question']:.3f} | {_pct(e['accuracy'])} |"
            + (f" {_pct(judge_accuracy.get(name))} |" if judge_accuracy is not None else "")
        )
    n_rounds = max((len(e["per_round"]) for e in engines.values()), default=0)
    header = " | ".join(f"R{r} recall | R{r} all-hit" for r in range(1, n_rounds + 1))
    lines += [
        "",
        f"## Per round at fixed k{label}",
        "",
        f"Cumulative evidence recall and all-hit after each round (k={settings.get('k')} pages a round; "
        "a question that stopped early keeps its last value; one-round engines are flat).",
        "",
        f"| engine | {header} |",
        "|---|" + "---|" * (2 * n_rounds),
    ]
    for name, e in engines.items():
        cells = " | ".join(
            f"{_pct(r['evidence_recall'])} | {_pct(r['all_hit'])}" for r in e["per_round"]
        )
        lines.append(f"| {name} | {cells} |")
    lines.append("")
    return "\n".join(lines)


def write_report(
    out_dir: str | Path,
    *,
    dataset: str,
    reasoner: str,
    items: Sequence[QAItem],
    runs: Mapping[str, Sequence[QuestionRun]],
    settings: Mapping[str, Any],
    judge_accuracy: Mapping[str, float] | None = None,
) -> dict[str, Any]:
    """Write ``report.json`` and ``report.md`` into ``out_dir``; returns the report.

    ``judge_accuracy`` (from an LLM judge) goes to ``judge.json`` and a column of ``report.md``,
    keeping ``report.json`` in its fixed shape.
    """
    out = Path(out_dir)
    out.mkdir(parents=True, exist_ok=True)
    n_rounds = int(settings.get("rounds", 1))
    report = build_report(
        dataset=dataset, reasoner=reasoner, items=items, runs=runs, n_rounds=n_rounds
    )
    (out / "report.json").write_text(json.dumps(report, indent=2) + "\n", encoding="utf-8")
    n_scored = sum(1 for item in items if item.scored_on_pages)
    if judge_accuracy is not None:
        (out / "judge.json").write_text(
            json.dumps(judge_accuracy, indent=2) + "\n", encoding="utf-8"
        )
    markdown = render_markdown(
        report,
        n_scored=n_scored,
        n_excluded=len(items) - n_scored,
        settings=settings,
        judge_accuracy=judge_accuracy,
    )
    (out / "report.md").write_text(markdown, encoding="utf-8")
    return report
