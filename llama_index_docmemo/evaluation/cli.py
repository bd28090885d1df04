"""``docmemo eval``: compare DocMemo, its ablations and baselines on a dataset folder, at fixed budgets.

The lead's ``docmemo`` command mounts it with :func:`add_eval_parser` and dispatches to :func:`run_eval`.
Layout of ``--out``: ``seed-<s>/results.jsonl`` (resumable runs per seed), ``report.json``/``report.md``/
``curves.png`` over all seeds, and with ``--reader-map`` ``reader_map/`` + ``reader_map.json``/``.png``.
"""

from __future__ import annotations

import argparse
import json
from collections.abc import Callable
from pathlib import Path
from typing import Any

from llama_index_docmemo.evaluation.baselines import ENGINE_NAMES
from llama_index_docmemo.evaluation.datasets import SPLITS
from llama_index_docmemo.evaluation.stopping import (
    DEFAULT_P_EARLY,
    DEFAULT_P_MISS,
    STOP_MODES,
)

DEFAULT_ENGINES = "docmemo,static-paged,neighbours,static@15,llamaindex-topk"


def parse_seeds(text: str) -> list[int]:
    """``"0-4"``, ``"0,2,5"`` or ``"0-2,7"`` -> sorted distinct seeds."""
    seeds: set[int] = set()
    for part in (p.strip() for p in text.split(",")):
        if not part:
            continue
        low, sep, high = part.partition("-")
        try:
            if sep:
                first, last = int(low), int(high)
                if last < first:
                    raise ValueError
                seeds.update(range(first, last + 1))
            else:
                seeds.add(int(part))
        except ValueError:
            raise SystemExit(
                f"docmemo eval: --seeds expects numbers and ranges like 0-4 or 0,2,5, got {text!r}"
            ) from None
    if not seeds:
        raise SystemExit("docmemo eval: --seeds names no seed")
    return sorted(seeds)


def add_eval_parser(subparsers: Any) -> argparse.ArgumentParser:
    """Add the ``eval`` sub-command to an ``argparse`` sub-parsers object."""
    p = subparsers.add_parser(
        "eval",
        help="compare engines on a dataset folder (qa.jsonl + pdfs/)",
        description="All-hit and evidence recall after k, 2k, ..., T*k pages read, with 95% bootstrap "
        "intervals, for DocMemo, its ablations and baselines reading the same first-round ranking "
        "(static@K, static-paged, neighbours) or a stock LlamaIndex chunk pipeline; DocMemo vs each "
        "engine with a paired test. Resumable: rerun the same command to continue.",
    )
    p.add_argument(
        "--data", required=True, type=Path, help="dataset folder holding qa.jsonl and pdfs/"
    )
    p.add_argument(
        "--engines",
        default=DEFAULT_ENGINES,
        help=f"comma-separated engines (default {DEFAULT_ENGINES}); choose from {', '.join(ENGINE_NAMES)}"
        " (static@K for any page count K)",
    )
    p.add_argument("--reasoner", choices=("simulated", "offline", "vlm"), default="offline")
    p.add_argument("--out", required=True, type=Path, help="output folder (results, report, plots)")
    p.add_argument("--limit", type=int, default=None, help="first N questions only")
    p.add_argument(
        "--seeds",
        "--seed",
        dest="seeds",
        default="0",
        help="seeds of the engines and the simulated labels: 0-4, 0,2,5 (default 0); each seed is "
        "run and the report gives the mean and per-seed numbers",
    )
    p.add_argument(
        "--split",
        choices=SPLITS,
        default="report",
        help="documents to evaluate: the tuning half, the report half (default) or all "
        "(fixed SHA-256 rule on the file name, evaluation.datasets.split_of)",
    )
    p.add_argument(
        "--stop",
        choices=STOP_MODES,
        default="never",
        help="never (default): every engine reads its full budget; noisy: a simulated stop signal "
        "with errors (--stop-early, --stop-miss); oracle: stop when every gold page was recognised "
        "(an upper bound, labelled so); reader: a real reader's own stop signal",
    )
    p.add_argument(
        "--stop-early",
        type=float,
        default=DEFAULT_P_EARLY,
        help=f"--stop noisy: chance per round of stopping before every gold page was recognised "
        f"(default {DEFAULT_P_EARLY})",
    )
    p.add_argument(
        "--stop-miss",
        type=float,
        default=DEFAULT_P_MISS,
        help=f"--stop noisy: chance per round of reading on once every gold page was recognised "
        f"(default {DEFAULT_P_MISS})",
    )
    p.add_argument(
        "--reader-map",
        action="store_true",
        help="also run docmemo, static-paged and neighbours with the simulated reader over an "
        "fn x fp grid and write reader_map.json / reader_map.png (all-hit gain at T*k pages)",
    )
    p.add_argument(
        "--map-seeds",
        default=None,
        help="seeds of the reader map (default: the first of --seeds; 24 cells x 3 engines per seed)",
    )
    p.add_argument("--fn", type=float, default=0.2, help="simulated reasoner: false-negative rate")
    p.add_argument("--fp", type=float, default=0.05, help="simulated reasoner: false-positive rate")
    p.add_argument("--k", type=int, default=5, help="pages read per round")
    p.add_argument("--rounds", type=int, default=3, help="rounds per question (T)")
    p.add_argument(
        "--set",
        dest="overrides",
        action="append",
        default=[],
        metavar="KEY=VALUE",
        help="DocMemoConfig field for every DocMemo engine, VALUE in JSON (e.g. sampling='\"greedy\"', "
        "prior_strength=50); repeatable",
    )
    p.add_argument("--store", type=Path, default=None, help="page store folder (default OUT/store)")
    p.add_argument(
        "--llm-url", default=None, help="OpenAI-compatible server URL ending in /v1 (vlm)"
    )
    p.add_argument("--llm-model", default=None, help="served model name (vlm)")
    p.add_argument(
        "--judge-url", default=None, help="OpenAI-compatible server of an LLM judge (/v1)"
    )
    p.add_argument("--judge-model", default=None, help="judge model name (default: --llm-model)")
    p.add_argument("--no-progress", action="store_true", help="no progress bar")
    p.set_defaults(func=run_eval)
    return p


def _reasoner_factory(args: argparse.Namespace) -> Callable[[int], Any]:
    """A factory of the reader for one seed (only the simulated reader uses the seed)."""
    if args.reasoner == "simulated":
        from llama_index_docmemo.evaluation.simulated import SimulatedReasoner

        return lambda seed: SimulatedReasoner(fn=args.fn, fp=args.fp, seed=seed)
    if args.reasoner == "offline":
        from llama_index_docmemo.reasoning.offline import OfflineReasoner

        return lambda seed: OfflineReasoner()
    if not args.llm_url:
        raise SystemExit(
            "docmemo eval: --reasoner vlm needs --llm-url (e.g. http://localhost:8000/v1)"
        )
    from llama_index_docmemo.llms.qwen_vl import QwenVL
    from llama_index_docmemo.reasoning.vlm import VLMReasoner

    llm = QwenVL(model=args.llm_model, api_base=args.llm_url)
    return lambda seed: VLMReasoner(llm)


def parse_overrides(pairs: list[str]) -> dict[str, Any]:
    """``KEY=VALUE`` pairs -> config overrides; VALUE is JSON, else taken as a plain string."""
    out: dict[str, Any] = {}
    for pair in pairs:
        key, sep, raw = pair.partition("=")
        if not sep or not key.strip():
            raise SystemExit(f"docmemo eval: --set expects KEY=VALUE, got {pair!r}")
        try:
            out[key.strip()] = json.loads(raw)
        except json.JSONDecodeError:
            out[key.strip()] = raw
    return out


def _check_stop(args: argparse.Namespace) -> None:
    if args.reasoner == "simulated" and args.stop == "reader":
        raise SystemExit(
            "docmemo eval: the simulated reader has no stop signal of its own; "
            "use --stop never, noisy or oracle"
        )
    if args.reasoner != "simulated" and args.stop in ("noisy", "oracle"):
        raise SystemExit(
            f"docmemo eval: --stop {args.stop} simulates a stop signal from the gold pages; with a "
            "real reader use --stop never or --stop reader (its own signal)"
        )
    for flag, value in (("--stop-early", args.stop_early), ("--stop-miss", args.stop_miss)):
        if not 0.0 <= value <= 1.0:
            raise SystemExit(f"docmemo eval: {flag} must be in [0, 1], got {value}")


def run_eval(args: argparse.Namespace) -> int:
    """Index the dataset's PDFs (once, reusing ``--store``), run the engines per seed, write reports."""
    from llama_index_docmemo.config import DocMemoConfig
    from llama_index_docmemo.evaluation.baselines import check_engine_names
    from llama_index_docmemo.evaluation.datasets import load_dataset, select_split
    from llama_index_docmemo.evaluation.protocol import EvalPlan, run_plan

    names = [n.strip() for n in args.engines.split(",") if n.strip()]
    try:
        check_engine_names(names)
    except ValueError as exc:
        raise SystemExit(f"docmemo eval: {exc}") from None
    _check_stop(args)
    seeds = parse_seeds(args.seeds)
    overrides = parse_overrides(args.overrides)
    unknown = sorted(set(overrides) - set(DocMemoConfig.model_fields))
    if unknown:
        raise SystemExit(
            f"docmemo eval: --set names unknown DocMemoConfig field(s): {', '.join(unknown)}"
        )
    base = DocMemoConfig(**{"pages_per_round": args.k, "rounds": args.rounds, **overrides})
    full = load_dataset(args.data, limit=args.limit)
    dataset = select_split(full, args.split)
    if not dataset.items:
        raise SystemExit(
            f"docmemo eval: no question of {args.data} is in the {args.split} split "
            f"({len(full.items)} questions in all); try --split all"
        )
    plan = EvalPlan(
        dataset=dataset,
        engines=names,
        base=base,
        seeds=seeds,
        reasoner=args.reasoner,
        make_reasoner=_reasoner_factory(args),
        out=args.out,
        store_path=args.store or args.out / "store",
        split=args.split,
        stop_mode=args.stop,
        p_early=args.stop_early,
        p_miss=args.stop_miss,
        fn=args.fn,
        fp=args.fp,
        llm_model=args.llm_model,
        overrides=overrides,
        reader_map=args.reader_map,
        map_seeds=parse_seeds(args.map_seeds) if args.map_seeds else seeds[:1],
        progress=not args.no_progress,
        judge_url=args.judge_url,
        judge_model=args.judge_model or args.llm_model,
    )
    return run_plan(plan)
