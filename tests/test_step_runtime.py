"""The two drivers of ``step_runtime.py``, and steps ``within`` a deadline on both."""

from __future__ import annotations

import asyncio
import contextvars
import re
import threading
import time
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import pytest

import llama_index_docmemo
from llama_index_docmemo.errors import DeadlineExceeded
from llama_index_docmemo.step_runtime import Call, arun, either, offload, parallel, run, within

WHO: contextvars.ContextVar[str] = contextvars.ContextVar("who", default="nobody")


def slow(seconds: float) -> str:
    time.sleep(seconds)
    return f"slept {seconds}"


async def aslow(seconds: float) -> str:
    await asyncio.sleep(seconds)
    return f"slept {seconds}"


def reads(seconds: float) -> list[str]:
    """Two calls in a row, then two in parallel."""
    first = yield either(slow, aslow, seconds)
    second = yield either(slow, aslow, seconds)
    both = yield parallel(one(seconds), one(seconds))
    return [first, second, *both]


def one(seconds: float):
    return (yield either(slow, aslow, seconds))


def guarded(at: float, seconds: float, pool: ThreadPoolExecutor | None):
    """What the loop does: the reading within the deadline, the deadline caught."""
    try:
        return (yield within(at, reads(seconds), pool))
    except DeadlineExceeded:
        return "deadline"


@pytest.fixture
def pool():
    executor = ThreadPoolExecutor(max_workers=4)
    yield executor
    executor.shutdown(wait=False, cancel_futures=True)  # abandoned calls end on their own


def test_steps_that_end_in_time_return_their_value(pool) -> None:
    at = time.monotonic() + 5
    assert run(guarded(at, 0.01, pool)) == ["slept 0.01"] * 4
    assert asyncio.run(arun(guarded(at, 0.01, pool))) == ["slept 0.01"] * 4


@pytest.mark.parametrize("driver", ["sync", "async"])
def test_a_hanging_call_is_cut_at_the_deadline(pool, driver: str) -> None:
    started = time.monotonic()
    steps = guarded(started + 0.3, 2.0, pool)
    result = run(steps) if driver == "sync" else asyncio.run(arun(steps))
    assert result == "deadline"
    assert time.monotonic() - started < 1.0


def test_without_a_pool_the_sync_driver_checks_between_calls() -> None:
    started = time.monotonic()
    assert run(guarded(started + 0.15, 0.1, None)) == "deadline"
    assert 0.15 <= time.monotonic() - started < 0.5  # the second call ran, the third did not


def test_a_deadline_already_past_runs_nothing(pool) -> None:
    calls: list[str] = []

    def steps():
        try:
            return (yield within(time.monotonic() - 1, one_call(), pool))
        except DeadlineExceeded:
            return "deadline"

    def one_call():
        return (yield offload(calls.append, "ran"))

    assert run(steps()) == "deadline" and asyncio.run(arun(steps())) == "deadline"
    assert calls == []


def test_nested_deadlines_keep_the_earlier(pool) -> None:
    def outer(at: float):
        try:
            return (yield within(at + 10, guarded(at, 2.0, pool), pool))
        except DeadlineExceeded:
            return "outer"

    started = time.monotonic()
    assert run(outer(started + 0.2)) == "deadline"
    assert asyncio.run(arun(outer(time.monotonic() + 0.2))) == "deadline"
    assert time.monotonic() - started < 1.5


def test_calls_on_the_pool_keep_the_callers_context(pool) -> None:
    def who() -> str:
        return f"{WHO.get()} on {threading.current_thread().name}"

    def steps():
        return (yield within(time.monotonic() + 5, one_call(), pool))

    def one_call():
        return (yield offload(who))

    token = WHO.set("query 7")
    try:
        name, _, thread = run(steps()).partition(" on ")
    finally:
        WHO.reset(token)
    assert name == "query 7" and thread != threading.current_thread().name


def test_the_works_own_timeout_is_not_the_deadline(pool) -> None:
    async def times_out() -> None:
        raise asyncio.TimeoutError("the client's own")

    def steps():
        return (yield within(time.monotonic() + 5, call(), pool))

    def call():
        return (yield Call(lambda: None, times_out))

    with pytest.raises(asyncio.TimeoutError, match="the client's own"):
        asyncio.run(arun(steps()))


def test_the_package_has_one_steps_type() -> None:
    """One vocabulary of effects (issue 44): ``step_runtime.Steps`` is the package's only
    generator type; the page store's operations are yielded as calls, not as a second one."""
    package = Path(llama_index_docmemo.__file__).parent
    aliases = [
        f"{path.relative_to(package)}: {line.strip()}"
        for path in sorted(package.rglob("*.py"))
        for line in path.read_text(encoding="utf-8").splitlines()
        if re.match(r"\w+\s*=\s*Generator\[", line)
    ]
    assert aliases == ["step_runtime.py: Steps = Generator[Effect, Any, T]"]
