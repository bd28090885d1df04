"""``docmemo eval`` and ``docmemo compare``: the harness's own command-line parsers (extra ``eval``).

``docmemo`` hands every argument after ``eval`` / ``compare`` to :func:`main`, so no other command
imports the harness. ``eval`` compares DocMemo, its ablations and baselines on a dataset folder at
fixed budgets. Layout of its ``--out``: ``seed-<s>/results.jsonl`` (resumable runs per seed),
``report.json``/``report.md``/``curves.png`` over all seeds, and with ``--reader-map``
``reader_map/`` + ``reader_map.json``/``.png``. ``compare``: :mod:`.compare.cli`.
"""

from __future__ import annotations

import argparse
import json
import sys
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any

from llama_index_docmemo.evaluation import require_eval_extra
from llama_index_docmemo.evaluation.baselines import ENGINE_NAMES, STOCK_ENGINES
from llama_index_docmemo.evaluation.cost import DEFAULT_COST_MODEL
from llama_index_docmemo.evaluation.datasets import SPLITS
from llama_index_docmemo.evaluation.stopping import (
    DEFAULT_P_EARLY,
    DEFAULT_P_MISS,
    STOP_MODES,
)

if TYPE_CHECKING:
    from llama_index_docmemo.readers.base import Reader

DEFAULT_ENGINES = "docmemo,static-paged,neighbours,static@15,llamaindex-topk"


def parse_seeds(text: str) -> list[int]:
    """``"0-4"``, ``"0,2,5"`` or ``"0-2,7"`` -> sorted distinct seeds (an argparse ``type``)."""
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
            raise argparse.ArgumentTypeError(
                f"expects numbers and ranges like 0-4 or 0,2,5, got {text!r}"
            ) from None
    if not seeds:
        raise argparse.ArgumentTypeError("names no seed")
    return sorted(seeds)


def parse_override(pair: str) -> tuple[str, Any]:
    """``KEY=VALUE`` -> a config override; VALUE is JSON, else taken as a plain string."""
    key, sep, raw = pair.partition("=")
    if not sep or not key.strip():
        raise argparse.ArgumentTypeError(f"expects KEY=VALUE, got {pair!r}")
    try:
        return key.strip(), json.loads(raw)
    except json.JSONDecodeError:
        return key.strip(), raw


def _probability(text: str) -> float:
    value = float(text)
    if not 0.0 <= value <= 1.0:
        raise argparse.ArgumentTypeError(f"must be in [0, 1], got {value:g}")
    return value


class _OldReaderFlag(argparse.Action):
    """``--reasoner``, the 0.2 name of ``--reader`` (hidden; it goes in 0.4.0): sets ``reader``
    and says so on stderr."""

    def __call__(
        self, parser: argparse.ArgumentParser, namespace: argparse.Namespace, value: Any, *_: Any
    ) -> None:
        print(
            "docmemo eval: --reasoner is deprecated, use --reader (the 0.2 name goes in 0.4.0)",
            file=sys.stderr,
        )
        setattr(namespace, self.dest, value)


def eval_parser() -> argparse.ArgumentParser:
    """The parser of ``docmemo eval``."""
    p = argparse.ArgumentParser(
        prog="docmemo eval",
        description="All-hit and evidence recall after k, 2k, ..., T*k pages read, with 95% bootstrap "
        "intervals, for DocMemo, its ablations and baselines reading the same first-round ranking "
        "(static@K, static-paged, neighbours) or a stock LlamaIndex chunk pipeline; DocMemo vs each "
        "engine with a paired test. Resumable: rerun the same command to continue. Needs the "
        "'eval' extra.",
    )
    p.add_argument(
        "--data", required=True, type=Path, help="dataset folder holding qa.jsonl and pdfs/"
    )
    p.add_argument(
        "--engines",
        default=DEFAULT_ENGINES,
        help=f"comma-separated engines (default {DEFAULT_ENGINES}); choose from {', '.join(ENGINE_NAMES)}"
        " (static@K for any page count K; the -ocr stock engines read the store's page text, OCR "
        "included)",
    )
    p.add_argument(
        "--scope",
        choices=("document", "corpus"),
        default="document",
        help="what each question is asked of: its own document (default), or the whole store "
        "(every dataset document indexed, both halves; the question names no document). "
        "Every engine gets the same scope; gold stays (document, page)",
    )
    readers = ("simulated", "offline", "vlm")
    p.add_argument("--reader", choices=readers, default="offline")
    p.add_argument(
        "--reasoner",
        choices=readers,
        dest="reader",
        default=argparse.SUPPRESS,
        help=argparse.SUPPRESS,
        action=_OldReaderFlag,
    )
    p.add_argument("--out", required=True, type=Path, help="output folder (results, report, plots)")
    p.add_argument("--limit", type=int, default=None, help="first N questions only")
    p.add_argument(
        "--seeds",
        "--seed",
        dest="seeds",
        type=parse_seeds,
        default=[0],
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
        type=_probability,
        default=DEFAULT_P_EARLY,
        help=f"--stop noisy: chance per round of stopping before every gold page was recognised "
        f"(default {DEFAULT_P_EARLY})",
    )
    p.add_argument(
        "--stop-miss",
        type=_probability,
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
        type=parse_seeds,
        default=None,
        help="seeds of the reader map (default: the first of --seeds; 24 cells x 3 engines per seed)",
    )
    p.add_argument("--fn", type=float, default=0.2, help="simulated reader: false-negative rate")
    p.add_argument("--fp", type=float, default=0.05, help="simulated reader: false-positive rate")
    p.add_argument("--k", type=int, default=5, help="pages read per round")
    p.add_argument("--rounds", type=int, default=3, help="rounds per question (T)")
    p.add_argument(
        "--set",
        dest="overrides",
        action="append",
        type=parse_override,
        default=[],
        metavar="KEY=VALUE",
        help="DocMemoConfig field for every DocMemo engine, VALUE in JSON (e.g. sampling='\"greedy\"', "
        "candidates=60); repeatable",
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
    p.add_argument(
        "--cost-model",
        default=None,
        help="model whose image tokens price the estimated tokens (default: --llm-model, else "
        f"{DEFAULT_COST_MODEL})",
    )
    p.add_argument("--no-progress", action="store_true", help="no progress bar")
    return p


def _reader_factory(args: argparse.Namespace) -> Callable[[int], Reader]:
    """A factory of the reader for one seed (only the simulated reader uses the seed)."""
    if args.reader == "simulated":
        from llama_index_docmemo.evaluation.simulated import SimulatedReader

        return lambda seed: SimulatedReader(fn=args.fn, fp=args.fp, seed=seed)
    if args.reader == "offline":
        from llama_index_docmemo.readers.offline import OfflineReader

        return lambda seed: OfflineReader()
    from llama_index_docmemo.llms.qwen_vl import QwenVL
    from llama_index_docmemo.readers.vlm import VLMReader

    llm = QwenVL(model=args.llm_model, api_base=args.llm_url)
    return lambda seed: VLMReader(llm)


def _check(parser: argparse.ArgumentParser, args: argparse.Namespace) -> None:
    """Combinations of options that cannot run, as parser errors."""
    if args.reader == "vlm" and not args.llm_url:
        parser.error("--reader vlm needs --llm-url (e.g. http://localhost:8000/v1)")
    if args.reader == "simulated" and args.stop == "reader":
        parser.error(
            "the simulated reader has no stop signal of its own; use --stop never, noisy or oracle"
        )
    if args.reader != "simulated" and args.stop in ("noisy", "oracle"):
        parser.error(
            f"--stop {args.stop} simulates a stop signal from the gold pages; with a real reader "
            "use --stop never or --stop reader (its own signal)"
        )
    stock = [n.strip() for n in args.engines.split(",") if n.strip() in STOCK_ENGINES]
    if args.scope == "corpus" and stock:
        parser.error(
            f"{', '.join(stock)} build an index per document and run in the document scope "
            "only; leave them out of --engines with --scope corpus"
        )
    if args.judge_url and not (args.judge_model or args.llm_model):
        parser.error("--judge-url needs --judge-model (or --llm-model)")


def run_eval(args: argparse.Namespace) -> int:
    """Index the dataset's PDFs (once, reusing ``--store``), run the engines per seed, write reports."""
    from llama_index_docmemo.evaluation.baselines import check_engine_names
    from llama_index_docmemo.evaluation.configs import EngineConfigs
    from llama_index_docmemo.evaluation.datasets import DatasetError, load_dataset, select_split
    from llama_index_docmemo.evaluation.protocol import EvalPlan, run_plan

    names = [n.strip() for n in args.engines.split(",") if n.strip()]
    check_engine_names(names)
    configs = EngineConfigs(
        args.k, args.rounds, dict(args.overrides), fixed_budget=args.stop == "never"
    )
    configs.for_engine("docmemo")  # bad override values fail here, before any work
    full = load_dataset(args.data, limit=args.limit)
    dataset = select_split(full, args.split)
    if not dataset.items:
        raise DatasetError(
            f"no question of {args.data} is in the {args.split} split "
            f"({len(full.items)} questions in all); try --split all"
        )
    plan = EvalPlan(
        dataset=dataset,
        engines=names,
        configs=configs,
        seeds=args.seeds,
        reader=args.reader,
        make_reader=_reader_factory(args),
        out=args.out,
        store_path=args.store or args.out / "store",
        split=args.split,
        scope=args.scope,
        corpus=load_dataset(args.data) if args.scope == "corpus" else None,
        stop_mode=args.stop,
        p_early=args.stop_early,
        p_miss=args.stop_miss,
        fn=args.fn,
        fp=args.fp,
        llm_model=args.llm_model,
        reader_map=args.reader_map,
        map_seeds=args.map_seeds or args.seeds[:1],
        progress=not args.no_progress,
        judge_url=args.judge_url,
        judge_model=args.judge_model or args.llm_model,
        cost_model=args.cost_model or args.llm_model or DEFAULT_COST_MODEL,
    )
    return run_plan(plan)


def main(command: str, argv: Sequence[str]) -> int:
    """Run ``docmemo eval`` or ``docmemo compare`` with the arguments that follow the command."""
    if command == "compare":
        from llama_index_docmemo.evaluation.compare.cli import compare_parser, run_compare

        parser, run = compare_parser(), run_compare
    else:
        parser, run = eval_parser(), run_eval
    args = parser.parse_args(list(argv))
    require_eval_extra(f"docmemo {command}")
    if command == "eval":
        _check(parser, args)
    return run(args)
