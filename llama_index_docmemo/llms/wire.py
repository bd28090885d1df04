"""One request to an OpenAI-compatible server on the wire, and what comes back.

Under :class:`~llama_index_docmemo.OpenAICompatible`, whose ``openai`` clients send the request:

- **a total deadline**, retries included. The client's ``timeout`` bounds each read, so a server
  that trickles a byte every few seconds could hold a request for ever. The deadline travels in a
  context variable (:func:`sending_until`) to :class:`DeadlineTransport`, an ``httpx`` transport
  under the client, which cuts each attempt's timeouts to the time left, stops reading a body at
  the deadline, and raises :class:`RequestDeadlinePassed` there, an ``openai`` error the client
  neither retries nor waits to retry; the async path is also cancelled at the deadline
  (:func:`await_with_deadline`). A sync request runs in the caller's thread.
  :func:`deadline_scope` lets a caller with its own budget (a query's ``max_seconds``) cap every
  request made inside it.
- **which failures are retried**: the transport marks a 5xx that refuses the structured-output
  form as not to be retried (:func:`_refusal_not_retried`), and a reply asking for a wait past
  the deadline (:func:`_wait_not_retried`).
- **what a failure becomes** (:func:`llm_failure`): an
  :class:`~llama_index_docmemo.errors.LLMError` naming the URL and model; a context overflow a
  :class:`~llama_index_docmemo.llms.context.ContextWindowError` carrying the server's window and
  the prompt's size, which the caller learns from.
- **what a reply must be before it is used** (:func:`chat_response`): the ``openai`` client
  builds its response objects without validating them, and gives back the body's text for a
  body that is not JSON (an HTML error page sent with HTTP 200). Whatever a server sends
  becomes a LlamaIndex ``ChatResponse`` or a
  :class:`~llama_index_docmemo.errors.MalformedReplyError` naming the server, the model and what
  was wrong (never an ``IndexError`` or ``AttributeError`` from deep inside a client).
- **the request body, encoded off the event loop** (:func:`wire_request`, :func:`send`):
  ``AsyncCompletions.create`` walks its arguments against the request's typed schema and encodes
  them to JSON on the event loop, 10-15 ms of CPU for a request carrying page images in base64,
  and 32 concurrent queries send theirs together (``benchmarks/query_stall.py``). The body is
  encoded in a blocking call instead, byte for byte as ``create`` sends it (its body fields in its
  order, ``extra_body`` merged over them, JSON as the SDK writes it), and posted through the
  client's public ``post`` with ``content=``: retries, timeouts, authentication and error types
  stay the SDK's own.
"""

from __future__ import annotations

import asyncio
import contextlib
import contextvars
import email.utils
import inspect
import json
import time
from collections.abc import AsyncIterator, Awaitable, Iterator
from dataclasses import dataclass
from functools import cache
from typing import Any, TypeVar

import httpx
import openai
from llama_index.core.base.llms.types import ChatResponse
from llama_index.llms.openai.utils import from_openai_message
from openai.types.chat import ChatCompletion, ChatCompletionChunk, ChatCompletionMessage
from pydantic import BaseModel, ValidationError

from llama_index_docmemo.errors import DeadlineExceeded, LLMError, MalformedReplyError
from llama_index_docmemo.llms.context import ContextWindowError, parse_overflow
from llama_index_docmemo.llms.environment import ENV_DEADLINE
from llama_index_docmemo.llms.structured import error_param, refuses_content, refuses_form

T = TypeVar("T")

TOTAL_DEADLINE_PASSED = "total deadline passed"

_SCOPE: contextvars.ContextVar[float | None] = contextvars.ContextVar(
    "docmemo_llm_deadline", default=None
)
_SENDING: contextvars.ContextVar[float | None] = contextvars.ContextVar(
    "docmemo_llm_request_deadline", default=None
)
"""The deadline of the request this thread or task is sending, read by the transports."""


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


@contextlib.contextmanager
def sending_until(at: float | None) -> Iterator[None]:
    """The requests this thread or task sends inside the block end by ``at``: each attempt's
    ``httpx`` timeouts are cut to the time left, and a body still arriving at ``at`` is cut."""
    token = _SENDING.set(at)
    try:
        yield
    finally:
        _SENDING.reset(token)


class RequestDeadlinePassed(openai.APITimeoutError):
    """The request's total deadline passed. An ``openai`` error: the client raises it as it is,
    without a retry (nor the wait before one)."""

    def __init__(self, request: httpx.Request, when: str) -> None:
        openai.APIConnectionError.__init__(
            self, message=f"{TOTAL_DEADLINE_PASSED} {when}", request=request
        )


def remaining(at: float | None) -> float | None:
    """Seconds left before ``at`` (None: no deadline); raises when none are left."""
    if at is None:
        return None
    left = at - time.monotonic()
    if left <= 0:
        raise DeadlineExceeded("the request's deadline has passed")
    return left


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


_LATE = 0.05
"""A timeout this close to the deadline is the deadline's (seconds)."""


def _cut_timeouts(request: httpx.Request, at: float) -> None:
    """Every timeout of this attempt at most the time left (raises when none is left)."""
    left = at - time.monotonic()
    if left <= 0:
        raise RequestDeadlinePassed(request, "before the request")
    timeouts = dict(request.extensions.get("timeout") or {})
    for key in ("connect", "read", "write", "pool"):
        value = timeouts.get(key)
        timeouts[key] = left if value is None else min(value, left)
    request.extensions["timeout"] = timeouts


def _passed(request: httpx.Request, at: float | None) -> RequestDeadlinePassed | None:
    """For a timeout: :class:`RequestDeadlinePassed` (not retried) when it came at the deadline;
    None for an earlier one (the client's own ``timeout``, which the client retries)."""
    if at is None or time.monotonic() < at - _LATE:
        return None
    return RequestDeadlinePassed(request, "while waiting for the server")


class _DeadlineStream(httpx.SyncByteStream):
    def __init__(self, inner: httpx.SyncByteStream, at: float, request: httpx.Request) -> None:
        self._inner = inner
        self._at = at
        self._request = request

    def __iter__(self) -> Iterator[bytes]:
        try:
            for chunk in self._inner:
                if time.monotonic() > self._at:
                    raise RequestDeadlinePassed(self._request, "while reading")
                yield chunk
        except httpx.TimeoutException as error:
            passed = _passed(self._request, self._at)
            if passed is None:
                raise
            raise passed from error

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
    """Wraps an ``httpx`` transport: ends each attempt of a request sent inside
    :func:`sending_until` by its deadline, and keeps the client from retrying a refusal of the
    structured-output form."""

    def __init__(self, inner: httpx.BaseTransport | None = None) -> None:
        self._inner = inner or httpx.HTTPTransport()

    def handle_request(self, request: httpx.Request) -> httpx.Response:
        at = _SENDING.get()
        if at is None:
            return self._sent(request, None)
        _cut_timeouts(request, at)
        try:
            response = self._sent(request, at)
            if isinstance(response.stream, httpx.SyncByteStream):
                response.stream = _DeadlineStream(response.stream, at, request)
            return response
        except httpx.TimeoutException as error:
            passed = _passed(request, at)
            if passed is None:
                raise
            raise passed from error

    def _sent(self, request: httpx.Request, at: float | None) -> httpx.Response:
        response = _wait_not_retried(self._inner.handle_request(request), at)
        if response.status_code >= 500:
            response.read()
            return _refusal_not_retried(response)
        return response

    def close(self) -> None:
        self._inner.close()


class AsyncDeadlineTransport(httpx.AsyncBaseTransport):
    """Async twin of :class:`DeadlineTransport` (the caller's ``wait_for`` bounds the body)."""

    def __init__(self, inner: httpx.AsyncBaseTransport | None = None) -> None:
        self._inner = inner or httpx.AsyncHTTPTransport()

    async def handle_async_request(self, request: httpx.Request) -> httpx.Response:
        at = _SENDING.get()
        if at is not None:
            _cut_timeouts(request, at)
        try:
            response = _wait_not_retried(await self._inner.handle_async_request(request), at)
        except httpx.TimeoutException as error:
            passed = _passed(request, at)
            if passed is None:
                raise
            raise passed from error
        if response.status_code >= 500:
            await response.aread()
            return _refusal_not_retried(response)
        return response

    async def aclose(self) -> None:
        await self._inner.aclose()


# -- what a failed request becomes ----------------------------------------------------
_RETRIED_STATUS = frozenset({408, 409, 429})


def status_of(exc: BaseException | None) -> int | None:
    return exc.status_code if isinstance(exc, openai.APIStatusError) else None


def refuses_form_of(exc: BaseException | None) -> bool:
    """Whether ``exc`` is the server refusing the request's structured-output form."""
    if not isinstance(exc, openai.APIStatusError):
        return False
    param = exc.param if isinstance(exc.param, str) else None
    return refuses_form(exc.status_code, param, error_text(exc))


def error_text(exc: BaseException) -> str:
    """The server's error message, from the body when it has one."""
    if isinstance(exc, openai.APIStatusError):
        body = exc.body
        if isinstance(body, dict):
            inner = body.get("error", body)
            message = inner.get("message") if isinstance(inner, dict) else inner
            if message:
                return str(message)
        return str(exc.message)
    return str(exc)


def describe(exc: BaseException) -> str:
    if isinstance(exc, openai.APITimeoutError):
        return "timed out"
    if isinstance(exc, openai.APIConnectionError):
        return f"could not connect ({exc.__cause__ or exc})"
    if isinstance(exc, openai.APIStatusError):
        return f"HTTP {exc.status_code}: {' '.join(error_text(exc).split())[:500]}"
    return f"{type(exc).__name__}: {exc}"


def is_llm_failure(exc: BaseException) -> bool:
    """Whether ``exc`` is an LLM endpoint failing (down, refusing, timing out), as this
    package's and the ``openai``/``httpx`` clients raise it, not a fault of the caller's code."""
    return isinstance(
        exc, LLMError | openai.OpenAIError | httpx.HTTPError | ConnectionError | TimeoutError
    )


def was_retried(exc: BaseException) -> bool:
    """Whether the ``openai`` client retries this failure (so it made several attempts)."""
    if isinstance(exc, openai.APIConnectionError):
        return True
    status = status_of(exc)
    text = error_text(exc)
    if status is None or refuses_form_of(exc) or refuses_content(text):
        return False  # a refusal of the form is marked not-to-retry (_refusal_not_retried)
    return status in _RETRIED_STATUS or status >= 500


def llm_failure(
    exc: BaseException, *, where: str, deadline: float, max_retries: int, reply_tokens: int
) -> LLMError:
    """The :class:`LLMError` for a failed request to ``where`` (a URL and model)."""
    if isinstance(exc, DeadlineExceeded | RequestDeadlinePassed):
        return LLMError(
            f"{where} did not answer within the total request deadline of "
            f"{deadline:g}s (request_deadline / {ENV_DEADLINE})"
        )
    if isinstance(exc, openai.APIStatusError):
        overflow = parse_overflow(error_text(exc), reply_tokens)
        if overflow is not None:
            window, prompt_tokens = overflow
            return ContextWindowError(
                f"{where}: the prompt ({prompt_tokens} tokens) does not fit the context "
                f"window of {window} tokens with {reply_tokens} kept for the reply",
                window=window,
                prompt_tokens=prompt_tokens,
            )
    retried = f"(retried up to {max_retries} times)" if was_retried(exc) else "(not retried)"
    return LLMError(f"{where} {describe(exc)} {retried}")


# -- what a reply must be ------------------------------------------------------------
EXCERPT_CHARS = 200
"""How much of an unusable body an error message quotes."""

READ_ERRORS: tuple[type[Exception], ...] = (
    json.JSONDecodeError,
    UnicodeDecodeError,
    AttributeError,
    TypeError,
    IndexError,
    KeyError,
    ValidationError,
)
"""What a client or LlamaIndex raises while reading a reply of the wrong shape (a body that is
not JSON, a field of the wrong type, an empty list indexed)."""


def excerpt(text: str, limit: int = EXCERPT_CHARS) -> str:
    """The start of ``text`` on one line, with its full length when it is cut."""
    flat = " ".join(text[: limit * 4].split())
    if len(flat) <= limit and len(text) <= limit * 4:
        return repr(flat)
    return f"{flat[:limit]!r}... ({len(text):,} characters)"


def completion_problem(response: object) -> str | None:
    """What makes ``response`` (what the ``openai`` client parsed) unusable as a chat
    completion; None when its first choice carries a message with text or nothing."""
    if isinstance(response, str | bytes):
        text = response if isinstance(response, str) else response.decode("utf-8", "replace")
        return f"a body that is not JSON: {excerpt(text)}"
    if not isinstance(response, ChatCompletion):
        return f"JSON that is not a chat completion: {excerpt(repr(response))}"
    choices = response.choices
    if not isinstance(choices, list):
        return f"'choices' is not a list but {excerpt(repr(choices))}"
    if not choices:
        return "an empty 'choices' list (no answer at all)"
    message = getattr(choices[0], "message", None)
    if not isinstance(message, ChatCompletionMessage):
        return f"choices[0] has no message object (got {excerpt(repr(choices[0]))})"
    if not isinstance(message.content, str | None):
        return f"choices[0].message.content is a {type(message.content).__name__}, not text"
    if not isinstance(message.role, str):
        return f"choices[0].message.role is a {type(message.role).__name__}, not a string"
    if not isinstance(message.tool_calls, list | None):
        return f"choices[0].message.tool_calls is a {type(message.tool_calls).__name__}"
    return None


def usage_counts(response: Any) -> dict[str, int]:
    """The reply's token counts (only those given as whole numbers)."""
    usage = getattr(response, "usage", None)
    counts = {}
    for key in ("prompt_tokens", "completion_tokens", "total_tokens"):
        value = getattr(usage, key, None)
        counts[key] = value if isinstance(value, int) and value >= 0 else 0
    return counts if usage is not None else {}


def chat_response(response: object, where: str) -> ChatResponse:
    """``response`` as a LlamaIndex ``ChatResponse``, or :class:`MalformedReplyError`."""
    problem = completion_problem(response)
    if problem is None:
        try:
            first = response.choices[0].message  # type: ignore[union-attr]
            message = from_openai_message(first, modalities=["text"])
            return ChatResponse(
                message=message, raw=response, additional_kwargs=usage_counts(response)
            )
        except READ_ERRORS as exc:
            problem = f"a message that cannot be read ({type(exc).__name__}: {exc})"
    raise malformed(where, problem)


def malformed(where: str, problem: str) -> MalformedReplyError:
    """The error for a reply from ``where`` (URL and model) that is ``problem``."""
    return MalformedReplyError(
        f"{where} sent a reply that is not a usable chat completion: {problem}"
    )


def unreadable(where: str, exc: BaseException) -> MalformedReplyError:
    """The error for a reply the client could not read at all (``exc``, one of READ_ERRORS)."""
    if isinstance(exc, json.JSONDecodeError):
        shown = f"{exc.msg} at character {exc.pos:,} of {len(exc.doc):,}"
        return malformed(where, f"a body that is not JSON ({shown}: {excerpt(exc.doc)})")
    return malformed(where, f"{type(exc).__name__}: {' '.join(str(exc).split())[:EXCERPT_CHARS]}")


# ``create``'s arguments that are request options, not body fields
_OPTIONS = {"extra_headers": "headers", "extra_query": "params", "timeout": "timeout"}


@cache
def _field_order() -> dict[str, int]:
    """``create``'s parameters in the order it writes them into the body."""
    names = inspect.signature(openai.resources.chat.AsyncCompletions.create).parameters
    return {name: n for n, name in enumerate(names)}


@dataclass(frozen=True)
class WireRequest:
    """A chat completion request ready to send: the encoded body and the request options."""

    body: bytes
    options: dict[str, Any]
    stream: bool


def _plain(value: Any) -> Any:
    """JSON for what ``json`` cannot write itself: a pydantic model as the SDK dumps it."""
    if isinstance(value, BaseModel):
        return value.model_dump(mode="json", exclude_unset=True, by_alias=True)
    raise TypeError(f"{type(value).__name__} is not JSON serialisable in a chat request")


def wire_request(request: dict[str, Any]) -> WireRequest:
    """``request`` (``chat.completions.create``'s keyword arguments) as a :class:`WireRequest`
    (blocking: encodes the whole body, images included)."""
    order = _field_order()
    given = [k for k in request if k not in _OPTIONS and k != "extra_body"]
    fields = {k: request[k] for k in sorted(given, key=lambda k: order.get(k, len(order)))}
    fields.update(request.get("extra_body") or {})
    options = {_OPTIONS[k]: request[k] for k in _OPTIONS if request.get(k) is not None}
    body = json.dumps(
        fields, default=_plain, ensure_ascii=False, separators=(",", ":"), allow_nan=False
    ).encode()
    return WireRequest(body=body, options=options, stream=bool(fields.get("stream")))


async def send(client: openai.AsyncOpenAI, wire: WireRequest) -> Any:
    """The reply to ``wire`` from ``client``: a ``ChatCompletion``, or an ``AsyncStream`` of
    chunks when it streams."""
    return await client.post(
        "/chat/completions",
        cast_to=ChatCompletion,
        content=wire.body,
        options=wire.options,  # type: ignore[arg-type]
        stream=wire.stream,
        stream_cls=openai.AsyncStream[ChatCompletionChunk],
    )
