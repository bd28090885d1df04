"""The app bounds the runtime: ``max_seconds`` holds for any LLM class, failures keep what was found.

LlamaIndex's own ``OpenAILike`` class (not this package's client, whose requests carry their
own deadline) reads from a scripted OpenAI-compatible server on 127.0.0.1 that answers round 1
(one page useful, a note, "need more") and then hangs, or fails, or is not there at all. The
query must return by its deadline with what round 1 found (sync and async), keep that evidence
when the LLM fails (stop "llm_error", the error naming the model and the URL), and raise an
error naming them when nothing was read. ``docmemo ask`` prints the partial result and exits 1.
"""

from __future__ import annotations

import asyncio
import json
import re
import socket
import time
from pathlib import Path

import pymupdf
import pytest
from fake_vllm_server import FakeVLLM, Reply, Request
from llama_index.llms.openai_like import OpenAILike

from llama_index_docmemo import DocMemoConfig, DocMemoIndex, LLMError, default_encoder, open_store
from llama_index_docmemo.cli import main

QUESTION = "What was the retail segment margin in 2023?"
SHOWN = re.compile(r"\[(\d+)\] (\S+\.pdf), page (\d+)")
MODEL = "local-model"
MAX_SECONDS = 3.0
MARGIN = 2.0  # building the result after the deadline: evidence page images
HANG = 20.0  # seconds a hanging server sleeps before answering


def round_one(request: Request) -> Reply:
    """Round 1: the first page shown is useful, with a note; the rest irrelevant."""
    shown = [int(n) for n, _, _ in SHOWN.findall(request.text)]
    return Reply(
        json.dumps(
            {
                "notes": [{"page": shown[0], "fact": "retail margin 12 percent"}],
                "useful_pages": shown[:1],
                "irrelevant_pages": shown[1:],
                "missing": ["the 2023 segment table"],
                "status": "need_more",
                "answer": None,
                "refined_query": "segment margin table 2023",
            }
        )
    )


def then(later: Reply):
    """Round 1 as above, every later request answered with ``later``."""

    def reply(request: Request) -> Reply:
        return round_one(request) if "Reading round 1." in request.text else later

    return reply


@pytest.fixture(scope="module")
def index(tmp_path_factory: pytest.TempPathFactory):
    root = tmp_path_factory.mktemp("runtime")
    doc = pymupdf.open()
    for number in range(1, 9):
        text = f"Page {number}. Retail segment margin notes, office plants and parking rules."
        doc.new_page().insert_text((72, 72), text, fontsize=11)
    doc.save(root / "report.pdf")
    encoder = default_encoder()
    store = open_store(path=root / "store", encoder=encoder)
    index = DocMemoIndex(store, encoder, root=root)
    assert index.indexer.index_paths([root / "report.pdf"]).ok
    yield index
    store.close()


def llm(url: str) -> OpenAILike:
    return OpenAILike(
        model=MODEL,
        api_base=url,
        api_key="x",
        is_chat_model=True,
        context_window=32768,
        max_retries=0,
        timeout=60,
    )


def engine(index: DocMemoIndex, url: str, **budget: float):
    config = DocMemoConfig(
        rounds=3, pages_per_round=3, candidates=8, adaptive_granularity=False, **budget
    )
    return index.as_query_engine(llm=llm(url), config=config, images=False)


def ask(eng, mode: str):
    """The question through ``query`` or ``aquery``."""
    return eng.query(QUESTION) if mode == "sync" else asyncio.run(eng.aquery(QUESTION))


@pytest.mark.parametrize("mode", ["sync", "async"])
def test_max_seconds_cuts_a_hanging_request_and_keeps_round_one(index, mode: str) -> None:
    with FakeVLLM([], default=then(Reply("{}", delay=HANG)), model=MODEL) as server:
        eng = engine(index, server.url, max_seconds=MAX_SECONDS)
        started = time.perf_counter()
        response = ask(eng, mode)
        took = time.perf_counter() - started
    trace = response.metadata["docmemo"]
    assert took < MAX_SECONDS + MARGIN, f"{took:.1f} s for max_seconds={MAX_SECONDS}"
    assert trace["stop_reason"] == "deadline"
    assert [r["round"] for r in trace["pages_read"]] == [1, 1, 1]
    assert "retail margin 12 percent" in str(response)  # round 1's note is the answer
    assert response.source_nodes, "round 1's useful page is evidence"


@pytest.mark.parametrize("mode", ["sync", "async"])
def test_an_llm_failure_after_round_one_keeps_what_was_found(index, mode: str) -> None:
    failing = Reply(status=500, error="the model crashed")
    with FakeVLLM([], default=then(failing), model=MODEL) as server:
        eng = engine(index, server.url)
        response = ask(eng, mode)
    trace = response.metadata["docmemo"]
    assert trace["stop_reason"] == "llm_error"
    assert MODEL in trace["error"] and server.url.rstrip("/") in trace["error"]
    assert "500" in trace["error"]
    assert response.source_nodes and "retail margin 12 percent" in str(response)


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def test_a_dead_server_before_any_page_names_the_model_and_url(index) -> None:
    url = f"http://127.0.0.1:{free_port()}/v1"  # nothing listens there
    with pytest.raises(LLMError) as raised:
        engine(index, url).query(QUESTION)
    message = str(raised.value)
    assert MODEL in message and url in message and "check that the server is up" in message


def test_docmemo_ask_prints_the_partial_result_and_exits_1(index, capsys) -> None:
    store_path = Path(index.store.path)
    index.store.close()  # the CLI opens the embedded store itself
    try:
        failing = Reply(status=500, error="the model crashed")
        with FakeVLLM([], default=then(failing), model=MODEL) as server:
            code = main(
                [
                    "ask",
                    QUESTION,
                    "--store",
                    str(store_path),
                    "--llm-url",
                    server.url,
                    "--llm-model",
                    MODEL,
                    "--llm-images",
                    "off",
                    "--json",
                ]
            )
    finally:
        index.store = open_store(path=store_path, encoder=index.encoder)
    out = json.loads(capsys.readouterr().out)
    assert code == 1
    assert out["stop_reason"] == "llm_error" and MODEL in out["error"]
    assert out["pages_read"], "round 1's pages are in the output"
