"""The runnable examples stay true: quickstart and drop-in run on the generated demo report, and
compare_engines against a scripted OpenAI-compatible server (``scripted_replies``)."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest
from fake_vllm_server import FakeVLLM
from scripted_replies import answer

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


def test_compare_engines_example_writes_the_report_with_each_engine(tmp_path: Path) -> None:
    write_demo_pdf(tmp_path / "docs" / "report.pdf")
    questions = tmp_path / "questions.txt"
    questions.write_text("How many employees were in the Nordic region at the end of 2024?\n")
    env = {k: v for k, v in os.environ.items() if not k.startswith("DOCMEMO_LLM")}
    with FakeVLLM([], default=answer, model="qwen2.5-vl-7b", require_schema=False) as server:
        out = subprocess.run(
            [
                sys.executable,
                str(EXAMPLES / "compare_engines.py"),
                str(tmp_path / "docs"),
                str(questions),
                str(tmp_path / "out"),
                *("--llm-url", server.url, "--llm-model", "qwen2.5-vl-7b"),
                *("--judge-url", server.url, "--judge-model", "qwen2.5-vl-7b"),
            ],
            cwd=tmp_path,
            env=env,
            capture_output=True,
            text=True,
            timeout=300,
        )
    assert out.returncode == 0, out.stderr[-2000:]
    assert server.problems == [] and server.requests  # the example's LLM is the server
    for engine in ("docmemo", "stock", "stock-ocr"):
        assert f"{engine}: correct" in out.stdout, out.stdout
    assert (tmp_path / "out" / "report.html").is_file()
