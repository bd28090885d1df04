"""Steps written once, run by a sync and an async driver.

A step is a generator that *yields* the I/O it needs as :class:`Call` objects and receives each
result back (or has the call's exception thrown into it); it holds the logic, no I/O. The two
drivers below are the only places that perform I/O: :func:`run` calls the sync functions
(a sync caller never gets an event loop or a thread of ours), :func:`arun` awaits the async ones
or, for CPU-bound or blocking work without an async twin, runs the sync function in a worker
thread, so nothing blocks the event loop. This is how the loop, the readers, the reranker and
the LLM exchange are written once for ``query`` and ``aquery``::

    def search_and_read(store, reader, query):
        hits = yield Call(store.search, store.asearch, (query,), {"limit": 5})
        return (yield Call(reader.read, reader.aread, (hits,)))

    run(search_and_read(...))          # sync
    await arun(search_and_read(...))   # async

A step may also yield :func:`parallel` steps: the sync driver runs them one after the other,
the async one concurrently; the step receives the list of their results (an exception from any
of them is thrown into the step).
"""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Callable, Generator, Mapping
from dataclasses import dataclass, field
from typing import Any, TypeVar

T = TypeVar("T")


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


Effect = Call | Parallel
Steps = Generator[Effect, Any, T]
"""A step: yields calls, receives their results, returns ``T``."""


def _call(call: Call) -> Any:
    return call.sync(*call.args, **call.kwargs)


async def _acall(call: Call) -> Any:
    if call.async_ is not None:
        return await call.async_(*call.args, **call.kwargs)
    return await asyncio.to_thread(call.sync, *call.args, **call.kwargs)


def run(steps: Steps[T]) -> T:
    """Run ``steps`` to the end with sync I/O; returns what the step returns."""
    value: Any = None
    error: Exception | None = None
    try:
        while True:
            try:
                effect = steps.throw(error) if error is not None else steps.send(value)
            except StopIteration as done:
                return done.value
            try:
                if isinstance(effect, Call):
                    value = _call(effect)
                else:
                    value = [run(inner) for inner in effect.steps]
                error = None
            except Exception as exc:  # handed to the step, which may recover
                value, error = None, exc
    finally:
        steps.close()


async def arun(steps: Steps[T]) -> T:
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
                if isinstance(effect, Call):
                    value = await _acall(effect)
                else:
                    value = list(await asyncio.gather(*(arun(inner) for inner in effect.steps)))
                error = None
            except Exception as exc:  # handed to the step, which may recover
                value, error = None, exc
    finally:
        steps.close()
