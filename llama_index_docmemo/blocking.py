"""The package's concurrency policy, in one place: where work that would block runs.

A process has at most two pools of this package's, each started on first use, owned by the
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
import contextlib
import contextvars
import os
import threading
from collections.abc import Callable, Iterator
from concurrent.futures import Executor, ThreadPoolExecutor
from functools import partial
from typing import Any, TypeVar

T = TypeVar("T")

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
