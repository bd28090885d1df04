"""Stop rules replayed on a fixed-budget evaluation: what each costs, and what any stop could do (issue 28).

A ``docmemo eval --stop never`` run records, for every engine, seed and question, the pages read in
each round and the pages the simulated reader labelled useful. With the simulated reader the
reading order does not depend on when an engine stops: a label depends on (seed, question, page),
and selection on the labels, never on the stop signal. So a stop rule that looks only at rounds
already read can be applied to the recorded runs afterwards, in seconds instead of a run each:
the noisy and the oracle stop of ``evaluation.stopping.StopRule``, through the loop's own policy
``loop.state.stop_reason``, at any ``give_up_after_pages``. ``--against`` checks the replay of a real
``--stop noisy`` run of the same settings, run by run.

The oracle stop ends a reading once every gold page was read and labelled useful: the fewest pages
any stop signal could give with this reading order and these labels. A run whose gold pages were
all read but one was labelled irrelevant (a reader's false negative) gets no stop signal from a
reader that gave these labels, so it reads to the last round or until it gives up; the table of
how the runs end says what share of the pages such runs take.

    python benchmarks/stop_replay.py --data ../shared/data/mmlongbench-doc --run runs/never-mm \\
        --give-up none,9,11,13 [--against runs/noisy-mm] [--json runs/stop_replay.json]
"""

from __future__ import annotations

import argparse
import json
import sys
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np

from llama_index_docmemo.config import LoopSettings
from llama_index_docmemo.evaluation.baselines import NO_BUDGET
from llama_index_docmemo.evaluation.configs import EngineConfigs
from llama_index_docmemo.evaluation.datasets import QAItem, load_dataset
from llama_index_docmemo.evaluation.metrics import QuestionRun
from llama_index_docmemo.evaluation.runner import RESULTS, SETTINGS, load_runs, read_settings
from llama_index_docmemo.evaluation.stats import bootstrap_ci
from llama_index_docmemo.evaluation.stopping import DEFAULT_P_EARLY, DEFAULT_P_MISS, StopRule
from llama_index_docmemo.loop.state import RoundOutcome, stop_reason
from llama_index_docmemo.types import PageRef

ROUND_ENGINES = ("docmemo", "static-paged", "neighbours")
"""Engines that read in rounds and stop by the loop's policy (``static@K`` reads one round)."""

Runs = dict[int, list[QuestionRun]]  # seed -> the engine's runs


@dataclass(frozen=True)
class Replayed:
    """Where one recorded run would have stopped under a rule."""

    pages: int
    requests: int
    hit: bool  # every gold page read by the stop
    reason: str  # the loop's stop reason
    ending: str  # the reason and what the reader had made of the gold pages by then


def ending_of(
    reason: str, gold: frozenset[PageRef], read: set[PageRef], useful: set[PageRef]
) -> str:
    """A stop reason with the state of the gold pages at that moment."""
    if gold <= useful:
        return f"{reason}: every gold page recognised"
    if gold <= read:
        return f"{reason}: every gold page read, one or more labelled irrelevant"
    return f"{reason}: a gold page unread"


def replay_run(run: QuestionRun, item: QAItem, rule: StopRule, loop: LoopSettings) -> Replayed:
    """Read ``run``'s rounds again and stop where ``rule`` and ``loop``'s policy stop it.

    The reader's "answered" is the rule's (the simulated reader has no status of its own beyond
    the gold), exactly as :class:`~llama_index_docmemo.evaluation.stopping.StopControl` gives it;
    a recording that ends before ``loop.rounds`` ran out of candidates.
    """
    labelled = set(run.useful)
    read: set[PageRef] = set()
    useful: set[PageRef] = set()
    reason, requests = "no_candidates", 0
    for round_, shown in enumerate(run.reads, start=1):
        if not shown:
            break
        requests += 1
        read.update(shown)
        useful |= labelled & set(shown)
        answered = rule.says_answered(
            own=False,
            gold_recognised=bool(item.gold) and item.gold <= useful,
            key=run.qid,
            round_=round_,
            final=round_ == loop.rounds,
        )
        outcome = RoundOutcome(
            round=round_,
            shown=len(shown),
            status="answered" if answered else "need_more",
            useful_so_far=len(useful),
            pages_read=len(read),
        )
        stopped = stop_reason(outcome, loop, NO_BUDGET)
        if stopped is not None:
            reason = stopped
            break
    return Replayed(
        pages=len(read),
        requests=requests,
        hit=item.gold <= read,
        reason=reason,
        ending=ending_of(reason, item.gold, read, useful),
    )


def replay_all(
    runs: Runs, items: Mapping[str, QAItem], rules: Mapping[int, StopRule], loop: LoopSettings
) -> dict[str, list[Replayed]]:
    """qid -> one replay a seed (page-scored questions only), each seed under its own rule."""
    out: dict[str, list[Replayed]] = {}
    for seed, seed_runs in runs.items():
        rule = rules[seed]
        for run in seed_runs:
            item = items.get(run.qid)
            if item is not None and item.scored_on_pages:
                out.setdefault(run.qid, []).append(replay_run(run, item, rule, loop))
    return out


def summary(replays: Mapping[str, Sequence[Replayed]]) -> dict[str, Any]:
    """Means per question at the stop (each question's mean over seeds first), with intervals."""
    pages = [float(np.mean([r.pages for r in rs])) for rs in replays.values()]
    hits = [100.0 * float(np.mean([r.hit for r in rs])) for rs in replays.values()]
    requests = [float(np.mean([r.requests for r in rs])) for rs in replays.values()]
    return {
        "questions": len(replays),
        "pages": float(np.mean(pages)),
        "pages_ci": bootstrap_ci(pages),
        "requests": float(np.mean(requests)),
        "all_hit": float(np.mean(hits)),
        "all_hit_ci": bootstrap_ci(hits),
    }


def endings(replays: Mapping[str, Sequence[Replayed]]) -> list[dict[str, Any]]:
    """How the runs end: share of runs, pages a run, share of all pages read; most pages first."""
    flat = [r for rs in replays.values() for r in rs]
    total = sum(r.pages for r in flat) or 1
    groups: dict[str, list[int]] = {}
    for r in flat:
        groups.setdefault(r.ending, []).append(r.pages)
    rows = [
        {
            "ending": ending,
            "runs": 100.0 * len(pages) / len(flat),
            "pages_a_run": float(np.mean(pages)),
            "share_of_pages": 100.0 * sum(pages) / total,
        }
        for ending, pages in groups.items()
    ]
    return sorted(rows, key=lambda row: -row["share_of_pages"])


def read_run(folder: Path, engine: str) -> tuple[dict[str, Any], Runs]:
    """A run's settings (``run.json``) and the engine's runs in every ``seed-<s>`` folder."""
    if engine not in ROUND_ENGINES:
        raise SystemExit(f"--engine must be one of {', '.join(ROUND_ENGINES)}, got {engine!r}")
    settings_path = folder / SETTINGS
    if not settings_path.is_file():
        raise SystemExit(f"{settings_path}: not found (give a `docmemo eval` output folder)")
    settings = read_settings(settings_path)
    runs: Runs = {}
    for seed_dir in sorted(folder.glob("seed-*")):
        seed = int(seed_dir.name.removeprefix("seed-"))
        runs[seed] = [r for r in load_runs(seed_dir / RESULTS) if r.engine == engine]
    if not any(runs.values()):
        raise SystemExit(f"{folder}: no {engine} runs in seed-*/{RESULTS}")
    return settings, runs


def loop_of(settings: Mapping[str, Any], give_up: int | None) -> LoopSettings:
    """The run's DocMemo loop settings (k, T, ``--set``), with ``give_up_after_pages`` set."""
    config = EngineConfigs(
        pages_per_round=settings["k"], rounds=settings["rounds"], overrides=settings["config"]
    ).for_engine()
    if config.loop.reread_useful:
        raise SystemExit("reread_useful runs cannot be replayed (a page's labels would differ)")
    return config.loop.model_copy(update={"give_up_after_pages": give_up})


def check_against(
    folder: Path, engine: str, items: Mapping[str, QAItem], recorded: Runs
) -> tuple[int, int]:
    """(runs whose replay gives the pages and stop reason of ``folder``'s real run, runs)."""
    settings, real = read_run(folder, engine)
    stop = settings["stop"]
    if stop["mode"] not in ("noisy", "oracle"):
        raise SystemExit(f"{folder}: --against needs a --stop noisy or oracle run")
    loop = loop_of(settings, settings["config"].get("give_up_after_pages"))
    p_early, p_miss = stop.get("p_early", DEFAULT_P_EARLY), stop.get("p_miss", DEFAULT_P_MISS)
    same = total = 0
    for seed, seed_runs in real.items():
        rule = StopRule(stop["mode"], p_early, p_miss, seed)
        by_qid = {r.qid: r for r in recorded.get(seed, [])}
        for run in seed_runs:
            item = items.get(run.qid)
            if item is None or run.qid not in by_qid:
                continue
            replayed = replay_run(by_qid[run.qid], item, rule, loop)
            total += 1
            same += (replayed.pages, replayed.reason) == (run.pages_read, run.stop_reason)
    return same, total


def _give_ups(text: str) -> list[int | None]:
    """``none,9,13`` -> [None, 9, 13]; argparse names the option on anything else."""
    try:
        values = [None if part.strip() == "none" else int(part) for part in text.split(",")]
    except ValueError:
        raise argparse.ArgumentTypeError(f"expected page counts or none, got {text!r}") from None
    if any(v is not None and v < 1 for v in values):
        raise argparse.ArgumentTypeError(f"page counts must be at least 1, got {text!r}")
    return values


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--data", required=True, help="dataset folder holding qa.jsonl")
    parser.add_argument("--run", required=True, type=Path, help="a `--stop never` eval output")
    parser.add_argument("--engine", default="docmemo", choices=ROUND_ENGINES)
    parser.add_argument(
        "--give-up", type=_give_ups, default="none,13", help="give_up_after_pages values"
    )
    parser.add_argument("--p-early", type=float, default=DEFAULT_P_EARLY)
    parser.add_argument("--p-miss", type=float, default=DEFAULT_P_MISS)
    parser.add_argument("--against", type=Path, help="a real --stop noisy run to reproduce")
    parser.add_argument("--json", type=Path, help="write every row here")
    args = parser.parse_args(argv)

    settings, runs = read_run(args.run, args.engine)
    if settings["stop"]["mode"] != "never":
        raise SystemExit(f"{args.run}: not a --stop never run (stop {settings['stop']['mode']})")
    if settings["reader"] != "simulated":
        raise SystemExit(f"{args.run}: the replay needs the simulated reader's labels")
    items = {item.qid: item for item in load_dataset(args.data, check_pdfs=False).items}
    rows: list[dict[str, Any]] = []
    print(f"{args.engine}, {args.run} ({settings['split']} half, seeds {sorted(runs)})\n")
    print("| stop | give up after | pages read [95% CI] | requests | all-hit [95% CI] |")
    print("|---|---|---|---|---|")
    for mode in ("noisy", "oracle"):
        for give_up in args.give_up:
            loop = loop_of(settings, give_up)
            rules = {seed: StopRule(mode, args.p_early, args.p_miss, seed) for seed in runs}
            replays = replay_all(runs, items, rules, loop)
            row = {"stop": mode, "give_up_after_pages": give_up, **summary(replays)}
            row["endings"] = endings(replays)
            rows.append(row)
            lo, hi = row["pages_ci"]
            alo, ahi = row["all_hit_ci"]
            print(
                f"| {mode} | {give_up or '-'} | {row['pages']:.2f} [{lo:.2f}, {hi:.2f}] "
                f"| {row['requests']:.2f} | {row['all_hit']:.1f} [{alo:.1f}, {ahi:.1f}] |"
            )
    for row in rows:
        print(f"\nHow the runs end: {row['stop']} stop, give up after {row['give_up_after_pages']}")
        print("| ending | runs % | pages a run | share of pages % |\n|---|---|---|---|")
        for e in row["endings"]:
            print(
                f"| {e['ending']} | {e['runs']:.1f} | {e['pages_a_run']:.2f} "
                f"| {e['share_of_pages']:.1f} |"
            )
    if args.against is not None:
        same, total = check_against(args.against, args.engine, items, runs)
        print(f"\nReplay of {args.against}: {same} of {total} runs reproduced (pages, reason)")
        if same != total:
            return 1
    if args.json is not None:
        args.json.write_text(json.dumps(rows, indent=1))
    return 0


if __name__ == "__main__":
    sys.exit(main())
