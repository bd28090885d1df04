"""A small pool of worker processes for CPU work that holds the GIL.

PyMuPDF renders pages and analyses layouts without releasing the GIL: in a worker *thread* it
still stops the event loop (measured here: 8 page renders in threads stalled an asyncio loop
for 108 ms; with 8 concurrent queries, 126 ms in threads against under 100 ms in processes).
The async driver therefore runs that work in these processes (:func:`in_worker`); the sync
driver runs it inline, so a sync caller gets no process of ours.

The workers are ``spawn``ed all at once on first use with the parent's ``__main__`` hidden:
they run only this package's functions, so they never import (and re-run) the app's script,
whether or not it guards its entry point with ``if __name__ == "__main__"``.
``$DOCMEMO_WORKERS`` sets their number (default: the CPU count, at most 4); 0 uses threads.
"""

from __future__ import annotations

import asyncio
import atexit
import multiprocessing
import os
import sys
import threading
import types
from collections.abc import Callable
from concurrent.futures import ProcessPoolExecutor, wait
from functools import partial
from typing import Any

from llama_index_docmemo.steps import Call

WORKERS_ENV = "DOCMEMO_WORKERS"

_pool: ProcessPoolExecutor | None = None
_lock = threading.Lock()


def worker_count() -> int:
    """``$DOCMEMO_WORKERS`` (0: threads instead), else the CPU count (at most 4)."""
    raw = (os.environ.get(WORKERS_ENV) or "").strip()
    if raw:
        try:
            return max(0, int(raw))
        except ValueError:
            raise ValueError(f"${WORKERS_ENV}={raw!r} is not a whole number") from None
    return max(1, min(4, os.cpu_count() or 1))


def _ready() -> int:
    return os.getpid()


def pool() -> ProcessPoolExecutor:
    """The process pool, every worker started now (see the module docstring)."""
    global _pool
    with _lock:
        if _pool is None:
            count = max(1, worker_count())
            executor = ProcessPoolExecutor(
                max_workers=count, mp_context=multiprocessing.get_context("spawn")
            )
            main = sys.modules.get("__main__")
            sys.modules["__main__"] = types.ModuleType("__main__")  # nothing for them to import
            try:
                started = [executor.submit(_ready) for _ in range(count)]
            finally:
                if main is not None:
                    sys.modules["__main__"] = main
            wait(started)
            _pool = executor
            atexit.register(shutdown)
        return _pool


def shutdown() -> None:
    """Stop the workers (a later call starts new ones)."""
    global _pool
    with _lock:
        if _pool is not None:
            _pool.shutdown(wait=False, cancel_futures=True)
            _pool = None


async def run_in_worker(fn: Callable[..., Any], *args: Any, **kwargs: Any) -> Any:
    """``fn(*args, **kwargs)`` in a worker process (``fn`` and its arguments are pickled)."""
    if worker_count() == 0:
        return await asyncio.to_thread(fn, *args, **kwargs)
    loop = asyncio.get_running_loop()
    executor = _pool or await asyncio.to_thread(pool)  # the first call waits for the start
    return await loop.run_in_executor(executor, partial(fn, *args, **kwargs))


def in_worker(fn: Callable[..., Any], *args: Any, **kwargs: Any) -> Call:
    """A call the sync driver makes inline and the async one in a worker process: ``fn`` must be
    a module-level function of this package and its arguments picklable."""
    return Call(fn, partial(run_in_worker, fn), args, kwargs)
