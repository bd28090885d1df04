"""The LLM judge against a local OpenAI-compatible server: verdicts, caching, errors naming the URL."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from fake_vllm_server import FakeVLLM, Reply, Request

from llama_index_docmemo.errors import LLMError
from llama_index_docmemo.evaluation.datasets import QAItem
from llama_index_docmemo.evaluation.judge import LLMJudge, judge_runs
from llama_index_docmemo.evaluation.metrics import QuestionRun

MODEL = "judge-test"
ITEMS = [
    QAItem("a", "d.pdf", "Revenue?", "4.2 million", (1,)),
    QAItem("b", "d.pdf", "CEO?", "Ann", (2,)),
]


def grade(request: Request) -> Reply:
    """Correct when the model answer line contains the gold answer."""
    text = request.text
    gold = text.split("Gold answer: ")[1].split("\n")[0]
    answer = text.split("Model answer: ")[1].split("\n")[0]
    return Reply(json.dumps({"correct": gold.split()[0] in answer}))


def test_judge_runs_and_caches(tmp_path: Path) -> None:
    runs = {
        "docmemo": [
            QuestionRun("docmemo", "a", reads=[], answer="It was 4.2 million dollars"),
            QuestionRun("docmemo", "b", reads=[], answer="Bob"),
        ]
    }
    with FakeVLLM([], default=grade, model=MODEL) as server:
        judge = LLMJudge(server.url, MODEL, timeout=5, max_retries=0)
        assert judge_runs(runs, ITEMS, tmp_path, judge) == {"docmemo": 0.5}
        assert len(server.requests) == 2 and not server.problems
        assert judge_runs(runs, ITEMS, tmp_path, judge) == {"docmemo": 0.5}
        assert len(server.requests) == 2  # cached in judge.jsonl
    assert len((tmp_path / "judge.jsonl").read_text().splitlines()) == 2


def test_judge_errors_name_the_url() -> None:
    with FakeVLLM([Reply("no json here")], model=MODEL) as server:
        judge = LLMJudge(server.url, MODEL, timeout=5, max_retries=0)
        with pytest.raises(LLMError, match=r"127\.0\.0\.1.*without a verdict"):
            judge.judge("q", "a", "b")
    with FakeVLLM([Reply(status=500)], model=MODEL) as server:
        judge = LLMJudge(server.url, MODEL, timeout=5, max_retries=0)
        with pytest.raises(LLMError, match="did not answer"):
            judge.judge("q", "a", "b")
