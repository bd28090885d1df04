"""``docmemo compare``: its parser and command (extra ``eval``); the work is :func:`.run.compare`."""

from __future__ import annotations

import argparse
from pathlib import Path

from llama_index_docmemo.evaluation.compare.engines import COMPARE_ENGINES, DEFAULT_ENGINES


def compare_parser() -> argparse.ArgumentParser:
    """The parser of ``docmemo compare`` (the LLM flags are ``docmemo ask``'s)."""
    from llama_index_docmemo.cli import add_llm_args

    p = argparse.ArgumentParser(
        prog="docmemo compare",
        description="Answer your questions over your PDFs with DocMemo and with the stock "
        "LlamaIndex engine (same LLM, same budget in tokens), check every figure of each answer "
        "against the pages it cites or read, judge with LlamaIndex's evaluators, count each "
        "answer's cost, and write report.html, report.md and results.jsonl. Resumable: rerun "
        "the same command to continue. Needs the 'eval' extra.",
    )
    p.add_argument("--docs", required=True, type=Path, help="folder of PDFs (subfolders too)")
    p.add_argument(
        "--questions",
        required=True,
        type=Path,
        help=".jsonl or .csv with a 'question' and optional 'expected' (or 'answer') and 'id' "
        "fields, or .txt with one question a line",
    )
    p.add_argument("--out", required=True, type=Path, help="output folder")
    p.add_argument(
        "--engines",
        default=",".join(DEFAULT_ENGINES),
        help=f"comma-separated, from {', '.join(COMPARE_ENGINES)} (default "
        f"{','.join(DEFAULT_ENGINES)}); the -ocr engines read the store's page text, OCR included",
    )
    p.add_argument(
        "--pages",
        type=int,
        default=15,
        help="DocMemo's page budget (3 rounds); the stock engines get as many tokens of chunks",
    )
    p.add_argument("--store", type=Path, default=None, help="page store folder (default OUT/store)")
    add_llm_args(p)
    judge = p.add_argument_group(
        "judge (optional; LlamaIndex's evaluators on an OpenAI-compatible server)"
    )
    judge.add_argument("--judge-url", default=None, help="the judge's server URL ending in /v1")
    judge.add_argument("--judge-model", default=None, help="the judge's model name")
    judge.add_argument("--judge-api-key", default=None, help="the judge server's key")
    p.add_argument("--no-progress", action="store_true", help="no progress bars")
    return p


def run_compare(args: argparse.Namespace) -> int:
    """Run the comparison the arguments describe and print ``report.md``; 1 if an answer failed."""
    from llama_index_docmemo.cli import llm_from_args
    from llama_index_docmemo.evaluation.compare.run import compare
    from llama_index_docmemo.llms.openai_compatible import OpenAICompatible

    judge = None
    if args.judge_url or args.judge_model:
        if not (args.judge_url and args.judge_model):
            raise ValueError("--judge-url and --judge-model go together")
        judge = OpenAICompatible(
            model=args.judge_model,
            api_base=args.judge_url,
            api_key=args.judge_api_key,
            multimodal=False,
        )
    report = compare(
        args.docs,
        args.questions,
        args.out,
        engines=args.engines.split(","),
        llm=llm_from_args(args),
        judge_llm=judge,
        pages=args.pages,
        store=args.store,
        progress=not args.no_progress,
    )
    print((args.out / "report.md").read_text(encoding="utf-8"))
    print(f"report: {args.out / 'report.html'}")
    return 1 if any(t["errors"] for t in report["totals"]["engines"].values()) else 0
