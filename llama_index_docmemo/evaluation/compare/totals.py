"""Totals of a comparison: per engine, and DocMemo minus each other engine on the same questions.

Every figure is a mean over questions with a 95% bootstrap interval over questions
(:mod:`..stats`); a difference between two engines is paired (the same resampled questions for
both). Judged figures carry the names of the judges that decided them. Pure functions over records.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from typing import Any

from llama_index_docmemo.evaluation.compare.records import AnswerRecord
from llama_index_docmemo.evaluation.stats import bootstrap_ci, paired_bootstrap

COSTS = ("llm_calls", "prompt_tokens", "completion_tokens", "images", "image_tokens", "seconds")
PAIRWISE_POINTS = {"win": 1.0, "tie": 0.5, "loss": 0.0}


def estimate(values: Sequence[float]) -> dict[str, Any]:
    """``{"mean", "ci", "n"}`` of per-question values (mean and ci None without values)."""
    if not values:
        return {"mean": None, "ci": None, "n": 0}
    return {
        "mean": sum(values) / len(values),
        "ci": list(bootstrap_ci(values)),
        "n": len(values),
    }


def _passing(record: AnswerRecord) -> float | None:
    verdict = record.correctness
    if verdict is None or verdict.get("passing") is None:
        return None
    return float(bool(verdict["passing"]))


def _verified_share(record: AnswerRecord) -> float | None:
    """The share of the answer's figures its citations verify (None: no figure)."""
    if not record.figures:
        return None
    return sum(f.verified for f in record.figures) / len(record.figures)


def _judges(records: Sequence[AnswerRecord]) -> list[str]:
    names = {
        str(r.correctness["judge"]) for r in records if r.correctness and _passing(r) is not None
    }
    return sorted(names)


def engine_totals(records: Sequence[AnswerRecord]) -> dict[str, Any]:
    """One engine's totals over its answered questions."""
    answered = [r for r in records if r.error is None]
    passing = [v for v in map(_passing, answered) if v is not None]
    shares = [v for v in map(_verified_share, answered) if v is not None]
    return {
        "questions": len(records),
        "answered": len(answered),
        "errors": len(records) - len(answered),
        "correct": {**estimate(passing), "judged_by": _judges(answered)},
        "figures": sum(len(r.figures) for r in answered),
        "figures_verified": sum(f.verified for r in answered for f in r.figures),
        "figures_verified_share": estimate(shares),
        "cost": {name: estimate([float(getattr(r, name)) for r in answered]) for name in COSTS},
        "requests_without_usage": sum(r.requests_without_usage for r in answered),
    }


def _paired(
    ref: Mapping[str, AnswerRecord],
    other: Mapping[str, AnswerRecord],
    value: Callable[[AnswerRecord], float | None],
) -> dict[str, Any]:
    pairs = [
        (value(ref[q]), value(other[q]))
        for q in ref
        if q in other and ref[q].error is None and other[q].error is None
    ]
    kept = [(a, b) for a, b in pairs if a is not None and b is not None]
    if not kept:
        return {"diff": None, "ci": None, "n": 0}
    result = paired_bootstrap([a for a, _ in kept], [b for _, b in kept])
    return {"diff": result.diff, "ci": list(result.ci), "n": result.n}


def pairwise_totals(ref: Mapping[str, AnswerRecord], other_engine: str) -> dict[str, Any]:
    """Wins, ties and losses of the reference engine against ``other_engine`` (judged in both
    orders), and its win rate (a tie is half a win) with a bootstrap interval."""
    results = [r.pairwise[other_engine] for r in ref.values() if other_engine in r.pairwise]
    outcomes = [str(v["result"]) for v in results]
    return {
        "win": outcomes.count("win"),
        "tie": outcomes.count("tie"),
        "loss": outcomes.count("loss"),
        "win_rate": estimate([PAIRWISE_POINTS[o] for o in outcomes]),
        "judged_by": sorted({str(v["judge"]) for v in results}),
    }


def compare_totals(
    by_engine: Mapping[str, Sequence[AnswerRecord]], reference: str
) -> dict[str, Any]:
    """``{"engines": {name: totals}, "versus": {other: DocMemo minus other}}``."""
    totals: dict[str, Any] = {
        "engines": {name: engine_totals(records) for name, records in by_engine.items()},
        "versus": {},
    }
    if reference not in by_engine:
        return totals
    ref = {r.qid: r for r in by_engine[reference]}
    for name, records in by_engine.items():
        if name == reference:
            continue
        other = {r.qid: r for r in records}
        totals["versus"][name] = {
            "correct": _paired(ref, other, _passing),
            "figures_verified_share": _paired(ref, other, _verified_share),
            "cost": {
                cost: _paired(ref, other, lambda r, cost=cost: float(getattr(r, cost)))
                for cost in COSTS
            },
            "pairwise": pairwise_totals(ref, name),
        }
    return totals
