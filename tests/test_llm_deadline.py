"""The total-deadline helpers without a server: worker abandonment, scopes, the transport header."""

from __future__ import annotations

import asyncio
import threading
import time

import httpx
import pytest

from llama_index_docmemo.llms.wire import (
    DEADLINE_HEADER,
    DeadlineExceeded,
    DeadlineTransport,
    await_with_deadline,
    call_with_deadline,
    deadline_at,
    deadline_scope,
    header,
)


def test_a_slow_call_is_abandoned_at_the_deadline() -> None:
    release = threading.Event()
    started = time.perf_counter()
    with pytest.raises(DeadlineExceeded):
        call_with_deadline(lambda: release.wait(5), time.monotonic() + 0.2)
    assert time.perf_counter() - started < 1.0
    release.set()


def test_a_call_within_the_deadline_returns_or_raises_its_own_error() -> None:
    assert call_with_deadline(lambda: 42, time.monotonic() + 5) == 42
    with pytest.raises(KeyError):
        call_with_deadline(lambda: {}["x"], time.monotonic() + 5)
    assert call_with_deadline(lambda: 7, None) == 7


def test_the_worker_keeps_the_callers_context() -> None:
    with deadline_scope(30) as at:
        assert call_with_deadline(lambda: deadline_at(None), time.monotonic() + 5) == at


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


def test_the_transport_strips_the_header_and_shrinks_the_timeouts() -> None:
    seen: list[httpx.Request] = []

    def handler(request: httpx.Request) -> httpx.Response:
        seen.append(request)
        return httpx.Response(200, json={"ok": True})

    transport = DeadlineTransport(httpx.MockTransport(handler))
    with httpx.Client(transport=transport, timeout=60) as client:
        assert client.get("http://x/", headers=header(time.monotonic() + 2)).json() == {"ok": True}
        with pytest.raises(httpx.TimeoutException, match="total deadline passed"):
            client.get("http://x/", headers=header(time.monotonic() - 1))
    (request,) = seen
    assert DEADLINE_HEADER not in request.headers
    assert all(0 < v <= 2 for v in request.extensions["timeout"].values())


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
