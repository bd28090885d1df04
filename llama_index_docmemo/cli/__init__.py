"""The ``docmemo`` command: index, list and delete documents (:mod:`.document_commands`), search pages,
ask questions and run the demo (:mod:`.question_commands`), eval and compare (:mod:`.harness`, extra
``eval``); the options they share are in :mod:`.options`."""

from __future__ import annotations

import argparse
import logging
import sys
import warnings
from collections.abc import Sequence

from llama_index_docmemo.cli.options import add_llm_args, llm_from_args
from llama_index_docmemo.errors import DocMemoError

__all__ = ["add_llm_args", "build_parser", "llm_from_args", "main"]


def build_parser() -> argparse.ArgumentParser:
    from llama_index_docmemo.cli import document_commands, harness, question_commands
    from llama_index_docmemo.paths import default_store_dir

    parser = argparse.ArgumentParser(
        prog="docmemo",
        description="DocMemo: question answering over long PDFs with memory-guided retrieval.",
        epilog=f"DocMemoIndex.from_documents(store=None) writes to {default_store_dir()} "
        "(reopen: DocMemoIndex.from_store(that folder)); docmemo where lists every default folder",
    )
    parser.add_argument("-v", "--verbose", action="store_true", help="log progress details")
    sub = parser.add_subparsers(dest="command", required=True)
    document_commands.register(sub)
    question_commands.register(sub)
    harness.register(sub)
    return parser


def main(argv: Sequence[str] | None = None) -> int:
    # a command-line user sees the package's deprecations (Python hides them outside __main__)
    warnings.filterwarnings("default", category=DeprecationWarning, module="llama_index_docmemo")
    args = build_parser().parse_args(argv)
    logging.basicConfig(
        level=logging.INFO if args.verbose else logging.WARNING,
        format="%(levelname)s %(name)s: %(message)s",
    )
    try:
        return int(args.func(args) or 0)
    except (DocMemoError, ValueError) as exc:  # bad input or settings: a message, not a traceback
        if args.verbose:
            raise
        print(f"docmemo: error: {exc}", file=sys.stderr)
        return 2
    except KeyboardInterrupt:
        return 130
