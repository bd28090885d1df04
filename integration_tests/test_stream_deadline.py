"""The streamed final answer runs under the query's ``max_seconds``: against a server that streams
for ever, the stream ends at the deadline with the text it had, and the trace says why."""

from __future__ import annotations

import json
import sys
import time
from collections.abc import Iterator
from pathlib import Path

import pytest
from fake_vllm_server import FakeVLLM, Reply, Request
from llama_index.core.base.response.schema import AsyncStreamingResponse, StreamingResponse

from llama_index_docmemo.config import DocMemoConfig
from llama_index_docmemo.llms import OpenAICompatible
from llama_index_docmemo.query_engine import DocMemoQueryEngine
from llama_index_docmemo.store import PageStore
from llama_index_docmemo.store.scope import PageFilter

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "tests"))
from fakes_docmemo import BagOfWordsEncoder  # noqa: E402
from stores_docmemo import StoreMaker, add_document  # noqa: E402

MODEL = "served-model"
LIMIT = 3.0


def reply(request: Request) -> Reply:
    if request.body.get("stream"):
        return Reply("The answer is", endless=0.05)  # a chunk every 50 ms, never [DONE]
    answer = {"status": "answered", "answer": "12 percent", "useful_pages": [1], "notes": []}
    return Reply(json.dumps(answer))


@pytest.fixture(scope="module")
def store(tmp_path_factory: pytest.TempPathFactory) -> Iterator[PageStore]:
    """The report in an Edge store on disk, shared: the queries only read it."""
    shared = StoreMaker(tmp_path_factory.mktemp("stores")).open("edge")
    add_document(shared, "report.pdf", [f"page {i} about revenue growth" for i in range(1, 11)])
    yield shared
    shared.close()


def engine(server: FakeVLLM, store: PageStore) -> DocMemoQueryEngine:
    llm = OpenAICompatible(model=MODEL, api_base=server.url, multimodal=False, max_retries=0)
    return DocMemoQueryEngine.from_defaults(
        store=store,
        encoder=BagOfWordsEncoder(),
        llm=llm,
        config=DocMemoConfig(rounds=1, adaptive_granularity=False, max_seconds=LIMIT),
        page_filter=PageFilter(doc_ids=("report.pdf",)),
        evidence_images=False,
        streaming=True,
    )


def check(text: str, trace: dict, started: float) -> None:
    assert time.perf_counter() - started < LIMIT + 1.5
    assert text.startswith("The answer is") and text.count(" more") >= 3
    assert trace["answer"] == text and "deadline" in trace["error"]


def test_a_stream_that_never_ends_stops_at_the_deadline(store: PageStore) -> None:
    with FakeVLLM([], default=reply, model=MODEL, require_schema=False) as server:
        started = time.perf_counter()
        response = engine(server, store).query("revenue growth")
        assert isinstance(response, StreamingResponse)
        text = "".join(response.response_gen)
    check(text, response.metadata["docmemo"], started)


@pytest.mark.asyncio
async def test_an_async_stream_that_never_ends_stops_at_the_deadline(store: PageStore) -> None:
    with FakeVLLM([], default=reply, model=MODEL, require_schema=False) as server:
        started = time.perf_counter()
        response = await engine(server, store).aquery("revenue growth")
        assert isinstance(response, AsyncStreamingResponse)
        text = "".join([piece async for piece in response.async_response_gen()])
    check(text, response.metadata["docmemo"], started)


def test_no_time_left_streams_the_loops_answer_without_asking(store: PageStore) -> None:
    def slow(request: Request) -> Reply:
        found = reply(request)
        found.delay = 0 if request.body.get("stream") else LIMIT + 0.2
        return found

    with FakeVLLM([], default=slow, model=MODEL, require_schema=False) as server:
        response = engine(server, store).query("revenue growth")
        text = "".join(response.response_gen)
        assert not any(r.body.get("stream") for r in server.requests)
    trace = response.metadata["docmemo"]
    # the reader's LLM never answered before the deadline: the stop and the error say so
    assert trace["stop_reason"] == "llm_error" and "max_seconds" in trace["error"] and text
