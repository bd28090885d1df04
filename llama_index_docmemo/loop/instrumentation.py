"""LlamaIndex's events around a round's retrieval and rerank stages.

Context managers, so a round written as steps keeps them open across its I/O: each round fires
``RetrievalStartEvent`` / ``RetrievalEndEvent`` and a ``RETRIEVE`` callback event with the pages
it selected; the rerank stage fires the rerank events and a ``RERANKING`` callback event,
whichever postprocessor fills it.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from contextlib import contextmanager
from typing import Any

import llama_index.core.instrumentation as instrument
from llama_index.core.callbacks import CallbackManager, CBEventType, EventPayload
from llama_index.core.instrumentation.events.rerank import ReRankEndEvent, ReRankStartEvent
from llama_index.core.instrumentation.events.retrieval import (
    RetrievalEndEvent,
    RetrievalStartEvent,
)
from llama_index.core.schema import NodeWithScore, QueryBundle

dispatcher = instrument.get_dispatcher(__name__)

Ended = Callable[[list[NodeWithScore]], list[NodeWithScore]]
"""Called with the stage's output nodes before the block closes; returns them unchanged."""


@contextmanager
def retrieval_events(
    callbacks: CallbackManager, query: str, *, enabled: bool = True
) -> Iterator[Ended]:
    """The round's retrieval events (none when ``enabled`` is False: a ``BaseRetriever``'s
    ``retrieve`` fires them itself)."""
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
    """The rerank stage's events around any postprocessor."""
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
