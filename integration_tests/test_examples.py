"""The runnable examples stay true: quickstart and drop-in run on the generated demo report."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

from llama_index_docmemo.demo.document import write_demo_pdf

pytestmark = pytest.mark.slow  # a subprocess or a real server per test

EXAMPLES = Path(__file__).resolve().parent.parent / "examples"


@pytest.mark.parametrize(
    "script, target, expect",
    [
        ("quickstart.py", "report.pdf", "Answer: 1,184"),
        ("drop_in.py", ".", "[DocMemoIndex] 1,184"),  # the folder; the stock app runs first
    ],
)
def test_example_runs(script: str, target: str, expect: str, tmp_path: Path) -> None:
    docs = tmp_path / "docs"
    write_demo_pdf(docs / "report.pdf")
    env = {k: v for k, v in os.environ.items() if not k.startswith("DOCMEMO_LLM")}
    env["DOCMEMO_STORE_DIR"] = str(tmp_path / "store")
    out = subprocess.run(
        [
            sys.executable,
            str(EXAMPLES / script),
            str(docs / target),
            "How many employees were in the Nordic region at the end of 2024?",
        ],
        cwd=tmp_path,
        env=env,
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert out.returncode == 0, out.stderr[-2000:]
    assert expect in out.stdout, out.stdout
    if script == "drop_in.py":
        assert "[VectorStoreIndex]" in out.stdout  # the app as it was, before the change
        assert "offline reader" in out.stderr  # no LLM configured: said, not silent
