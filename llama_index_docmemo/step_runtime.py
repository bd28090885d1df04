"""How the package runs its I/O: steps written once, run by a sync and an async driver, and
where work that would block runs (the concurrency policy), in one place.

**Steps.** A step is a generator that *yields* the I/O it needs as :class:`Call` objects and
receives each result back (or has the call's exception thrown into it); it holds the logic, no
I/O. The two drivers below are the only places that perform I/O: :func:`run` calls the sync functions
(a sync caller never gets an event loop or a thread of ours), :func:`arun` awaits the async ones
or, for CPU-bound or blocking work without an async twin, runs the sync function in a worker
thread, so nothing blocks the event loop. This is how the loop, the readers, the reranker, the
LLM exchange and the page store (each operation a :class:`Call` of its backend) are written once
for ``query`` and ``aquery``, with one vocabulary of effects and one :data:`Steps` type::

    def search_and_read(store, reader, query):
        hits = yield Call(store.search, store.asearch, (query,), {"limit": 5})
        return (yield Call(reader.read, reader.aread, (hits,)))

    run(search_and_read(...))          # sync
    await arun(search_and_read(...))   # async

A step may also yield :func:`parallel` steps: the sync driver runs them one after the other,
the async one concurrently; the step receives the list of their results (an exception from any
of them is thrown into the step). And it may yield steps :func:`within` a deadline: the async
driver cancels them when it passes, the sync driver runs each of their calls on a bounded pool
and stops waiting for it (the call is abandoned, and ends by its own timeout); either way the
step receives :class:`~llama_index_docmemo.errors.DeadlineExceeded`. That holds for any LLM
class, whatever its own timeouts and retries.

**Where blocking work runs** (the package constructs thread pools nowhere else). A process has
at most two pools of this package's, each started on first use, owned by the
process and shut down with it (``concurrent.futures`` joins their threads at interpreter exit;
a forked child starts its own):

- :func:`blocking_pool`, **blocking calls**: one thread a core (at least 2, at most 32). The
  async path's short blocking calls (page images resized and encoded, LlamaIndex validating
  image blocks, request bodies built, the query encoder, qdrant-client's local mode) and the
  sync driver's calls under a ``max_seconds`` deadline (it stops waiting at the deadline; an
  abandoned call holds its thread until its own timeout, and ``OpenAICompatible`` requests
  carry the deadline). Those calls hold the GIL part of the time, and with more of them
  runnable than there are cores the event loop waits longer for it: eight concurrent
  ``aquery`` calls on 2 cores with a CPU-bound process beside them
  (``integration_tests/test_async_nonblocking.py``'s heartbeat) stalled the loop at most
  54-98 ms on asyncio's default pool of 6 threads (4 runs), 43-60 ms on this pool's 2 (5 runs).
- :func:`cpu_pool`, **GIL-holding work**: one thread. PyMuPDF renders and layout analysis
  (query crops and page images, and the render-ahead of indexing) and Qdrant Edge's calls hold
  the GIL through a call, so more threads do not run them faster and make the loop wait longer
  (``benchmarks/loop_stall.py work``: 24 pages, 8 at a time, 2 cores: layout analysis stalled
  the loop at most 80-85 ms on one thread, 88-150 ms on two, 165-335 ms on asyncio's pool;
  8 threads of Edge searches stalled it 224-348 ms, one 35 ms). One thread also renders one
  page at a time, as MuPDF needs. An app that wants the renders on many cores passes its own
  executor to the engine (``cpu_executor=``, e.g. a ``ProcessPoolExecutor``: the functions
  sent are module-level and their arguments picklable); it owns and shuts down that one.

A sync caller never gets a thread of ours, except for calls under a deadline. Every call runs
in the caller's context (deadline scopes, LLM call counts, the CPU executor). Child processes
are not pools: OCR's Tesseract workers (``ingest/ocr.py``) live for one call and are killed
by it, and Ray workers belong to the Ray cluster.
"""

from __future__ import annotations

import asyncio
import concurrent.futures
import contextlib
import contextvars
import os
import threading
import time
from collections.abc import Awaitable, Callable, Generator, Iterator, Mapping
from concurrent.futures import Executor, ThreadPoolExecutor
from dataclasses import dataclass, field
from functools import partial
from typing import Any, TypeVar

from llama_index_docmemo.errors import DeadlineExceeded

T = TypeVar("T")

# -- where blocking work runs: the process's two pools ---------------------------------------

BLOCKING_THREADS = min(32, max(2, os.cpu_count() or 2))  # asyncio's cap of 32 too
"""Threads of :func:`blocking_pool`: one a core."""
_pools: dict[str, ThreadPoolExecutor] = {}
_lock = threading.Lock()
_EXECUTOR: contextvars.ContextVar[Executor | None] = contextvars.ContextVar(
    "docmemo_cpu_executor", default=None
)


def _pool(name: str, threads: int) -> ThreadPoolExecutor:
    with _lock:
        pool = _pools.get(name)
        if pool is None:
            pool = _pools[name] = ThreadPoolExecutor(threads, thread_name_prefix=f"docmemo-{name}")
        return pool


def blocking_pool() -> ThreadPoolExecutor:
    """The process's pool for blocking calls (:data:`BLOCKING_THREADS` threads)."""
    return _pool("blocking", BLOCKING_THREADS)


def cpu_pool() -> ThreadPoolExecutor:
    """The process's one thread for GIL-holding work."""
    return _pool("cpu", 1)


def _forget_pools() -> None:
    """A forked child has none of its parent's threads: it starts pools of its own."""
    global _lock
    _pools.clear()
    _lock = threading.Lock()


os.register_at_fork(after_in_child=_forget_pools)


async def in_executor(executor: Executor, fn: Callable[..., T], /, *args: Any, **kwargs: Any) -> T:
    """``fn(*args, **kwargs)`` on a thread of ``executor``, in the caller's context."""
    call = partial(contextvars.copy_context().run, partial(fn, *args, **kwargs))
    return await asyncio.get_running_loop().run_in_executor(executor, call)


async def to_thread(fn: Callable[..., T], /, *args: Any, **kwargs: Any) -> T:
    """:func:`asyncio.to_thread` on :func:`blocking_pool`."""
    return await in_executor(blocking_pool(), fn, *args, **kwargs)


async def to_cpu_thread(fn: Callable[..., T], /, *args: Any, **kwargs: Any) -> T:
    """``fn(*args, **kwargs)`` on :func:`cpu_pool` (work that holds the GIL throughout)."""
    return await in_executor(cpu_pool(), fn, *args, **kwargs)


@contextlib.contextmanager
def cpu_executor(executor: Executor | None) -> Iterator[None]:
    """Run the renders and layout analysis of the async steps inside the block on ``executor``
    (an app's own; None: :func:`cpu_pool`)."""
    token = _EXECUTOR.set(executor)
    try:
        yield
    finally:
        _EXECUTOR.reset(token)


async def run_cpu(fn: Callable[..., Any], *args: Any, **kwargs: Any) -> Any:
    """``fn(*args, **kwargs)`` on the current CPU executor (see :func:`cpu_executor`); an app's
    executor may be a process pool, so ``fn`` is sent as it is, without the caller's context."""
    executor = _EXECUTOR.get()
    if executor is None:
        return await to_cpu_thread(fn, *args, **kwargs)
    loop = asyncio.get_running_loop()
    return await loop.run_in_executor(executor, partial(fn, *args, **kwargs))


# -- steps and their drivers -------------------------------------------------------------------


@dataclass(frozen=True)
class Call:
    """One piece of I/O a step needs.

    Args:
        sync: called by the sync driver (and, without ``async_``, in a worker thread by the
            async driver: CPU-bound or blocking work such as rendering a page).
        async_: awaited by the async driver, when the work has a native async form.
        args / kwargs: the arguments of either function.
    """

    sync: Callable[..., Any]
    async_: Callable[..., Awaitable[Any]] | None = None
    args: tuple[Any, ...] = ()
    kwargs: Mapping[str, Any] = field(default_factory=dict)


def offload(fn: Callable[..., Any], *args: Any, **kwargs: Any) -> Call:
    """A blocking call: direct from the sync driver, in a worker thread from the async one."""
    return Call(fn, None, args, kwargs)


def cpu_call(fn: Callable[..., Any], *args: Any, **kwargs: Any) -> Call:
    """GIL-holding work (a render, a layout analysis): inline from the sync driver, on the current
    CPU executor from the async one (:func:`run_cpu`). ``fn`` must
    be a module-level function of this package and its arguments picklable (an app's process
    pool may run it)."""
    return Call(fn, partial(run_cpu, fn), args, kwargs)


def either(
    fn: Callable[..., Any], afn: Callable[..., Awaitable[Any]], *args: Any, **kwargs: Any
) -> Call:
    """A call with a sync and a native async form (a store search, an LLM request)."""
    return Call(fn, afn, args, kwargs)


@dataclass(frozen=True)
class Parallel:
    """Steps that may run at the same time (see :func:`parallel`)."""

    steps: tuple[Generator[Any, Any, Any], ...]


def parallel(*steps: Generator[Any, Any, Any]) -> Parallel:
    """Run ``steps`` concurrently (async) or in order (sync); the results come back as a list."""
    return Parallel(steps)


@dataclass(frozen=True)
class Within:
    """Steps that must end by ``at`` (a ``time.monotonic()`` instant; see :func:`within`)."""

    steps: Generator[Any, Any, Any]
    at: float
    pool: Executor | None


def within(at: float, steps: Generator[Any, Any, T], pool: Executor | None) -> Within:
    """Run ``steps`` until ``at`` at most, then throw ``DeadlineExceeded`` into the step that
    yielded this: the async driver cancels them; the sync one runs each of their calls on
    ``pool`` (bounded: an abandoned call holds a thread until its own timeout) and stops
    waiting at ``at`` (without a pool: inline, the deadline checked between calls)."""
    return Within(steps, at, pool)


Effect = Call | Parallel | Within
Steps = Generator[Effect, Any, T]
"""A step: yields calls, receives their results, returns ``T``."""


def _left(at: float) -> float:
    left = at - time.monotonic()
    if left <= 0:
        raise DeadlineExceeded("the deadline has passed")
    return left


def _time_left(effect: Within, at: float) -> float:
    """Seconds ``effect``'s steps have before ``at``; when none, they are closed unrun."""
    try:
        return _left(at)
    except DeadlineExceeded:
        effect.steps.close()
        raise


def _call(call: Call) -> Any:
    return call.sync(*call.args, **call.kwargs)


def _bounded(at: float, pool: Executor | None, effect: Effect) -> Any:
    """The sync driver's effect under a deadline: each call on ``pool``, waited for until ``at``
    (with the caller's context variables: LLM call counts, instrumentation spans)."""
    if isinstance(effect, Within):  # nested: the earlier deadline holds
        inner = min(at, effect.at)
        _time_left(effect, inner)
        return run(effect.steps, partial(_bounded, inner, pool))
    if isinstance(effect, Parallel):
        return [run(steps, partial(_bounded, at, pool)) for steps in effect.steps]
    if pool is None:
        _left(at)
        return _call(effect)
    future = pool.submit(contextvars.copy_context().run, _call, effect)
    try:
        return future.result(timeout=_left(at))
    except concurrent.futures.TimeoutError:
        if future.done():  # the call's own error, or it ended just in time
            return future.result()
        future.cancel()  # not started yet: never runs; running: abandoned
        raise DeadlineExceeded("the deadline has passed") from None


async def _acall(call: Call) -> Any:
    if call.async_ is not None:
        return await call.async_(*call.args, **call.kwargs)
    return await to_thread(call.sync, *call.args, **call.kwargs)


def _effect(effect: Effect) -> Any:
    if isinstance(effect, Call):
        return _call(effect)
    if isinstance(effect, Within):
        _time_left(effect, effect.at)
        return run(effect.steps, partial(_bounded, effect.at, effect.pool))
    return [run(inner) for inner in effect.steps]


async def _aeffect(effect: Effect) -> Any:
    if isinstance(effect, Call):
        return await _acall(effect)
    if isinstance(effect, Within):
        left = _time_left(effect, effect.at)
        try:
            return await asyncio.wait_for(arun(effect.steps), left)
        except asyncio.TimeoutError:
            if time.monotonic() < effect.at:
                raise  # the work's own timeout, not this deadline
            raise DeadlineExceeded("the deadline has passed") from None
    return list(await asyncio.gather(*(arun(inner) for inner in effect.steps)))


def run(steps: Generator[Any, Any, T], execute: Callable[[Any], Any] = _effect) -> T:
    """Run ``steps`` to the end with sync I/O; returns what the step returns.

    ``execute`` performs one yielded effect; only :func:`within` passes another (each call
    bounded by its deadline): every step of the package, the store's included, runs on these
    two drivers and their one vocabulary of effects.
    """
    value: Any = None
    error: Exception | None = None
    try:
        while True:
            try:
                effect = steps.throw(error) if error is not None else steps.send(value)
            except StopIteration as done:
                return done.value
            try:
                value, error = execute(effect), None
            except Exception as exc:  # handed to the step, which may recover
                value, error = None, exc
    finally:
        steps.close()


async def arun(steps: Generator[Any, Any, T]) -> T:
    """Run ``steps`` to the end with async I/O (blocking calls off the event loop)."""
    value: Any = None
    error: Exception | None = None
    try:
        while True:
            try:
                effect = steps.throw(error) if error is not None else steps.send(value)
            except StopIteration as done:
                return done.value
            try:
                value, error = await _aeffect(effect), None
            except Exception as exc:  # handed to the step, which may recover
                value, error = None, exc
    finally:
        steps.close()
