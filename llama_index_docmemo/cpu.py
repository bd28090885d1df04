"""Where the async driver runs CPU work that holds the GIL (PyMuPDF renders, layout analysis).

PyMuPDF does not release the GIL for long, so that work runs on a thread of its own and the
event loop only waits for it. One thread, not a pool: more threads do not render faster under
the GIL and make the loop wait longer for it (``benchmarks/loop_stall.py work``: 24 pages of
the FinanceBench and MMLongBench-Doc development PDFs, 8 at a time, 2 cores, two runs: layout
analysis stalled the loop at most 80-85 ms with one thread, 88-150 ms with two, 165-335 ms with
asyncio's default pool; renders 34-36, 35-69 and 71-130 ms). Each engine holds its executor (:func:`default_executor`); an app that wants
throughput on many cores passes its own, e.g. a ``ProcessPoolExecutor`` (the functions sent
to it are module-level and their arguments picklable; the usual multiprocessing rule applies:
guard the app's entry point with ``if __name__ == "__main__"``). The sync driver runs the work
inline: a sync caller never gets a thread of ours.
"""

from __future__ import annotations

import asyncio
import contextlib
import contextvars
from collections.abc import Callable, Iterator
from concurrent.futures import Executor, ThreadPoolExecutor
from functools import partial
from typing import Any

from llama_index_docmemo.blocking import to_thread
from llama_index_docmemo.step_runtime import Call

_EXECUTOR: contextvars.ContextVar[Executor | None] = contextvars.ContextVar(
    "docmemo_cpu_executor", default=None
)


def default_executor() -> Executor:
    """An engine's own executor for GIL-holding work: one thread, started on first use."""
    return ThreadPoolExecutor(max_workers=1, thread_name_prefix="docmemo-cpu")


@contextlib.contextmanager
def cpu_executor(executor: Executor | None) -> Iterator[None]:
    """Run the CPU work of the async steps inside the block on ``executor`` (None: the
    package's pool of blocking calls, :mod:`llama_index_docmemo.blocking`)."""
    token = _EXECUTOR.set(executor)
    try:
        yield
    finally:
        _EXECUTOR.reset(token)


async def run_cpu(fn: Callable[..., Any], *args: Any, **kwargs: Any) -> Any:
    """``fn(*args, **kwargs)`` on the current executor (see :func:`cpu_executor`)."""
    executor = _EXECUTOR.get()
    if executor is None:
        return await to_thread(fn, *args, **kwargs)
    loop = asyncio.get_running_loop()
    return await loop.run_in_executor(executor, partial(fn, *args, **kwargs))


def cpu_call(fn: Callable[..., Any], *args: Any, **kwargs: Any) -> Call:
    """A call the sync driver makes inline and the async one on the current executor: ``fn``
    must be a module-level function of this package and its arguments picklable (a process
    pool may run it)."""
    return Call(fn, partial(run_cpu, fn), args, kwargs)
