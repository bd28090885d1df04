"""``docmemo --help`` stays fast: building the parser imports neither LlamaIndex nor ``openai``.

Measured on a quiet 2-core machine, ``docmemo --help`` took 6.6 s while the parser's modules
imported ``llama_index.core`` (through ``llama_index_docmemo.llms``); without it, about 0.5 s.
"""

from __future__ import annotations

import json
import subprocess
import sys

HEAVY = ("llama_index.core", "openai", "qdrant_edge", "qdrant_client", "fitz", "numpy")

_PROBE = """
import contextlib, io, json, sys
from llama_index_docmemo.cli import main
for argv in (["--help"], ["ask", "--help"], ["demo", "--help"], ["index", "--help"]):
    with contextlib.redirect_stdout(io.StringIO()):
        try:
            main(argv)
        except SystemExit:
            pass
print(json.dumps(sorted(name for name in sys.modules if name.split(".")[0] in {heavy})))
"""


def test_help_imports_no_heavy_module() -> None:
    roots = sorted({name.split(".")[0] for name in HEAVY})
    probe = _PROBE.replace("{heavy}", repr(set(roots)))
    done = subprocess.run(
        [sys.executable, "-c", probe], capture_output=True, text=True, timeout=120, check=True
    )
    loaded = set(json.loads(done.stdout.strip().splitlines()[-1]))
    heavy = [name for name in HEAVY if name in loaded]
    assert heavy == [], f"docmemo --help imported {heavy}"
