"""LlamaIndex instrumentation events fired by the DocMemo loop, and a per-query LLM call counter.

Besides LlamaIndex's own retrieval and rerank events, each round fires a DocMemo start/end pair.
:func:`counting_llm_calls` counts the chat/completion requests any LlamaIndex LLM makes inside a
block (a reranker of any kind, the final answer): the count lives in a context variable, so
concurrent queries (threads or asyncio tasks) never see each other's calls.
"""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager
from contextvars import ContextVar
from typing import Any

from llama_index.core.base.llms.types import ImageBlock
from llama_index.core.instrumentation import get_dispatcher
from llama_index.core.instrumentation.event_handlers import BaseEventHandler
from llama_index.core.instrumentation.events.base import BaseEvent
from llama_index.core.instrumentation.events.exception import ExceptionEvent
from llama_index.core.instrumentation.events.llm import (
    LLMChatEndEvent,
    LLMChatStartEvent,
    LLMCompletionEndEvent,
    LLMCompletionStartEvent,
)

_STARTS = (LLMChatStartEvent, LLMCompletionStartEvent)
_ENDS = (LLMChatEndEvent, LLMCompletionEndEvent, ExceptionEvent)


class DocMemoRoundStartEvent(BaseEvent):
    """A round begins: the query it retrieves with."""

    round: int
    query: str

    @classmethod
    def class_name(cls) -> str:
        return "DocMemoRoundStartEvent"


class DocMemoRoundEndEvent(BaseEvent):
    """A round ends: the pages it read and the reader's verdict."""

    round: int
    pages: list[str]
    status: str
    useful: list[str]

    @classmethod
    def class_name(cls) -> str:
        return "DocMemoRoundEndEvent"


class LLMCallTally:
    """Requests counted inside one :func:`counting_llm_calls` block, with the images they
    carried and the tokens the LLM reported (``prompt_tokens`` / ``completion_tokens`` in the
    response's ``additional_kwargs``, as LlamaIndex's OpenAI, Ollama and this package's
    clients put them).

    A request made inside another (``CustomLLM.chat`` calls ``complete``) is one request:
    only starts with no request open count.
    """

    def __init__(self) -> None:
        self.calls = 0
        self.images = 0
        self.prompt_tokens = 0
        self.completion_tokens = 0
        self._open: list[str | None] = []

    def started(self, event: BaseEvent) -> None:
        if not self._open:
            self.calls += 1
            for message in getattr(event, "messages", None) or []:
                self.images += sum(isinstance(b, ImageBlock) for b in message.blocks)
        self._open.append(event.span_id)

    def ended(self, event: BaseEvent) -> None:
        if event.span_id not in self._open:
            return
        self._open.remove(event.span_id)
        if self._open:
            return
        usage = getattr(getattr(event, "response", None), "additional_kwargs", None) or {}
        self.prompt_tokens += _count(usage.get("prompt_tokens"))
        self.completion_tokens += _count(usage.get("completion_tokens"))


def _count(value: Any) -> int:
    return value if isinstance(value, int) and value > 0 else 0


_TALLY: ContextVar[LLMCallTally | None] = ContextVar("docmemo_llm_call_tally", default=None)


class _LLMCallCounter(BaseEventHandler):
    """Feeds LLM request starts and ends to the current block's tally."""

    @classmethod
    def class_name(cls) -> str:
        return "DocMemoLLMCallCounter"

    def handle(self, event: BaseEvent, **kwargs: Any) -> None:
        tally = _TALLY.get()
        if tally is None:
            return
        if isinstance(event, _STARTS):
            tally.started(event)
        elif isinstance(event, _ENDS):
            tally.ended(event)


_installed: list[_LLMCallCounter] = []


def _install() -> None:
    if not _installed:
        handler = _LLMCallCounter()
        get_dispatcher().add_event_handler(handler)
        _installed.append(handler)


@contextmanager
def counting_llm_calls(tally: LLMCallTally | None = None) -> Iterator[LLMCallTally]:
    """Count the LLM requests made in this block (this thread / task only), into ``tally``
    when given (so several blocks add up), else a new one."""
    _install()
    tally = tally if tally is not None else LLMCallTally()
    token = _TALLY.set(tally)
    try:
        yield tally
    finally:
        _TALLY.reset(token)
