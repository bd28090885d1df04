"""Where the async path runs its short blocking calls: a pool of this package's, one thread a core.

A query's blocking calls (page images resized and encoded, LlamaIndex validating image blocks,
request bodies built) hold the GIL part of the time. asyncio's default pool has four threads
more than the machine has cores, and with more of them runnable than there are cores the event
loop waits longer for the GIL. Eight concurrent ``aquery`` calls on 2 cores with a CPU-bound
process beside them (``integration_tests/test_async_nonblocking.py``'s heartbeat) stalled the
loop at most 54-98 ms on the default pool's 6 threads (4 runs), 43-60 ms on this pool's 2
(5 runs; 37-79 ms against 41-83 without the other process). So the calls share one pool, sized
to the cores and started on first use; like :func:`asyncio.to_thread`, a call runs in the
caller's context (deadline scopes, the CPU executor). The GIL-holding PyMuPDF work has a thread
of its own (:mod:`llama_index_docmemo.cpu`).
"""

from __future__ import annotations

import asyncio
import contextvars
import os
import threading
from collections.abc import Callable
from concurrent.futures import Executor, ThreadPoolExecutor
from functools import partial
from typing import Any, TypeVar

T = TypeVar("T")

_pool: ThreadPoolExecutor | None = None
_lock = threading.Lock()


def blocking_pool() -> ThreadPoolExecutor:
    """The process's pool for blocking calls (one thread a core: at least 2, at most 32)."""
    global _pool
    with _lock:
        if _pool is None:
            threads = min(32, max(2, os.cpu_count() or 2))  # asyncio's cap of 32 too
            _pool = ThreadPoolExecutor(threads, thread_name_prefix="docmemo-blocking")
        return _pool


async def in_executor(executor: Executor, fn: Callable[..., T], /, *args: Any, **kwargs: Any) -> T:
    """``fn(*args, **kwargs)`` on a thread of ``executor``, in the caller's context."""
    call = partial(contextvars.copy_context().run, partial(fn, *args, **kwargs))
    return await asyncio.get_running_loop().run_in_executor(executor, call)


async def to_thread(fn: Callable[..., T], /, *args: Any, **kwargs: Any) -> T:
    """:func:`asyncio.to_thread` on :func:`blocking_pool`."""
    return await in_executor(blocking_pool(), fn, *args, **kwargs)
