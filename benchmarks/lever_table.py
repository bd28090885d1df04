"""The lever table of issue 14 from a ``docmemo eval`` output folder: each engine against the
baselines that read the same first-round ranking, paired over questions and seeds.

For every engine in the folder (DocMemo, ``no_levers``, each ``lever_<name>``, ...) and each
baseline (``static-paged``, ``neighbours``): the all-hit difference after ``--pages`` pages
(engine minus baseline, in points), its paired 95% bootstrap interval, and the discordant
(question, seed) pairs; plus recall and seconds per question. Markdown on stdout.

    python benchmarks/lever_table.py runs/tune-levers --data ../shared/data/mmlongbench-doc
"""

from __future__ import annotations

import argparse
from pathlib import Path

import numpy as np

from llama_index_docmemo.evaluation.curves import paired, question_scores
from llama_index_docmemo.evaluation.datasets import load_dataset
from llama_index_docmemo.evaluation.metrics import QuestionRun
from llama_index_docmemo.evaluation.runner import RESULTS, load_runs

BASELINES = ("static-paged", "neighbours")


def seed_runs(folder: Path) -> dict[int, dict[str, list[QuestionRun]]]:
    """runs[seed][engine] from ``folder/seed-<s>/results.jsonl``."""
    out: dict[int, dict[str, list[QuestionRun]]] = {}
    for seed_dir in sorted(folder.glob("seed-*")):
        seed = int(seed_dir.name.removeprefix("seed-"))
        for run in load_runs(seed_dir / RESULTS):
            out.setdefault(seed, {}).setdefault(run.engine, []).append(run)
    return out


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("folder", type=Path, help="output folder of docmemo eval")
    parser.add_argument("--data", type=Path, required=True, help="the dataset folder it ran on")
    parser.add_argument("--pages", type=int, default=15, help="reading budget (default 15)")
    args = parser.parse_args()
    runs = seed_runs(args.folder)
    if not runs:
        raise SystemExit(f"{args.folder}: no seed-*/results.jsonl")
    items = {item.qid: item for item in load_dataset(args.data)}
    engines = list(dict.fromkeys(e for by_engine in runs.values() for e in by_engine))
    print(f"{args.folder}: seeds {sorted(runs)}, all-hit at {args.pages} pages (points)\n")
    header = "| engine | all-hit | recall | s/question |"
    for base in BASELINES:
        header += f" vs {base} [95% CI] (only engine / only {base}) |"
    print(header)
    print("|" + "---|" * (4 + len(BASELINES)))
    for engine in engines:
        scores = question_scores(runs, engine, items, args.pages)
        seconds = [r.seconds for by_engine in runs.values() for r in by_engine.get(engine, [])]
        row = (
            f"| {engine} | {100 * scores.hit.mean():.1f} | {100 * scores.recall.mean():.1f} "
            f"| {np.mean(seconds):.3f} |"
        )
        for base in BASELINES:
            if engine == base or not any(base in r for r in runs.values()):
                row += " |"
                continue
            result = paired(runs, base, items, args.pages, reference=engine)
            if result is None:
                row += " |"
                continue
            low, high = result["ci"]  # type: ignore[misc]
            row += (
                f" {100 * float(result['diff']):+.1f} [{100 * low:+.1f}, {100 * high:+.1f}]"  # type: ignore[arg-type]
                f" ({result['docmemo_only']}/{result['baseline_only']}) |"
            )
        print(row)
    print(f"\nquestions: {scores.hit.shape[0]} (answerable, valid labels)")


if __name__ == "__main__":
    main()
