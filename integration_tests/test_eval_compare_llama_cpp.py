"""``docmemo compare`` against the real llama.cpp server (SmolLM2-135M): the protocol, not the answers.

DocMemo's structured reads, the stock engine's completions and the judge's evaluator prompts all go
to a real OpenAI-compatible server, and the cost comes from its real usage fields. The server is
the one ``test_llama_cpp_server.py`` starts (``$DOCMEMO_LLAMA_CPP_PYTHON``); without it these tests
are skipped. A 135M model's answers and verdicts are noise: nothing here checks their content.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from test_eval_compare import make_pdf
from test_llama_cpp_server import ALIAS, N_CTX, client, server  # noqa: F401 (the fixture)

from llama_index_docmemo.evaluation.compare import Question, compare

pytestmark = pytest.mark.slow


def test_compare_speaks_to_llama_cpp_and_counts_its_usage(server: str, tmp_path: Path) -> None:  # noqa: F811
    docs = tmp_path / "docs"
    make_pdf(docs / "alpha.pdf", "alpha.pdf", 4)
    make_pdf(docs / "surveys" / "beta.pdf", "beta.pdf", 3)
    question = Question("survey", "How many adults did the Beta survey interview by cellphone?")
    llm = client(server, context_window=N_CTX)
    report = compare(
        docs, [question], tmp_path / "out", llm=llm, judge_llm=llm, pages=2, progress=False
    )
    rows = [json.loads(x) for x in (tmp_path / "out" / "results.jsonl").read_text().splitlines()]
    assert [r["engine"] for r in rows] == ["docmemo", "stock"]
    for row in rows:
        assert row["error"] is None, row["error"]
        assert row["llm_calls"] >= 1 and row["requests_without_usage"] == 0  # usage from the server
        assert row["prompt_tokens"] > 0 and row["images"] == 0
    pairwise = rows[0]["pairwise"]["stock"]  # the judge's evaluator prompts, asked in both orders
    assert pairwise["judge"] == ALIAS and pairwise["result"] in ("win", "tie", "loss")
    assert pairwise["first"] in ("a", "b", "tie", "invalid")
    assert report["totals"]["versus"]["stock"]["pairwise"]["judged_by"] == [ALIAS]
    assert (tmp_path / "out" / "report.html").is_file()
