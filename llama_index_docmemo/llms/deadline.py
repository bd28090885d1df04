"""A total deadline for one LLM request, retries included.

The ``openai`` client's ``timeout`` bounds each read, so a server that trickles a byte every few
seconds can hold a request for ever. Three pieces close that gap:

- the caller gives up at the deadline: ``asyncio.wait_for`` on the async path, a worker thread
  waited on with a timeout on the sync path (:func:`call_with_deadline`);
- :class:`DeadlineTransport` (an ``httpx`` transport under the ``openai`` client) shrinks each
  attempt's timeouts to the time left and stops reading a body once the deadline has passed, so
  an abandoned worker ends within one read and a retry never starts late;
- :func:`deadline_scope` lets a caller with its own budget (a query's ``max_seconds``) cap
  every request made inside it.

The transport also marks a 5xx that refuses the structured-output form as not to be retried
(see :func:`_refusal_not_retried`), and a reply asking for a wait past the deadline
(:func:`_wait_not_retried`). The deadline travels with each HTTP request as the header :data:`DEADLINE_HEADER` (a
``time.monotonic()`` instant, read and removed by the transport, never sent).
"""

from __future__ import annotations

import asyncio
import concurrent.futures
import contextlib
import contextvars
import email.utils
import threading
import time
from collections.abc import AsyncIterator, Awaitable, Callable, Iterator
from typing import TypeVar

import httpx

from llama_index_docmemo.errors import DeadlineExceeded
from llama_index_docmemo.llms.structured import error_param, refuses_content, refuses_form

T = TypeVar("T")

DEADLINE_HEADER = "x-docmemo-deadline"
TOTAL_DEADLINE_PASSED = "total deadline passed"

_SCOPE: contextvars.ContextVar[float | None] = contextvars.ContextVar(
    "docmemo_llm_deadline", default=None
)


@contextlib.contextmanager
def deadline_scope(seconds: float) -> Iterator[float]:
    """Cap every LLM request made inside the block at ``seconds`` from now (nesting tightens)."""
    at = time.monotonic() + seconds
    outer = _SCOPE.get()
    token = _SCOPE.set(at if outer is None else min(outer, at))
    try:
        yield at
    finally:
        _SCOPE.reset(token)


def deadline_at(seconds: float | None) -> float | None:
    """The monotonic instant a request started now must end: its own limit or the scope's."""
    own = None if seconds is None else time.monotonic() + seconds
    scope = _SCOPE.get()
    candidates = [t for t in (own, scope) if t is not None]
    return min(candidates) if candidates else None


def remaining(at: float | None) -> float | None:
    """Seconds left before ``at`` (None: no deadline); raises when none are left."""
    if at is None:
        return None
    left = at - time.monotonic()
    if left <= 0:
        raise DeadlineExceeded("the request's deadline has passed")
    return left


def header(at: float | None) -> dict[str, str]:
    """``extra_headers`` carrying the deadline to :class:`DeadlineTransport`."""
    return {} if at is None else {DEADLINE_HEADER: repr(at)}


def call_with_deadline(fn: Callable[[], T], at: float | None) -> T:
    """``fn()`` in a worker thread, abandoned (raising :class:`DeadlineExceeded`) at ``at``.

    The worker keeps the caller's context variables. An abandoned worker is stopped by
    :class:`DeadlineTransport` at its next read.
    """
    if at is None:
        return fn()
    future: concurrent.futures.Future[T] = concurrent.futures.Future()
    context = contextvars.copy_context()

    def work() -> None:
        if not future.set_running_or_notify_cancel():
            return
        try:
            future.set_result(context.run(fn))
        except BaseException as exc:  # handed to the caller
            future.set_exception(exc)

    threading.Thread(target=work, name="docmemo-llm-request", daemon=True).start()
    try:
        return future.result(timeout=remaining(at))
    except concurrent.futures.TimeoutError:
        if future.done():  # fn's own error, or it finished just in time
            return future.result()
        raise DeadlineExceeded("the request's deadline has passed") from None


async def await_with_deadline(awaitable: Awaitable[T], at: float | None) -> T:
    """``await awaitable``, cancelled (raising :class:`DeadlineExceeded`) at ``at``."""
    if at is None:
        return await awaitable
    try:
        return await asyncio.wait_for(awaitable, remaining(at))
    except asyncio.TimeoutError:
        raise DeadlineExceeded("the request's deadline has passed") from None


def iterate_with_deadline(chunks: Iterator[T], at: float | None) -> Iterator[T]:
    """``chunks``, stopped with :class:`DeadlineExceeded` once ``at`` has passed."""
    for chunk in chunks:
        remaining(at)
        yield chunk


async def aiterate_with_deadline(chunks: AsyncIterator[T], at: float | None) -> AsyncIterator[T]:
    """Async ``chunks``, each awaited within the time left before ``at``."""
    iterator = aiter(chunks)
    while True:
        try:
            chunk = await await_with_deadline(anext(iterator), at)
        except StopAsyncIteration:
            return
        yield chunk


def _pop_deadline(request: httpx.Request) -> float | None:
    raw = request.headers.get(DEADLINE_HEADER)
    if raw is None:
        return None
    del request.headers[DEADLINE_HEADER]
    try:
        return float(raw)
    except ValueError:
        return None


def _shrink_timeouts(request: httpx.Request, at: float) -> None:
    """Every timeout of this attempt at most the time left (raises when none is left)."""
    left = at - time.monotonic()
    if left <= 0:
        raise httpx.ConnectTimeout(f"{TOTAL_DEADLINE_PASSED} before the request", request=request)
    timeouts = dict(request.extensions.get("timeout") or {})
    for key in ("connect", "read", "write", "pool"):
        value = timeouts.get(key)
        timeouts[key] = left if value is None else min(value, left)
    request.extensions["timeout"] = timeouts


class _DeadlineStream(httpx.SyncByteStream):
    def __init__(self, inner: httpx.SyncByteStream, at: float, request: httpx.Request) -> None:
        self._inner = inner
        self._at = at
        self._request = request

    def __iter__(self) -> Iterator[bytes]:
        for chunk in self._inner:
            if time.monotonic() > self._at:
                raise httpx.ReadTimeout(
                    f"{TOTAL_DEADLINE_PASSED} while reading", request=self._request
                )
            yield chunk

    def close(self) -> None:
        self._inner.close()


def _refusal_not_retried(response: httpx.Response) -> httpx.Response:
    """A 5xx refusing the request's form, marked ``x-should-retry: false``.

    llama-cpp-python refuses an unsupported ``response_format``, and list content for a text
    model, with HTTP 500; the ``openai`` client would retry that as a server fault. The header
    is the client's own switch for "do not retry this"; the caller then asks in another form
    (structured mode, or text only).
    """
    text = response.text
    if refuses_form(response.status_code, error_param(text), text) or refuses_content(text):
        response.headers["x-should-retry"] = "false"
    return response


def retry_after(response: httpx.Response) -> float | None:
    """The seconds a reply asks the client to wait before trying again (``Retry-After-Ms``,
    ``Retry-After`` in seconds or as an HTTP date), None when it asks nothing."""
    headers = response.headers
    try:
        if "retry-after-ms" in headers:
            return float(headers["retry-after-ms"]) / 1000
        if "retry-after" in headers:
            return float(headers["retry-after"])
    except ValueError:
        when = email.utils.parsedate_tz(headers["retry-after"])
        if when is not None:
            return email.utils.mktime_tz(when) - time.time()
    return None


def _wait_not_retried(response: httpx.Response, at: float | None) -> httpx.Response:
    """A reply asking for a wait past the deadline (429 with ``Retry-After: 60``), marked
    ``x-should-retry: false``: the client then raises it at once (HTTP 429 and the server's
    message), instead of sleeping until the deadline and reporting a server that did not
    answer."""
    wait = retry_after(response)
    if at is not None and wait is not None and wait > at - time.monotonic():
        response.headers["x-should-retry"] = "false"
    return response


class DeadlineTransport(httpx.BaseTransport):
    """Wraps an ``httpx`` transport: applies the deadline a request carries in its header,
    and keeps the client from retrying a refusal of the structured-output form."""

    def __init__(self, inner: httpx.BaseTransport | None = None) -> None:
        self._inner = inner or httpx.HTTPTransport()

    def handle_request(self, request: httpx.Request) -> httpx.Response:
        at = _pop_deadline(request)
        if at is not None:
            _shrink_timeouts(request, at)
        response = _wait_not_retried(self._inner.handle_request(request), at)
        if response.status_code >= 500:
            response.read()
            return _refusal_not_retried(response)
        if at is not None and isinstance(response.stream, httpx.SyncByteStream):
            response.stream = _DeadlineStream(response.stream, at, request)
        return response

    def close(self) -> None:
        self._inner.close()


class AsyncDeadlineTransport(httpx.AsyncBaseTransport):
    """Async twin of :class:`DeadlineTransport` (the caller's ``wait_for`` does the rest)."""

    def __init__(self, inner: httpx.AsyncBaseTransport | None = None) -> None:
        self._inner = inner or httpx.AsyncHTTPTransport()

    async def handle_async_request(self, request: httpx.Request) -> httpx.Response:
        at = _pop_deadline(request)
        if at is not None:
            _shrink_timeouts(request, at)
        response = _wait_not_retried(await self._inner.handle_async_request(request), at)
        if response.status_code >= 500:
            await response.aread()
            return _refusal_not_retried(response)
        return response

    async def aclose(self) -> None:
        await self._inner.aclose()
