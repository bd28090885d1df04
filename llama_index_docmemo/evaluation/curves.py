"""Fixed-budget curves, paired comparisons and measured reader error rates: pure functions over runs.

The primary view of an evaluation (DESIGN §5): all-hit and evidence recall after the first n pages each
engine read, at n = k, 2k, ..., T*k. An engine that read fewer pages (a one-round ``static@5``, or an
early stop) keeps what it read. Every figure is a mean over the questions with valid, non-empty gold
evidence; with several seeds a question's value is first averaged over the seeds, and the 95% bootstrap
interval resamples questions (see :mod:`.stats`). Discordant counts are over (question, seed) pairs.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass

import numpy as np

from llama_index_docmemo.evaluation.datasets import QAItem
from llama_index_docmemo.evaluation.metrics import QuestionRun, all_hit, evidence_recall
from llama_index_docmemo.evaluation.stats import bootstrap_ci, paired_bootstrap

# runs[seed][engine] -> that engine's runs under that seed
SeedRuns = Mapping[int, Mapping[str, Sequence[QuestionRun]]]


def budgets(pages_per_round: int, rounds: int) -> list[int]:
    """The curve's reading budgets: k, 2k, ..., T*k pages."""
    return [pages_per_round * t for t in range(1, rounds + 1)]


@dataclass(frozen=True)
class QuestionScores:
    """One engine's per-question outcomes at one budget: rows are questions, columns seeds."""

    qids: list[str]
    hit: np.ndarray  # 0/1
    recall: np.ndarray
    pages: np.ndarray  # distinct pages actually read, at most the budget


def question_scores(
    runs: SeedRuns, engine: str, items: Mapping[str, QAItem], n_pages: int | None
) -> QuestionScores:
    """Outcomes after ``n_pages`` pages (None: at the stop) on the page-scored questions every
    seed has a run for."""
    seeds = sorted(runs)
    by_seed = [{run.qid: run for run in runs[seed].get(engine, ())} for seed in seeds]
    qids = [
        qid
        for qid, item in items.items()
        if item.scored_on_pages and all(qid in found for found in by_seed)
    ]
    shape = (len(qids), len(seeds))
    hit, recall, pages = np.zeros(shape), np.zeros(shape), np.zeros(shape)
    for i, qid in enumerate(qids):
        gold = items[qid].gold
        for j, found in enumerate(by_seed):
            run = found[qid]
            read = set(run.order) if n_pages is None else run.first_pages(n_pages)
            hit[i, j] = float(all_hit(read, gold))
            recall[i, j] = evidence_recall(read, gold)
            pages[i, j] = len(read)
    return QuestionScores(qids, hit, recall, pages)


def _per_seed(values: np.ndarray) -> list[float]:
    return [float(v) for v in values.mean(axis=0)] if values.size else []


def curve(
    runs: SeedRuns, engine: str, items: Mapping[str, QAItem], points: Sequence[int]
) -> list[dict[str, object]]:
    """``[{"pages", "all_hit", "all_hit_ci", "recall", "recall_ci", "pages_read", "per_seed", "n"}]``."""
    out: list[dict[str, object]] = []
    for n in points:
        scores = question_scores(runs, engine, items, n)
        hit = scores.hit.mean(axis=1)
        recall = scores.recall.mean(axis=1)
        out.append(
            {
                "pages": n,
                "all_hit": float(hit.mean()) if hit.size else None,
                "all_hit_ci": list(bootstrap_ci(hit)) if hit.size else None,
                "recall": float(recall.mean()) if recall.size else None,
                "recall_ci": list(bootstrap_ci(recall)) if recall.size else None,
                "pages_read": float(scores.pages.mean()) if scores.pages.size else 0.0,
                "per_seed": {"all_hit": _per_seed(scores.hit), "recall": _per_seed(scores.recall)},
                "n": len(scores.qids),
            }
        )
    return out


def paired(
    runs: SeedRuns,
    engine: str,
    items: Mapping[str, QAItem],
    n_pages: int,
    *,
    reference: str = "docmemo",
) -> dict[str, object] | None:
    """``reference`` minus ``engine`` in all-hit after ``n_pages``, paired over shared questions.

    ``diff`` > 0 means the reference (DocMemo) found all gold pages more often. ``docmemo_only`` /
    ``baseline_only`` count (question, seed) pairs where only one of the two did.
    """
    ref = question_scores(runs, reference, items, n_pages)
    other = question_scores(runs, engine, items, n_pages)
    shared = [q for q in ref.qids if q in set(other.qids)]
    if not shared:
        return None
    ref_rows = [ref.qids.index(q) for q in shared]
    other_rows = [other.qids.index(q) for q in shared]
    a, b = ref.hit[ref_rows], other.hit[other_rows]
    result = paired_bootstrap(a.mean(axis=1), b.mean(axis=1))
    return {
        "pages": n_pages,
        "diff": result.diff,
        "ci": list(result.ci),
        "docmemo_only": int(((a == 1) & (b == 0)).sum()),
        "baseline_only": int(((a == 0) & (b == 1)).sum()),
        "n_questions": len(shared),
        "per_seed_diff": [float(d) for d in (a - b).mean(axis=0)],
    }


@dataclass(frozen=True)
class ReaderRates:
    """A reader's page labels measured against the gold pages.

    ``fn``: share of the gold pages read that the reader did NOT label useful.
    ``fp``: share of the non-gold pages read that the reader labelled useful.
    Counted over (run, page) pairs of questions with valid labels (a page read twice counts once per
    run, useful if any read said so); ``fp`` includes questions without gold pages.
    """

    fn: float | None
    fp: float | None
    gold_read: int
    other_read: int


def reader_rates(runs: Sequence[QuestionRun], items: Mapping[str, QAItem]) -> ReaderRates:
    """Measured fn / fp of the reader behind ``runs`` (see :class:`ReaderRates`)."""
    gold_read = gold_missed = other_read = other_useful = 0
    for run in runs:
        item = items.get(run.qid)
        if item is None or not item.evidence_valid:
            continue
        useful = set(run.useful)
        for ref in set(run.order):
            if ref in item.gold:
                gold_read += 1
                gold_missed += ref not in useful
            else:
                other_read += 1
                other_useful += ref in useful
    return ReaderRates(
        fn=gold_missed / gold_read if gold_read else None,
        fp=other_useful / other_read if other_read else None,
        gold_read=gold_read,
        other_read=other_read,
    )
