"""``docmemo eval``: compare DocMemo, its ablations and stock top-k engines on a dataset folder.

The lead's ``docmemo`` command mounts it with :func:`add_eval_parser` and dispatches to :func:`run_eval`.
"""

from __future__ import annotations

import argparse
import json
import sys
from collections.abc import Callable
from pathlib import Path
from typing import Any

from llama_index_docmemo.evaluation.baselines import ENGINE_NAMES

DEFAULT_ENGINES = "docmemo,static,llamaindex-topk"


def add_eval_parser(subparsers: Any) -> argparse.ArgumentParser:
    """Add the ``eval`` sub-command to an ``argparse`` sub-parsers object."""
    p = subparsers.add_parser(
        "eval",
        help="compare engines on a dataset folder (qa.jsonl + pdfs/)",
        description="Evidence recall, all-hit, cost and accuracy of DocMemo against static top-k and a "
        "stock LlamaIndex engine at equal budget, per round and with ablations. Resumable: rerun the "
        "same command to continue.",
    )
    p.add_argument(
        "--data", required=True, type=Path, help="dataset folder holding qa.jsonl and pdfs/"
    )
    p.add_argument(
        "--engines",
        default=DEFAULT_ENGINES,
        help=f"comma-separated engines (default {DEFAULT_ENGINES}); choose from {', '.join(ENGINE_NAMES)}",
    )
    p.add_argument("--reasoner", choices=("simulated", "offline", "vlm"), default="offline")
    p.add_argument("--out", required=True, type=Path, help="output folder (results, report, plots)")
    p.add_argument("--limit", type=int, default=None, help="first N questions only")
    p.add_argument(
        "--seed", type=int, default=0, help="seed of the engines and the simulated labels"
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


def _reasoner_factory(args: argparse.Namespace) -> Callable[[], Any]:
    if args.reasoner == "simulated":
        from llama_index_docmemo.evaluation.simulated import SimulatedReasoner

        return lambda: SimulatedReasoner(fn=args.fn, fp=args.fp, seed=args.seed)
    if args.reasoner == "offline":
        from llama_index_docmemo.reasoning.offline import OfflineReasoner

        return OfflineReasoner
    if not args.llm_url:
        raise SystemExit(
            "docmemo eval: --reasoner vlm needs --llm-url (e.g. http://localhost:8000/v1)"
        )
    from llama_index_docmemo.llms.qwen_vl import QwenVL
    from llama_index_docmemo.reasoning.vlm import VLMReasoner

    llm = QwenVL(model=args.llm_model, api_base=args.llm_url)
    return lambda: VLMReasoner(llm)


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


def run_eval(args: argparse.Namespace) -> int:
    """Index the dataset's PDFs (once, reusing ``--store``), run the engines, write report and plots."""
    from llama_index_docmemo.config import DocMemoConfig
    from llama_index_docmemo.evaluation.baselines import build_engines
    from llama_index_docmemo.evaluation.datasets import load_dataset
    from llama_index_docmemo.evaluation.report import write_report
    from llama_index_docmemo.evaluation.runner import check_settings, run_evaluation
    from llama_index_docmemo.evaluation.setup import engine_factory, ensure_indexed, open_eval_store

    names = [n.strip() for n in args.engines.split(",") if n.strip()]
    overrides = parse_overrides(args.overrides)
    unknown = sorted(set(overrides) - set(DocMemoConfig.model_fields))
    if unknown:
        raise SystemExit(
            f"docmemo eval: --set names unknown DocMemoConfig field(s): {', '.join(unknown)}"
        )
    base = DocMemoConfig(
        **{"pages_per_round": args.k, "rounds": args.rounds, "seed": args.seed, **overrides}
    )
    dataset = load_dataset(args.data, limit=args.limit)
    out: Path = args.out
    out.mkdir(parents=True, exist_ok=True)
    settings = {
        "dataset": str(args.data.resolve()),
        "reasoner": args.reasoner,
        "seed": args.seed,
        "k": args.k,
        "rounds": args.rounds,
        "fn": args.fn if args.reasoner == "simulated" else None,
        "fp": args.fp if args.reasoner == "simulated" else None,
        "llm_model": args.llm_model,
        "config": overrides,
    }
    check_settings(out, settings)
    make_reasoner = _reasoner_factory(args)
    store, encoder = open_eval_store(args.store or out / "store")
    try:
        indexed = ensure_indexed(store, encoder, dataset, progress=not args.no_progress)
        if indexed.indexed or indexed.failed:
            print(indexed.summary(), file=sys.stderr)
        engines = build_engines(
            names,
            base=base,
            make_engine=engine_factory(store, encoder, crops=args.reasoner == "vlm"),
            store=store,
        )
        errors: list[str] = []
        runs = run_evaluation(
            dataset,
            engines,
            make_reasoner,
            out,
            progress=not args.no_progress,
            on_error=lambda name, item, exc: errors.append(f"{name} {item.qid}: {exc}"),
        )
    finally:
        store.close()
    judge_accuracy = None
    if args.judge_url:
        if args.reasoner == "simulated":
            print(
                "docmemo eval: no judge for the simulated reasoner (its answers are not real)",
                file=sys.stderr,
            )
        else:
            from llama_index_docmemo.evaluation.judge import LLMJudge, judge_runs

            model = args.judge_model or args.llm_model
            if not model:
                raise SystemExit("docmemo eval: --judge-url needs --judge-model (or --llm-model)")
            judge_accuracy = judge_runs(runs, dataset.items, out, LLMJudge(args.judge_url, model))
    report = write_report(
        out,
        dataset=dataset.name,
        reasoner=args.reasoner,
        items=dataset.items,
        runs=runs,
        settings=settings,
        judge_accuracy=judge_accuracy,
    )
    try:
        from llama_index_docmemo.evaluation.plots import write_plots

        write_plots(report, out)
    except ImportError as exc:
        print(f"docmemo eval: plots skipped ({exc})", file=sys.stderr)
    for line in errors[:20]:
        print(f"docmemo eval: failed {line}", file=sys.stderr)
    print((out / "report.md").read_text(encoding="utf-8"))
    return 1 if errors else 0
