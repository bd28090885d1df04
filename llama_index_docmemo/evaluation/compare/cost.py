"""What an engine's answer cost, counted from LlamaIndex's instrumentation, not from engine internals.

:class:`CostMeter` is an event handler on LlamaIndex's root dispatcher. Inside ``with
meter.measure() as cost:`` every LLM request made by the code in that block is counted, whichever
engine or LLM class makes it: a request is one ``LLMChatStartEvent`` / ``LLMCompletionStartEvent``
(a completion that calls ``chat`` inside counts once), its images are the ``ImageBlock``\\ s of the
start event's messages, its tokens the usage of the end event's response (``raw.usage``, else the
``prompt_tokens`` / ``completion_tokens`` of ``additional_kwargs``). A request whose response carries
no usage is counted in ``requests_without_usage`` so totals never pass for complete when they are not.

Scoping uses context variables, which LlamaIndex carries into its worker threads (``asyncio_run``,
``asyncio.to_thread``): a judge asking questions outside the block is not counted.
"""

from __future__ import annotations

import time
from collections.abc import Iterator, Mapping
from contextlib import contextmanager
from contextvars import ContextVar
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from llama_index.core.base.llms.types import ImageBlock
from llama_index.core.instrumentation import get_dispatcher
from llama_index.core.instrumentation.event_handlers import BaseEventHandler
from llama_index.core.instrumentation.events.llm import (
    LLMChatEndEvent,
    LLMChatStartEvent,
    LLMCompletionEndEvent,
    LLMCompletionStartEvent,
)

if TYPE_CHECKING:
    from llama_index.core.instrumentation.events import BaseEvent


@dataclass
class Cost:
    """LLM requests, tokens, images and wall-clock seconds of one measured block."""

    llm_calls: int = 0
    prompt_tokens: int = 0
    completion_tokens: int = 0
    images: int = 0
    seconds: float = 0.0
    requests_without_usage: int = 0


@dataclass
class _Request:
    """One request in flight: nested start events (a completion calling chat) join it."""

    images: int = 0
    depth: int = 0
    usage: tuple[int, int] | None = None


_scope: ContextVar[Cost | None] = ContextVar("docmemo_cost_scope", default=None)
_request: ContextVar[_Request | None] = ContextVar("docmemo_cost_request", default=None)


def _number(value: Any) -> int | None:
    return int(value) if isinstance(value, (int, float)) and not isinstance(value, bool) else None


def usage_of(response: Any) -> tuple[int, int] | None:
    """(prompt tokens, completion tokens) a chat or completion response reports, or None."""
    if response is None:
        return None
    raw = getattr(response, "raw", None)
    usage = raw.get("usage") if isinstance(raw, Mapping) else getattr(raw, "usage", None)
    if usage is not None:
        get = usage.get if isinstance(usage, Mapping) else lambda key: getattr(usage, key, None)
        prompt, completion = _number(get("prompt_tokens")), _number(get("completion_tokens"))
        if prompt is not None and completion is not None:
            return prompt, completion
    extra = getattr(response, "additional_kwargs", None) or {}
    prompt, completion = (
        _number(extra.get("prompt_tokens")),
        _number(extra.get("completion_tokens")),
    )
    if prompt is not None and completion is not None:
        return prompt, completion
    return None


class CostMeter(BaseEventHandler):
    """Counts LLM requests per measured block (see the module docstring)."""

    @classmethod
    def class_name(cls) -> str:
        return "DocMemoCostMeter"

    def handle(self, event: BaseEvent, **kwargs: Any) -> None:
        cost = _scope.get()
        if cost is None:
            return
        if isinstance(event, (LLMChatStartEvent, LLMCompletionStartEvent)):
            images = 0
            if isinstance(event, LLMChatStartEvent):
                images = sum(isinstance(b, ImageBlock) for m in event.messages for b in m.blocks)
            request = _request.get()
            if request is None:
                request = _Request()
                _request.set(request)
                cost.llm_calls += 1
            request.depth += 1
            request.images = max(request.images, images)
        elif isinstance(event, (LLMChatEndEvent, LLMCompletionEndEvent)):
            request = _request.get()
            if request is None:
                return
            request.usage = request.usage or usage_of(event.response)
            request.depth -= 1
            if request.depth == 0:
                _request.set(None)
                self._settle(cost, request)

    @staticmethod
    def _settle(cost: Cost, request: _Request) -> None:
        cost.images += request.images
        if request.usage is None:
            cost.requests_without_usage += 1
        else:
            cost.prompt_tokens += request.usage[0]
            cost.completion_tokens += request.usage[1]

    @contextmanager
    def measure(self) -> Iterator[Cost]:
        """Count the LLM requests made inside the block into the yielded :class:`Cost`."""
        dispatcher = get_dispatcher()
        attached = not any(h is self for h in dispatcher.event_handlers)
        if attached:
            dispatcher.add_event_handler(self)
        cost = Cost()
        token = _scope.set(cost)
        request_token = _request.set(None)
        start = time.perf_counter()
        try:
            yield cost
        finally:
            cost.seconds = time.perf_counter() - start
            _request.reset(request_token)
            _scope.reset(token)
            if attached:
                dispatcher.event_handlers = [h for h in dispatcher.event_handlers if h is not self]
