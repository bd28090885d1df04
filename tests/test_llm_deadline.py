"""The total-deadline helpers without a server: scopes, the transport's cut timeouts, a
request sent in the caller's own thread with no header of ours, no retry past the deadline."""

from __future__ import annotations

import asyncio
import threading
import time

import httpx
import openai
import pytest

from llama_index_docmemo.errors import LLMError
from llama_index_docmemo.llms import OpenAICompatible
from llama_index_docmemo.llms.wire import (
    DeadlineExceeded,
    DeadlineTransport,
    RequestDeadlinePassed,
    await_with_deadline,
    deadline_at,
    deadline_scope,
    sending_until,
)

COMPLETION = {
    "id": "chatcmpl-1",
    "object": "chat.completion",
    "created": 0,
    "model": "m",
    "choices": [
        {"index": 0, "message": {"role": "assistant", "content": "hi"}, "finish_reason": "stop"}
    ],
}


async def test_an_awaitable_is_cancelled_at_the_deadline() -> None:
    with pytest.raises(DeadlineExceeded):
        await await_with_deadline(asyncio.sleep(5), time.monotonic() + 0.1)
    assert await await_with_deadline(asyncio.sleep(0, result="ok"), time.monotonic() + 1) == "ok"


def test_scopes_only_ever_tighten() -> None:
    assert deadline_at(None) is None
    with deadline_scope(10) as outer:
        assert deadline_at(100) == outer
        with deadline_scope(60):
            assert deadline_at(None) == outer  # the outer 10 s still bind
        own = deadline_at(1)
        assert own is not None and own < outer
    assert deadline_at(None) is None


def test_the_transport_cuts_each_attempts_timeouts_to_the_time_left() -> None:
    seen: list[httpx.Request] = []

    def handler(request: httpx.Request) -> httpx.Response:
        seen.append(request)
        return httpx.Response(200, json={"ok": True})

    transport = DeadlineTransport(httpx.MockTransport(handler))
    with httpx.Client(transport=transport, timeout=60) as client:
        assert client.get("http://x/").json() == {"ok": True}  # outside: untouched
        with sending_until(time.monotonic() + 2):
            assert client.get("http://x/").json() == {"ok": True}
        with sending_until(time.monotonic() - 1), pytest.raises(RequestDeadlinePassed):
            client.get("http://x/")
    untouched, cut = seen
    assert all(v == 60 for v in untouched.extensions["timeout"].values())
    assert all(0 < v <= 2 for v in cut.extensions["timeout"].values())


def test_a_timeout_at_the_deadline_is_not_retried() -> None:
    attempts: list[float] = []

    def handler(request: httpx.Request) -> httpx.Response:
        if not attempts:  # the first call only warms the client up
            attempts.append(0.0)
            return httpx.Response(200, json={"object": "list", "data": []})
        attempts.append(time.monotonic())
        time.sleep(max(0.0, at - time.monotonic()))  # silent until the (cut) read timeout
        raise httpx.ReadTimeout("timed out", request=request)

    http = httpx.Client(transport=DeadlineTransport(httpx.MockTransport(handler)))
    client = openai.OpenAI(api_key="x", base_url="http://x/v1", max_retries=5, http_client=http)
    client.models.list()
    at = time.monotonic() + 0.5
    with sending_until(at), pytest.raises(RequestDeadlinePassed):
        client.models.list()
    assert len(attempts) == 2  # one attempt: no retry
    assert time.monotonic() - at < 0.4  # and no wait for one (the client's backoff is 0.5 s+)


def test_a_sync_request_is_sent_in_the_callers_thread_without_a_header_of_ours() -> None:
    seen: list[tuple[int, httpx.Headers]] = []

    def handler(request: httpx.Request) -> httpx.Response:
        seen.append((threading.get_ident(), request.headers))
        return httpx.Response(200, json=COMPLETION)

    llm = OpenAICompatible(model="m", api_base="http://x/v1", max_retries=0)
    http = httpx.Client(transport=DeadlineTransport(httpx.MockTransport(handler)))
    llm._sync = openai.OpenAI(api_key="x", base_url="http://x/v1", http_client=http)
    threads = threading.active_count()
    assert llm.complete("hello").text == "hi"
    ((thread, headers),) = seen
    assert thread == threading.get_ident() and threading.active_count() == threads
    assert not [name for name in headers if name.startswith("x-docmemo")]


def test_a_sync_request_past_its_deadline_names_it() -> None:
    def handler(request: httpx.Request) -> httpx.Response:
        time.sleep(0.4)
        raise httpx.ReadTimeout("timed out", request=request)

    llm = OpenAICompatible(model="m", api_base="http://x/v1", max_retries=3, request_deadline=0.4)
    http = httpx.Client(transport=DeadlineTransport(httpx.MockTransport(handler)))
    llm._sync = openai.OpenAI(api_key="x", base_url="http://x/v1", max_retries=3, http_client=http)
    with pytest.raises(LLMError, match="total request deadline of 0.4s"):
        llm.complete("hello")


def test_a_5xx_refusing_the_response_format_is_marked_not_to_retry() -> None:
    def handler(request: httpx.Request) -> httpx.Response:
        if request.url.path == "/refuse":
            # llama-cpp-python 0.3.36's refusal of json_schema (its validation error as text)
            refusal = "{'type': 'literal_error', 'loc': ('body', 'response_format', 'type')}"
            return httpx.Response(500, json={"message": refusal})
        return httpx.Response(500, json={"message": "CUDA out of memory"})

    with httpx.Client(transport=DeadlineTransport(httpx.MockTransport(handler))) as client:
        assert client.get("http://x/refuse").headers.get("x-should-retry") == "false"
        assert "x-should-retry" not in client.get("http://x/fault").headers
