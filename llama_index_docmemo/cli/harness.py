"""``docmemo eval`` and ``docmemo compare``, mounted without importing the evaluation harness.

Their own parsers live in the harness (extra ``eval``) and are built only when they run, so no
other command imports it (nor scipy or matplotlib).
"""

from __future__ import annotations

import argparse
from typing import Any

COMMANDS = {
    "eval": "compare engines on a dataset folder (qa.jsonl + pdfs/); extra 'eval'",
    "compare": "DocMemo vs the stock LlamaIndex engine on your PDFs and questions; extra 'eval'",
}


def register(sub: Any) -> None:
    """A stub per command that treats nothing as an option and hands every argument over."""
    for name, help in COMMANDS.items():
        p = sub.add_parser(name, help=help, add_help=False, prefix_chars="\0")
        p.add_argument("arguments", nargs=argparse.REMAINDER)
        p.set_defaults(func=lambda args, name=name: run(name, args.arguments))


def run(name: str, arguments: list[str]) -> int:
    from llama_index_docmemo.evaluation.cli import main as harness_main

    return harness_main(name, arguments)
