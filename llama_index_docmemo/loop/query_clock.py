"""One query's ``max_seconds``: when it started, whether work in flight was cut, and the cut."""

from __future__ import annotations

import time
from typing import TYPE_CHECKING, TypeVar

from llama_index_docmemo.llms.wire import deadline_scope
from llama_index_docmemo.step_runtime import Steps, within

if TYPE_CHECKING:
    from concurrent.futures import Executor

T = TypeVar("T")
_clock = time.perf_counter  # the deadline's clock (tests substitute a fake one)


class QueryClock:
    """The query's deadline, read by the stop policy and applied to each slow step.

    Args:
        limit: the query's ``max_seconds`` (None: unbounded).
        calls: the bounded pool the sync driver runs calls on, so it can stop waiting at the
            deadline (None: inline, checked between calls).
    """

    def __init__(self, limit: float | None, calls: Executor | None) -> None:
        self.limit = limit
        self.calls = calls
        self.cut = False  # a deadline cut work in flight
        self._start = _clock()

    def bound(self, steps: Steps[T]) -> Steps[T]:
        """``steps`` cut at the deadline, whatever the LLM class: cancelled (async) or abandoned
        on the bounded pool (sync), raising :class:`~llama_index_docmemo.errors.DeadlineExceeded`;
        requests of ``OpenAICompatible`` also carry the deadline."""
        if self.limit is None:
            return (yield from steps)
        left = max(self.limit - (_clock() - self._start), 0.0)
        with deadline_scope(left):
            return (yield within(time.monotonic() + left, steps, self.calls))

    def passed(self) -> bool:
        """The deadline has passed, or cut work in flight."""
        return self.cut or (self.limit is not None and _clock() - self._start >= self.limit)
