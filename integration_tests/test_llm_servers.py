"""Structured output, context fitting and the total deadline against each server's behaviour.

The scripted server (fake_vllm_server) refuses what each server refuses: llama.cpp's
``json_schema`` refusal is the reply recorded from llama-cpp-python (HTTP 500 + validation
message); OpenAI's and Ollama's are shaped after their documentation. Every request goes through
the real ``openai`` client.
"""

from __future__ import annotations

import asyncio
import json
import time

import openai.resources  # noqa: F401  (imported lazily by the client: keep it out of timings)
import pytest
from fake_vllm_server import FakeVLLM, Reply, Request
from llama_index.core.schema import NodeWithScore
from scripted_replies import reader_reply

from llama_index_docmemo.errors import LLMError
from llama_index_docmemo.events import counting_llm_calls
from llama_index_docmemo.ingest.summaries import VLMPageSummarizer
from llama_index_docmemo.llms import OpenAICompatible, deadline_scope
from llama_index_docmemo.llms.servers import ServerMemory
from llama_index_docmemo.memory.schema import DocumentSchema
from llama_index_docmemo.nodes import node_ref, page_node
from llama_index_docmemo.postprocessors.rerank import LLMReranker, RoundQueryBundle
from llama_index_docmemo.readers.base import PageView, ReaderInput
from llama_index_docmemo.readers.vlm import VLMReader
from llama_index_docmemo.types import PageInput, PageRecord, PageRef

MODEL = "served-model"


feedback = reader_reply


def llm(server: FakeVLLM, memory: ServerMemory | None = None, **kw) -> OpenAICompatible:
    options = {"timeout": 5.0, "max_retries": 1, "multimodal": False, "max_tokens": 200, **kw}
    return OpenAICompatible(model=MODEL, api_base=server.url, server_memory=memory, **options)


def pages(n: int, chars: int = 200) -> list[PageView]:
    return [
        PageView(
            ref=PageRef("report.pdf", 10 + i), text=f"Page {10 + i}. " + "revenue " * (chars // 8)
        )
        for i in range(n)
    ]


def round_input(n: int = 2, chars: int = 200) -> ReaderInput:
    return ReaderInput(question="What was revenue in 2023?", query="revenue", pages=pages(n, chars))


def form(request: Request) -> str:
    fmt = request.body.get("response_format") or {}
    if fmt:
        return fmt["type"]
    for key in ("structured_outputs", "guided_json"):
        if key in request.body:
            return key
    return "prompt"


# -- structured output, server by server ----------------------------------------------------------
@pytest.mark.parametrize(
    ("flavour", "expected"),
    [
        ("vllm", "json_schema"),
        ("openai", "json_schema"),
        ("ollama", "json_schema"),
        ("llama_cpp", "json_object"),
    ],
)
def test_auto_finds_the_form_each_server_takes_and_remembers_it(
    flavour: str, expected: str
) -> None:
    shared = ServerMemory()
    with FakeVLLM([], default=Reply(feedback()), model=MODEL, flavour=flavour) as server:
        reader = VLMReader(llm(server, shared))
        first = reader.read(round_input())
        second = VLMReader(llm(server, shared)).read(round_input())  # a new client, shared
    assert server.problems == []
    assert first.answer == second.answer == "$5.2M"
    assert [form(r) for r in server.requests] == [expected, expected]
    assert len(server.refusals) == (1 if flavour == "llama_cpp" else 0)
    assert shared.get(f"{server.url}#{MODEL}").structured_mode == expected
    if expected == "json_object":
        schema = server.requests[0].body["response_format"]["schema"]
        assert "useful_pages" in schema["properties"]


def test_llama_cpp_refusal_is_not_retried_as_a_server_fault() -> None:
    # the 500 is retried by the openai client (it cannot tell); the fallback follows once
    with FakeVLLM([], default=Reply(feedback()), model=MODEL, flavour="llama_cpp") as server:
        VLMReader(llm(server, max_retries=0)).read(round_input())
    assert (
        server.refusals == [server.refusals[0]] and "'text' or 'json_object'" in server.refusals[0]
    )


@pytest.mark.parametrize(
    "mode", ["json_schema", "structured_outputs", "guided_json", "json_object"]
)
def test_an_explicit_mode_is_used_as_is(mode: str) -> None:
    with FakeVLLM([Reply(feedback())], model=MODEL) as server:
        VLMReader(llm(server, structured_mode=mode)).read(round_input())
    request = server.requests[0]
    assert server.problems == [] and form(request) == mode
    assert request.schema is not None and "useful_pages" in request.schema["properties"]


def test_an_explicit_mode_the_server_refuses_is_a_clear_error_without_fallback() -> None:
    server = FakeVLLM([], default=Reply(feedback()), model=MODEL, flavour="openai")
    with (
        server,
        pytest.raises(LLMError, match=r"HTTP 400: Unrecognized request argument.*guided_json"),
    ):
        VLMReader(llm(server, structured_mode="guided_json")).read(round_input())
    assert server.requests == []


def test_a_server_refusing_every_field_gets_the_schema_in_the_prompt() -> None:
    # json_schema refused, then json_object + schema refused, each by the field the error names
    # (its text alone would not tell): prompt mode
    def refuse_all(request: Request) -> Reply:
        if form(request) == "prompt":
            return Reply(feedback())
        return Reply(status=400, error="not supported", param="response_format")

    with FakeVLLM([], default=refuse_all, model=MODEL) as server:
        client = llm(server)
        fb = VLMReader(client).read(round_input())
    assert [form(r) for r in server.requests] == ["json_schema", "json_object", "prompt"]
    assert (
        "validates against this JSON schema" in server.requests[-1].body["messages"][0]["content"]
    )
    assert fb.answer == "$5.2M"
    assert client.server_memory.get(client.server).structured_mode == "prompt"


def test_prompt_mode_repairs_a_malformed_reply() -> None:
    script = [Reply("The answer is $5.2M, see page [1]."), Reply(feedback())]
    with FakeVLLM(script, model=MODEL) as server:
        fb = VLMReader(llm(server, structured_mode="prompt")).read(round_input())
    assert fb.answer == "$5.2M" and len(server.requests) == 2
    assert all(form(r) == "prompt" for r in server.requests)
    assert "The answer is $5.2M" in server.requests[1].text


def test_a_server_fault_that_names_no_format_is_not_a_fallback() -> None:
    server = FakeVLLM([], default=Reply(status=500, error="CUDA out of memory"), model=MODEL)
    client = llm(server)
    with server, pytest.raises(LLMError, match="HTTP 500: CUDA out of memory"):
        VLMReader(client).read(round_input())
    assert {form(r) for r in server.requests} == {"json_schema"}
    assert client.server_memory.get(client.server).structured_mode is None


async def test_async_auto_fallback_and_concurrency_on_llama_cpp() -> None:
    with FakeVLLM([], default=Reply(feedback()), model=MODEL, flavour="llama_cpp") as server:
        reader = VLMReader(llm(server))
        results = await asyncio.gather(*(reader.aread(round_input()) for _ in range(4)))
    assert all(r.answer == "$5.2M" for r in results)
    assert {form(r) for r in server.requests} == {"json_object"} and len(server.requests) == 4


def test_reranker_and_summaries_use_the_same_mode() -> None:
    candidates = [
        NodeWithScore(
            node=page_node(PageRecord("report.pdf", "v1", n, 10, "", ""), summary=f"summary {n}"),
            score=0.5,
        )
        for n in range(1, 6)
    ]

    def answer(request: Request) -> Reply:
        if "pages" in (request.schema or {}).get("properties", {}):
            return Reply('{"pages": [2]}')
        return Reply(json.dumps({"summaries": [{"page": 1, "summary": "Revenue table"}]}))

    schema = DocumentSchema(doc_id="report.pdf", doc_version="v1", n_pages=1, title="Report")
    page = PageInput(ref=PageRef("report.pdf", 1), text="Revenue 2023 $5.2M")
    with FakeVLLM([], default=answer, model=MODEL, flavour="llama_cpp") as server:
        client = llm(server)
        bundle = RoundQueryBundle(query_str="q", question="q")
        out = LLMReranker(llm=client, top_n=2).postprocess_nodes(candidates, bundle)
        picked = [node_ref(n) for n in out]
        summaries = VLMPageSummarizer(client, images=False)(schema, [page])
    assert picked[0] == PageRef("report.pdf", 2) and summaries == {1: "Revenue table"}
    assert [form(r) for r in server.requests] == ["json_object", "json_object"]


# -- context window ---------------------------------------------------------------------------
def test_long_pages_are_cut_to_fit_a_small_window_each_keeping_a_share() -> None:
    with FakeVLLM(
        [], default=Reply(feedback()), model=MODEL, context_window=2048, chars_per_token=4.0
    ) as server:
        fb = VLMReader(llm(server, context_window=2048, max_tokens=256)).read(
            round_input(4, chars=12000)
        )
    (request,) = server.requests
    assert server.refusals == [] and fb.answer == "$5.2M"
    assert server.prompt_tokens(request) + 256 <= 2048
    for n in (10, 11, 12, 13):
        assert f"[{n - 9}] report.pdf, page {n}" in request.text  # every page still shown
    assert request.text.count("more characters not shown]") >= 4


def test_an_overflow_teaches_the_window_and_the_ratio_then_fits() -> None:
    # the client believes 32k; the server holds 2048 tokens and counts 2 characters a token
    with FakeVLLM(
        [], default=Reply(feedback()), model=MODEL, context_window=2048, chars_per_token=2.0
    ) as server:
        client = llm(server, max_tokens=256)
        with counting_llm_calls() as first:
            fb = VLMReader(client).read(round_input(4, chars=6000))
        with counting_llm_calls() as second:
            again = VLMReader(client).read(round_input(4, chars=6000))
    assert len(server.refusals) == 1 and "maximum context length is 2048" in server.refusals[0]
    assert fb.answer == again.answer == "$5.2M"
    assert first.calls == 2 and second.calls == 1  # learned: the second round fits at once
    facts = client.server_memory.get(f"{server.url}#{MODEL}")
    assert facts.context_window == 2048 and facts.chars_per_token <= 2.0
    assert all(server.prompt_tokens(r) + 256 <= 2048 for r in server.requests)


def test_instructions_that_cannot_fit_are_refused_before_sending() -> None:
    server = FakeVLLM([], default=Reply(feedback()), model=MODEL)
    with server, pytest.raises(LLMError, match="context window 300"):
        VLMReader(llm(server, context_window=300, max_tokens=200)).read(round_input(2))
    assert server.requests == []


def test_the_window_is_read_from_a_vllm_model_list() -> None:
    with FakeVLLM([], default=Reply(feedback()), model=MODEL) as server:
        server.model_card = {"max_model_len": 4096}
        assert llm(server).context_budget().window == 4096


# -- total deadline -------------------------------------------------------------------------------
def test_a_trickling_server_cannot_hold_a_request_past_the_deadline() -> None:
    # one byte every 0.5 s never trips the 5 s read timeout; the 2 s deadline ends it
    with FakeVLLM([], default=Reply(feedback(), trickle=0.5), model=MODEL) as server:
        started = time.perf_counter()
        with pytest.raises(LLMError, match="total request deadline of 2s"):
            VLMReader(llm(server, request_deadline=2.0)).read(round_input(1))
        elapsed = time.perf_counter() - started
        time.sleep(1.5)  # the abandoned worker stops reading at its next byte
    assert 2.0 <= elapsed < 4.0  # the whole reply would take minutes
    assert server.trickles_cut >= 1


async def test_a_trickling_server_cannot_hold_an_async_request_past_the_deadline() -> None:
    with FakeVLLM([], default=Reply(feedback(), trickle=0.5), model=MODEL) as server:
        started = time.perf_counter()
        with pytest.raises(LLMError, match="total request deadline"):
            await VLMReader(llm(server, request_deadline=2.0)).aread(round_input(1))
        elapsed = time.perf_counter() - started
    assert 2.0 <= elapsed < 4.0  # the whole reply would take minutes


def test_retries_stop_at_the_deadline() -> None:
    # every attempt times out after 1 s; 5 retries would take 8 s, the deadline allows 2.5 s
    with FakeVLLM([], default=Reply(feedback(), delay=3.0), model=MODEL) as server:
        started = time.perf_counter()
        with pytest.raises(LLMError, match="deadline"):
            VLMReader(llm(server, timeout=1.0, max_retries=5, request_deadline=2.5)).read(
                round_input(1)
            )
        assert time.perf_counter() - started < 4.5
        time.sleep(1.0)
    assert len(server.requests) <= 3


def test_a_caller_scope_tightens_the_deadline() -> None:
    with FakeVLLM([], default=Reply(feedback(), trickle=0.5), model=MODEL) as server:
        started = time.perf_counter()
        with deadline_scope(1.0), pytest.raises(LLMError, match="deadline"):
            VLMReader(llm(server, request_deadline=30.0)).read(round_input(1))
        assert time.perf_counter() - started < 3.0


def test_streaming_stops_at_the_deadline() -> None:
    with FakeVLLM(
        [], default=Reply(feedback(), trickle=0.5), model=MODEL, require_schema=False
    ) as server:
        client = llm(server, request_deadline=2.0)
        started = time.perf_counter()
        with pytest.raises(LLMError, match="deadline|timed out"):
            for _ in client.stream_complete("hello"):
                pass
        assert time.perf_counter() - started < 4.5


def test_json_schema_forced_on_llama_cpp_fails_at_once_naming_the_refusal() -> None:
    server = FakeVLLM([], default=Reply(feedback()), model=MODEL, flavour="llama_cpp")
    with server, pytest.raises(LLMError, match=r"HTTP 500: .*'text' or 'json_object'.*not retried"):
        VLMReader(llm(server, structured_mode="json_schema", max_retries=3)).read(round_input())
    assert len(server.refusals) == 1


@pytest.mark.parametrize("usage", [True, False], ids=["usage", "no-usage"])
def test_tokens_are_the_servers_usage_else_the_tokenizers_count(usage: bool) -> None:
    from llama_index.core.settings import Settings

    with FakeVLLM(model=MODEL, default=Reply(feedback()), usage=usage) as server:
        reader = VLMReader(llm(server, context_window=8192))
        with counting_llm_calls() as cost:
            reader.read(round_input())
    (request,) = server.requests
    texts = [m["content"] for m in request.body["messages"]]
    if usage:  # the server's own counts (its text characters / 4)
        assert cost.prompt_tokens == len(request.text) // 4 and cost.without_usage == 0
        assert cost.completion_tokens == len(feedback()) // 4
    else:  # LlamaIndex's tokenizer over what was sent and what came back
        assert cost.prompt_tokens == sum(len(Settings.tokenizer(t)) for t in texts)
        assert cost.completion_tokens == len(Settings.tokenizer(feedback()))
        assert cost.without_usage == 1
