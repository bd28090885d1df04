"""The harness is an extra: the core never imports it, and ``docmemo eval`` without it names it.

Each check runs in a fresh interpreter (other tests import the harness into this one).
"""

from __future__ import annotations

import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
pytestmark = pytest.mark.slow


def run_python(code: str, tmp_path: Path) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-c", textwrap.dedent(code)],
        cwd=tmp_path,
        env={"PYTHONPATH": str(ROOT), "PATH": "/usr/bin:/bin", "HOME": str(tmp_path)},
        capture_output=True,
        text=True,
        timeout=120,
    )


def test_engine_and_ask_never_import_the_harness(tmp_path: Path) -> None:
    out = run_python(
        """
        import sys
        from llama_index_docmemo.cli import main
        from llama_index_docmemo.demo.document import write_demo_pdf

        pdf = write_demo_pdf("report.pdf")
        assert main(["index", str(pdf), "--store", "store", "--quiet"]) == 0
        assert main(["ask", "How many employees in 2024?", "--store", "store", "--json"]) == 0
        harness = [m for m in sys.modules if m.startswith("llama_index_docmemo.evaluation")]
        extra = [m for m in sys.modules if m.split(".")[0] in ("scipy", "matplotlib", "bm25s")]
        print("HARNESS", harness, "EXTRA", extra)
        """,
        tmp_path,
    )
    assert out.returncode == 0, out.stderr[-3000:]
    assert "HARNESS [] EXTRA []" in out.stdout


@pytest.mark.parametrize("command", ["eval", "compare"])
def test_harness_commands_name_the_missing_extra(tmp_path: Path, command: str) -> None:
    out = run_python(
        f"""
        import sys
        sys.modules["scipy"] = None  # as if the 'eval' extra were not installed
        from llama_index_docmemo.cli import main
        args = ["--data", "d", "--out", "o"] if {command!r} == "eval" else [
            "--docs", "d", "--questions", "q.txt", "--out", "o"]
        sys.exit(main([{command!r}, *args]))
        """,
        tmp_path,
    )
    assert out.returncode == 2, out.stderr[-3000:]
    assert f"docmemo {command} needs the 'eval' extra" in out.stderr
    assert "pip install 'llama-index-docmemo[eval]'" in out.stderr


def test_harness_help_works_without_the_extra(tmp_path: Path) -> None:
    out = run_python(
        """
        import sys
        sys.modules["scipy"] = None
        from llama_index_docmemo.cli import main
        main(["eval", "--help"])
        """,
        tmp_path,
    )
    assert out.returncode == 0 and "usage: docmemo eval" in out.stdout, out.stderr[-2000:]
