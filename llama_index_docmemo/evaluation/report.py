"""``report.json`` and ``report.md``: fixed-budget curves with intervals, paired tests against DocMemo.

Shape of ``report.json`` (one entry per engine)::

    {"dataset", "reader", "split", "stop": {"mode", "label", ...}, "seeds", "k", "rounds", ...,
     "engines": {name: {"curve": [{"pages", "all_hit", "all_hit_ci", "recall", "recall_ci", ...}],
                        "paired_vs_docmemo": {"diff", "ci", "docmemo_only", "baseline_only",
                                              "per_budget": [...]},   # non-DocMemo engines
                        "reader_rates": {"fn", "fp", ...}, "pages_read", "llm_calls", ...,
                        "cost": {"pages_read", "requests", "llm_calls", "tokens", "all_hit",
                                 "all_hit_ci"}}},     # at the stop
     "token_estimate": {"per_page", "per_request", "source"}}

Each curve point also carries the mean ``requests`` and estimated ``tokens`` an engine spent on
its first n pages: all-hit against pages read and against tokens is the accuracy-per-cost curve.
"""

from __future__ import annotations

import json
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

from llama_index_docmemo.evaluation.cost import TokenEstimate, mean_cost, token_estimate
from llama_index_docmemo.evaluation.curves import (
    SeedRuns,
    budgets,
    curve,
    paired,
    question_scores,
    reader_rates,
)
from llama_index_docmemo.evaluation.datasets import QAItem
from llama_index_docmemo.evaluation.documents import document_summary
from llama_index_docmemo.evaluation.metrics import summarize
from llama_index_docmemo.evaluation.stats import LEVEL, N_BOOT, bootstrap_ci
from llama_index_docmemo.evaluation.stopping import stop_label

SIMULATED = "simulated"
REFERENCE = "docmemo"
INTERVAL_NOTE = (
    f"{int(LEVEL * 100)}% percentile bootstrap over questions ({N_BOOT} resamples); with several "
    "seeds a question's value is its mean over the seeds before resampling"
)
PAIRED_NOTE = (
    "diff = DocMemo all-hit minus the engine's, on the same questions, with a paired bootstrap "
    "interval; docmemo_only / baseline_only count (question, seed) pairs where only that engine "
    "read every gold page"
)


def _rates_entry(runs: Sequence[Any], by_qid: Mapping[str, QAItem]) -> dict[str, Any]:
    rates = reader_rates(runs, by_qid)
    return {
        "fn": rates.fn,
        "fp": rates.fp,
        "gold_pages_read": rates.gold_read,
        "other_pages_read": rates.other_read,
    }


def _cost_entry(
    runs: SeedRuns,
    name: str,
    pooled: Sequence[Any],
    by_qid: Mapping[str, QAItem],
    estimate: TokenEstimate,
) -> dict[str, Any]:
    """Mean cost per question at the stop, with the all-hit it bought (and its interval)."""
    hit = question_scores(runs, name, by_qid, None).hit.mean(axis=1)
    cost = mean_cost(pooled, by_qid, estimate)
    return {
        **{key: cost[key] for key in ("pages_read", "requests", "llm_calls", "tokens")},
        "all_hit": float(hit.mean()) if hit.size else None,
        "all_hit_ci": list(bootstrap_ci(hit)) if hit.size else None,
    }


def build_report(
    *,
    dataset: str,
    reader: str,
    items: Sequence[QAItem],
    runs: SeedRuns,
    settings: Mapping[str, Any],
    estimate: TokenEstimate | None = None,
) -> dict[str, Any]:
    """The report of runs over one or more seeds (``runs[seed][engine]``).

    Accuracy is null for the simulated reader (its answers are not real); ``estimate`` prices
    a reader request in prompt tokens (default: :func:`.cost.token_estimate` for gpt-4o).
    """
    estimate = estimate or token_estimate()
    by_qid = {item.qid: item for item in items}
    k, rounds = int(settings["k"]), int(settings["rounds"])
    points = budgets(k, rounds)
    engines: list[str] = list(dict.fromkeys(name for seed in runs for name in runs[seed]))
    stop = dict(settings.get("stop") or {"mode": "never"})
    stop["label"] = stop_label(str(stop["mode"]))
    report: dict[str, Any] = {
        "dataset": dataset,
        "reader": reader,
        "split": settings.get("split", "all"),
        "scope": settings.get("scope", "document"),
        "stop": stop,
        "seeds": sorted(runs),
        "k": k,
        "rounds": rounds,
        "fn": settings.get("fn"),
        "fp": settings.get("fp"),
        "n_questions": len(items),
        "n_page_scored": sum(1 for item in items if item.scored_on_pages),
        "interval": INTERVAL_NOTE,
        "token_estimate": {
            "per_page": estimate.per_page,
            "per_request": estimate.per_request,
            "source": estimate.source,
        },
        "engines": {},
    }
    if reader == SIMULATED:
        report["reader_note"] = "simulated reader: pages labelled from the gold evidence"
    for name in engines:
        pooled = [run for seed in sorted(runs) for run in runs[seed].get(name, ())]
        metrics = summarize(pooled, by_qid, n_rounds=rounds, score_answers=reader != SIMULATED)
        points_cost = [mean_cost(pooled, by_qid, estimate, n) for n in points]
        entry: dict[str, Any] = {
            "curve": [
                {**c, "requests": cost["requests"], "tokens": cost["tokens"]}
                for c, cost in zip(curve(runs, name, by_qid, points), points_cost, strict=True)
            ],
            "evidence_recall": metrics.evidence_recall,
            "all_hit": metrics.all_hit,
            "pages_read": metrics.pages_read,
            "rounds": metrics.rounds,
            "llm_calls": metrics.llm_calls,
            "seconds_per_question": metrics.seconds_per_question,
            "accuracy": metrics.accuracy,
            "reader_rates": _rates_entry(pooled, by_qid),
            "cost": _cost_entry(runs, name, pooled, by_qid, estimate),
            "documents": document_summary(
                [runs[seed].get(name, ()) for seed in sorted(runs)], by_qid
            ),
        }
        if name != REFERENCE and REFERENCE in engines:
            per_budget = [paired(runs, name, by_qid, n) for n in points]
            full = per_budget[-1]
            if full is not None:
                entry["paired_vs_docmemo"] = {
                    **{key: full[key] for key in ("diff", "ci", "docmemo_only", "baseline_only")},
                    "pages": full["pages"],
                    "n_questions": full["n_questions"],
                    "per_seed_diff": full["per_seed_diff"],
                    "per_budget": [p for p in per_budget if p is not None],
                }
        report["engines"][name] = entry
    if engines:
        main = REFERENCE if REFERENCE in engines else engines[0]
        pooled = [run for seed in sorted(runs) for run in runs[seed].get(main, ())]
        report["reader_rates"] = {"engine": main, **_rates_entry(pooled, by_qid)}
    report["paired_note"] = PAIRED_NOTE
    return report


def _pct(value: float | None) -> str:
    return "—" if value is None else f"{100 * value:.1f}"


def _ci(interval: Sequence[float] | None) -> str:
    if not interval:
        return ""
    return f" [{100 * interval[0]:.1f}, {100 * interval[1]:.1f}]"


def _signed(value: float | None) -> str:
    return "—" if value is None else f"{100 * value:+.1f}"


def _cost_lines(report: Mapping[str, Any], label: str) -> list[str]:
    """Cost per question at the stop and the all-hit it bought (the accuracy-per-cost view)."""
    estimate = report["token_estimate"]
    lines = [
        f"## Cost per question at the stop{label}",
        "",
        "Means over the page-scored questions. Requests: rounds that showed the reader pages (one "
        "reader request each); LLM calls: measured (0 when no LLM reads); tokens: estimated "
        f"prompt tokens, {estimate['per_request']} a request + {estimate['per_page']} a page shown "
        f"({estimate['source']}). `curves.png` plots all-hit against pages read and tokens.",
        "",
        "| engine | pages read | requests | LLM calls | est. tokens | all-hit at the stop |",
        "|---|---|---|---|---|---|",
    ]
    for name, e in report["engines"].items():
        c = e["cost"]
        lines.append(
            f"| {name} | {c['pages_read']:.1f} | {c['requests']:.2f} | {c['llm_calls']:.2f} | "
            f"{c['tokens']:,.0f} | {_pct(c['all_hit'])}{_ci(c['all_hit_ci'])} |"
        )
    lines.append("")
    return lines


def _mean_cell(entry: Mapping[str, Any], percent: bool = True) -> str:
    mean = entry["mean"]
    if mean is None:
        return "—"
    if percent:
        return f"{_pct(mean)}{_ci(entry['ci'])}"
    low, high = entry["ci"]
    return f"{mean:.2f} [{low:.2f}, {high:.2f}]"


def _document_lines(report: Mapping[str, Any], label: str) -> list[str]:
    """Did each engine find the right document (``evaluation/documents.py``)."""
    lines = [
        f"## Documents{label}",
        "",
        f"Scope: **{report.get('scope', 'document')}** (`corpus`: every question is asked of "
        "the whole store; `document`: of its own document). Right document: a page of the "
        "gold document read in round 1; document / page F1 of the evidence (pages labelled "
        "useful) against the gold document / pages (MADQA's definitions); pages before the "
        "first gold page, over the runs that read one (never: the share that read none).",
        "",
        "| engine | right document in round 1 | documents read | document F1 | page F1 "
        "| pages before the first gold | never |",
        "|---|---|---|---|---|---|---|",
    ]
    for name, e in report["engines"].items():
        d = e["documents"]
        first, never = d["pages_to_first_gold"], d["never_gold"]
        lines.append(
            f"| {name} | {_mean_cell(d['right_document_round1'])} | "
            f"{_mean_cell(d['documents_read'], percent=False)} | {_mean_cell(d['document_f1'])} | "
            f"{_mean_cell(d['page_f1'])} | {'—' if first is None else f'{first:.1f}'} | "
            f"{_pct(never)} |"
        )
    lines.append("")
    siblings = report.get("siblings")
    if siblings:
        lines += [
            f"Another document could answer {siblings['answerable_elsewhere']} of the "
            f"{siblings['decidable']} questions whose gold pages print figures enough to tell "
            f"(of {siblings['questions']}): one page of it reprints at least half of each gold "
            "page's 4+-digit figures (`evaluation/siblings.py`; gold stays the named document, "
            "so an engine reading the sibling scores no hit).",
            "",
        ]
    return lines


def render_markdown(report: Mapping[str, Any], *, settings: Mapping[str, Any]) -> str:
    """Curves, paired tests and reader rates as Markdown tables, labelled by reader and stop rule."""
    engines: Mapping[str, Mapping[str, Any]] = report["engines"]
    simulated = report["reader"] == SIMULATED
    stop = report["stop"]
    label = " (simulated reader)" if simulated else ""
    oracle = stop["mode"] == "oracle"
    title_stop = f" — {stop['label'].upper()}" if oracle else ""
    lines = [
        f"# DocMemo evaluation — {report['dataset']}{label}{title_stop}",
        "",
        f"Split: **{report['split']}** (documents by the fixed SHA-256 rule of "
        "`evaluation.datasets.split_of`). "
        f"Reader: **{report['reader']}**"
        + (
            f" — pages labelled from the gold evidence with fn={report['fn']}, fp={report['fp']}; "
            "no query refinement. Numbers measure page finding, not answer quality."
            if simulated
            else "."
        ),
        "",
        f"Stop rule: **{stop['label']}**"
        + (
            f" (p_early={stop.get('p_early')}, p_miss={stop.get('p_miss')})"
            if stop["mode"] == "noisy"
            else ""
        )
        + (
            ". The stop sees the gold labels: these numbers are an upper bound, not a comparison."
            if oracle
            else "."
        ),
        "",
        f"Questions: {report['n_questions']}; page metrics over {report['n_page_scored']} with valid, "
        f"non-empty gold evidence. k={report['k']} pages a round, T={report['rounds']} rounds, "
        f"seeds {', '.join(map(str, report['seeds']))}. Intervals: {report['interval']}.",
        "",
    ]
    points = [p["pages"] for p in next(iter(engines.values()), {}).get("curve", [])]
    for key, title in (("all_hit", "All-hit"), ("recall", "Evidence recall")):
        lines += [
            f"## {title} after n pages read{label}",
            "",
            "| engine | " + " | ".join(f"{n} pages" for n in points) + " | pages read |",
            "|---|" + "---|" * (len(points) + 1),
        ]
        for name, e in engines.items():
            cells = " | ".join(f"{_pct(c[key])}{_ci(c[f'{key}_ci'])}" for c in e["curve"])
            lines.append(f"| {name} | {cells} | {e['pages_read']:.1f} |")
        lines.append("")
    paired_rows = [
        (n, e["paired_vs_docmemo"]) for n, e in engines.items() if "paired_vs_docmemo" in e
    ]
    if paired_rows:
        lines += [
            f"## DocMemo vs each engine, all-hit{label}",
            "",
            f"{report.get('paired_note', PAIRED_NOTE)}.",
            "",
            "| engine | "
            + " | ".join(f"diff at {n} [95% CI]" for n in points)
            + " | docmemo_only | baseline_only |",
            "|---|" + "---|" * (len(points) + 2),
        ]
        for name, p in paired_rows:
            by_pages = {q["pages"]: q for q in p["per_budget"]}
            cells = " | ".join(
                f"{_signed(by_pages[n]['diff'])}{_ci(by_pages[n]['ci'])}" if n in by_pages else "—"
                for n in points
            )
            lines.append(f"| {name} | {cells} | {p['docmemo_only']} | {p['baseline_only']} |")
        lines.append("")
    lines += [
        "## Cost and reader labels",
        "",
        "fn = share of the gold pages read that the reader did not label useful; fp = share of the "
        "other pages read that it labelled useful (questions with valid labels).",
        "",
        "| engine | pages read | rounds | LLM calls | s/question | accuracy | measured fn | measured fp |",
        "|---|---|---|---|---|---|---|---|",
    ]
    for name, e in engines.items():
        rates = e["reader_rates"]
        lines.append(
            f"| {name} | {e['pages_read']:.1f} | {e['rounds']:.2f} | {e['llm_calls']:.2f} | "
            f"{e['seconds_per_question']:.3f} | {_pct(e['accuracy'])} | {_pct(rates['fn'])} | "
            f"{_pct(rates['fp'])} |"
        )
    lines.append("")
    lines += _document_lines(report, label)
    lines += _cost_lines(report, label)
    if settings.get("config"):
        lines += [f"DocMemo overrides: `{json.dumps(settings['config'])}`", ""]
    return "\n".join(lines)


def render_grounding(grounding: Mapping[str, Any]) -> str:
    """The complete-evidence-chain section of ``report.md``."""
    lines = [
        "",
        "## Box grounding (simulated reader)",
        "",
        f"Questions with gold evidence boxes of Table/Chart/Figure evidence: {grounding['n_questions']}. "
        "Each round's pages get the crops the crop ranking keeps (same caps for every engine); the "
        "simulated reader labels a crop covering a gold box (IoU >= "
        f"{grounding['cover_iou']}) useful with probability 1 - fn, any other with probability fp. "
        "Complete chain: the crops labelled useful cover every gold box of the question.",
        "",
        "| engine | complete evidence chain [95% CI] | questions |",
        "|---|---|---|",
    ]
    for name, e in grounding["engines"].items():
        lines.append(f"| {name} | {_pct(e['complete_chain'])}{_ci(e['ci'])} | {e['n']} |")
    return "\n".join(lines) + "\n"


def write_report(
    out_dir: str | Path,
    *,
    dataset: str,
    reader: str,
    items: Sequence[QAItem],
    runs: SeedRuns,
    settings: Mapping[str, Any],
    judge_accuracy: Mapping[str, float] | None = None,
    judge: str | None = None,
    estimate: TokenEstimate | None = None,
    grounding: Mapping[str, Any] | None = None,
    siblings: Mapping[str, Any] | None = None,
) -> dict[str, Any]:
    """Write ``report.json`` and ``report.md`` into ``out_dir``; returns the report.

    ``siblings`` (:func:`.siblings.sibling_count`, whole-store runs) goes to ``report.json``'s
    ``siblings`` and a line of the Documents section.

    ``judge_accuracy`` (judged by the model ``judge``) goes to ``judge.json`` and a section of
    ``report.md``; ``grounding`` (:func:`.grounding.grounding_report`) to ``report.json``'s
    ``grounding`` and a section of ``report.md``.
    """
    out = Path(out_dir)
    out.mkdir(parents=True, exist_ok=True)
    report = build_report(
        dataset=dataset,
        reader=reader,
        items=items,
        runs=runs,
        settings=settings,
        estimate=estimate,
    )
    if grounding is not None:
        report["grounding"] = dict(grounding)
    if siblings is not None:
        report["siblings"] = dict(siblings)
    (out / "report.json").write_text(json.dumps(report, indent=2) + "\n", encoding="utf-8")
    markdown = render_markdown(report, settings=settings)
    if grounding is not None:
        markdown += render_grounding(grounding)
    if judge_accuracy is not None:
        (out / "judge.json").write_text(
            json.dumps({"judge": judge, "accuracy": judge_accuracy}, indent=2) + "\n",
            encoding="utf-8",
        )
        markdown += (
            f"\n## Judged accuracy (judge: {judge}; LlamaIndex CorrectnessEvaluator, numeric and "
            "'Not answerable' answers by exact rules)\n\n| engine | judged accuracy |\n|---|---|\n"
        )
        markdown += "".join(f"| {n} | {_pct(v)} |\n" for n, v in judge_accuracy.items())
    (out / "report.md").write_text(markdown, encoding="utf-8")
    return report
