"""LlamaIndex instrumentation events fired by the DocMemo loop, and a per-query LLM call counter.

Each round fires LlamaIndex's own retrieval and rerank events (:func:`retrieval_events`,
:func:`rerank_events`: context managers, so a round written as steps keeps them open across its
I/O) and a DocMemo start/end pair.
:func:`counting_llm_calls` counts the chat/completion requests any LlamaIndex LLM makes inside a
block (a reranker of any kind, the final answer): the count lives in a context variable, so
concurrent queries (threads or asyncio tasks) never see each other's calls.
"""

from __future__ import annotations

import inspect
import threading
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from contextvars import ContextVar
from typing import Any

from llama_index.core.base.llms.types import ChatMessage, ImageBlock, TextBlock
from llama_index.core.callbacks import CallbackManager, CBEventType, EventPayload
from llama_index.core.instrumentation import get_dispatcher
from llama_index.core.instrumentation.event_handlers import BaseEventHandler
from llama_index.core.instrumentation.events.base import BaseEvent
from llama_index.core.instrumentation.events.llm import (
    LLMChatEndEvent,
    LLMChatStartEvent,
    LLMCompletionEndEvent,
    LLMCompletionStartEvent,
)
from llama_index.core.instrumentation.events.rerank import ReRankEndEvent, ReRankStartEvent
from llama_index.core.instrumentation.events.retrieval import (
    RetrievalEndEvent,
    RetrievalStartEvent,
)
from llama_index.core.instrumentation.span import BaseSpan
from llama_index.core.instrumentation.span_handlers import BaseSpanHandler
from llama_index.core.schema import NodeWithScore, QueryBundle
from llama_index.core.settings import Settings

from llama_index_docmemo.llms.images import request_image_tokens

dispatcher = get_dispatcher(__name__)

_STARTS = (LLMChatStartEvent, LLMCompletionStartEvent)
_ENDS = (LLMChatEndEvent, LLMCompletionEndEvent)


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
    carried, their tokens (``prompt_tokens`` / ``completion_tokens``) and the image tokens
    estimated by the model family's formula (``image_tokens``, ``llms/image_policy.py``).

    Tokens are the LLM's own ``usage`` where its response reports it (LlamaIndex's OpenAI and
    Ollama classes and this package's clients pass it on), else counted with LlamaIndex's
    ``Settings.tokenizer``: the request's text plus its estimated image tokens, and the reply's
    text (``without_usage`` counts these requests).

    A request made inside another (``CustomLLM.chat`` calls ``complete``: its span is a child
    of the outer request's) is one request. A request ends with its end event, or when its span
    closes (a failed request sends no end event), so the request after a refused one counts.
    Thread-safe: the async driver's worker threads share a query's tally.
    """

    def __init__(self) -> None:
        self.calls = 0
        self.images = 0
        self.image_tokens = 0
        self.prompt_tokens = 0
        self.completion_tokens = 0
        self.without_usage = 0
        self._open: dict[str, tuple[list[str], int]] = {}  # requests under way: text, images
        self._parents: dict[str, str | None] = {}  # spans entered in this block -> parent
        self._lock = threading.Lock()

    def _nested(self, span: str | None) -> bool:
        seen: set[str] = set()
        while span is not None and span not in seen:
            if span in self._open:
                return True
            seen.add(span)
            span = self._parents.get(span)
        return False

    def entered(self, span: str, parent: str | None) -> None:
        with self._lock:
            self._parents[span] = parent

    def started(self, event: BaseEvent) -> None:
        with self._lock:
            if self._nested(event.span_id):
                return
            self.calls += 1
            messages = getattr(event, "messages", None) or []
            for message in messages:
                self.images += sum(isinstance(b, ImageBlock) for b in message.blocks)
            described = getattr(event, "model_dict", None) or {}  # the LLM's metadata
            model = described.get("model") or described.get("model_name") or ""
            images = request_image_tokens(messages, str(model))
            self.image_tokens += images
            if event.span_id is not None:
                self._open[event.span_id] = (_request_texts(event, messages), images)

    def ended(self, event: BaseEvent) -> None:
        with self._lock:
            request = self._open.pop(event.span_id, None) if event.span_id else None
        if request is None:
            return  # a nested request, or one already closed
        response = getattr(event, "response", None)
        usage = _usage(response)
        reported = isinstance(usage.get("prompt_tokens"), int)
        if reported:
            prompt, completion = (
                _count(usage.get("prompt_tokens")),
                _count(usage.get("completion_tokens")),
            )
        else:  # counted here, off the lock (a long prompt takes milliseconds)
            texts, images = request
            prompt = sum(map(count_tokens, texts)) + images
            completion = count_tokens(_reply_text(response))
        with self._lock:
            self.prompt_tokens += prompt
            self.completion_tokens += completion
            self.without_usage += not reported

    def closed(self, span: str) -> None:
        with self._lock:
            self._open.pop(span, None)
            self._parents.pop(span, None)


def _usage(response: Any) -> dict[str, Any]:
    """Token counts of an LLM response: in ``additional_kwargs`` (OpenAI, this package's
    clients) or in the raw response's ``usage`` (Ollama)."""
    counts = getattr(response, "additional_kwargs", None) or {}
    if "prompt_tokens" in counts:
        return counts
    raw = getattr(response, "raw", None)
    usage = raw.get("usage") if isinstance(raw, dict) else getattr(raw, "usage", None)
    if isinstance(usage, dict):
        return usage
    return {k: getattr(usage, k, None) for k in ("prompt_tokens", "completion_tokens")}


def count_tokens(text: str) -> int:
    """Tokens of ``text`` by LlamaIndex's ``Settings.tokenizer`` (the app's, else tiktoken's)."""
    return len(Settings.tokenizer(text)) if text else 0


def _request_texts(event: BaseEvent, messages: list[ChatMessage]) -> list[str]:
    """The text a request sends: its messages' text blocks, or a completion's prompt."""
    prompt = getattr(event, "prompt", None)
    if isinstance(prompt, str):
        return [prompt]
    return [b.text for m in messages for b in m.blocks if isinstance(b, TextBlock)]


def _reply_text(response: Any) -> str:
    """A chat or completion response's text ("" for none)."""
    message = getattr(response, "message", None)
    text = getattr(message, "content", None) if message is not None else None
    if text is None:
        text = getattr(response, "text", None)
    return text if isinstance(text, str) else ""


def _count(value: Any) -> int:
    return value if isinstance(value, int) and value > 0 else 0


_TALLIES: ContextVar[tuple[LLMCallTally, ...]] = ContextVar("docmemo_llm_call_tallies", default=())
"""The tallies of the blocks this code runs in, outermost first (a block inside another, e.g. a
query's rounds inside ``docmemo compare``'s count of the whole answer, feeds both)."""


class _LLMCallCounter(BaseEventHandler):
    """Feeds LLM request starts and ends to the tallies of the blocks the request runs in."""

    @classmethod
    def class_name(cls) -> str:
        return "DocMemoLLMCallCounter"

    def handle(self, event: BaseEvent, **kwargs: Any) -> None:
        for tally in _TALLIES.get():
            if isinstance(event, _STARTS):
                tally.started(event)
            elif isinstance(event, _ENDS):
                tally.ended(event)


class _SpanWatch(BaseSpanHandler[BaseSpan]):
    """Tells the blocks' tallies which span runs inside which, and when one closes."""

    @classmethod
    def class_name(cls) -> str:
        return "DocMemoSpanWatch"

    def new_span(
        self,
        id_: str,
        bound_args: inspect.BoundArguments,
        instance: Any | None = None,
        parent_span_id: str | None = None,
        tags: dict[str, Any] | None = None,
        **kwargs: Any,
    ) -> BaseSpan | None:
        for tally in _TALLIES.get():
            tally.entered(id_, parent_span_id)
        return None  # nothing kept here

    def prepare_to_exit_span(
        self,
        id_: str,
        bound_args: inspect.BoundArguments,
        instance: Any | None = None,
        result: Any | None = None,
        **kwargs: Any,
    ) -> BaseSpan | None:  # noqa: E501
        self._close(id_)
        return None

    def prepare_to_drop_span(
        self,
        id_: str,
        bound_args: inspect.BoundArguments,
        instance: Any | None = None,
        err: BaseException | None = None,
        **kwargs: Any,
    ) -> BaseSpan | None:  # noqa: E501
        self._close(id_)
        return None

    @staticmethod
    def _close(span: str) -> None:
        for tally in _TALLIES.get():
            tally.closed(span)


_install_lock = threading.Lock()
_open_blocks = 0
_HANDLERS = (_LLMCallCounter(), _SpanWatch())


def _attach() -> None:
    """The counter's handlers on LlamaIndex's root dispatcher while any block is open."""
    global _open_blocks
    with _install_lock:
        if _open_blocks == 0:
            root = get_dispatcher()
            root.add_event_handler(_HANDLERS[0])
            root.add_span_handler(_HANDLERS[1])
        _open_blocks += 1


def _detach() -> None:
    """Off the root dispatcher when the last block closes: nothing of ours outlives the
    queries (the lists are replaced, not changed, so a dispatch under way in another thread
    still sees every other handler)."""
    global _open_blocks
    with _install_lock:
        _open_blocks -= 1
        if _open_blocks == 0:
            root = get_dispatcher()
            root.event_handlers = [h for h in root.event_handlers if h is not _HANDLERS[0]]
            root.span_handlers = [h for h in root.span_handlers if h is not _HANDLERS[1]]


@contextmanager
def counting_llm_calls(tally: LLMCallTally | None = None) -> Iterator[LLMCallTally]:
    """Count the LLM requests made in this block (this thread / task only), into ``tally``
    when given (so several blocks add up), else a new one. Blocks nest: a request counts in
    every block it runs in. The counter's handlers are on LlamaIndex's root dispatcher only
    while a block is open."""
    tally = tally if tally is not None else LLMCallTally()
    outer = _TALLIES.get()
    token = _TALLIES.set(outer if any(t is tally for t in outer) else (*outer, tally))
    _attach()
    try:
        yield tally
    finally:
        _detach()
        _TALLIES.reset(token)


# -- LlamaIndex's events around a round's retrieval and rerank stages ---------------------------
Ended = Callable[[list[NodeWithScore]], list[NodeWithScore]]
"""Called with the stage's output nodes before the block closes; returns them unchanged."""


@contextmanager
def retrieval_events(
    callbacks: CallbackManager, query: str, *, enabled: bool = True
) -> Iterator[Ended]:
    """The round's retrieval events: ``RetrievalStartEvent`` / ``RetrievalEndEvent`` and a
    ``RETRIEVE`` callback event with the pages it selected (none when ``enabled`` is False: a
    ``BaseRetriever``'s ``retrieve`` fires them itself)."""
    out: list[list[NodeWithScore]] = []

    def ended(nodes: list[NodeWithScore]) -> list[NodeWithScore]:
        out.append(nodes)
        return nodes

    if not enabled:
        yield ended
        return
    bundle = QueryBundle(query)
    dispatcher.event(RetrievalStartEvent(str_or_query_bundle=bundle))
    with callbacks.event(CBEventType.RETRIEVE, payload={EventPayload.QUERY_STR: query}) as cb_event:
        yield ended
        nodes = out[0] if out else []
        cb_event.on_end(payload={EventPayload.NODES: nodes})
    dispatcher.event(RetrievalEndEvent(str_or_query_bundle=bundle, nodes=nodes))


@contextmanager
def rerank_events(
    callbacks: CallbackManager,
    reranker: Any,
    nodes: list[NodeWithScore],
    bundle: QueryBundle,
    k: int,
) -> Iterator[Ended]:
    """The rerank stage's events (and a ``RERANKING`` callback event) around any postprocessor."""
    model = str(getattr(reranker, "model", "") or type(reranker).__name__)
    dispatcher.event(ReRankStartEvent(query=bundle, nodes=nodes, top_n=k, model_name=model))
    out: list[list[NodeWithScore]] = []

    def ended(reranked: list[NodeWithScore]) -> list[NodeWithScore]:
        out.append(reranked)
        return reranked

    payload = {EventPayload.QUERY_STR: bundle.query_str, EventPayload.NODES: nodes}
    with callbacks.event(CBEventType.RERANKING, payload=payload) as cb_event:
        yield ended
        cb_event.on_end(payload={EventPayload.NODES: out[0] if out else []})
    dispatcher.event(ReRankEndEvent(nodes=out[0] if out else []))
