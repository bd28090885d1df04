"""What a round shows: the reader's input (pages, crops, memories), the selected pages as nodes,
and the rerank stage that reorders them (any node postprocessor)."""

from __future__ import annotations

from collections.abc import Sequence
from functools import partial
from typing import TYPE_CHECKING

from llama_index.core.schema import NodeWithScore

from llama_index_docmemo.events import counting_llm_calls
from llama_index_docmemo.loop.instrumentation import rerank_events
from llama_index_docmemo.loop.result import crop_view, page_image
from llama_index_docmemo.nodes import PageWithScore, node_ref, page_node
from llama_index_docmemo.reasoning.base import PageView, ReasoningInput
from llama_index_docmemo.steps import Steps, either
from llama_index_docmemo.types import PageRecord, PageRef

if TYPE_CHECKING:
    from llama_index.core.postprocessor.types import BaseNodePostprocessor
    from llama_index.core.schema import BaseNode
    from PIL.Image import Image

    from llama_index_docmemo.loop.query import DocMemoLoop, RoundSelection


def _render(source: str, page: int) -> Image:
    """The page image for a reader without a cache folder, rendered when it asks for it."""
    from llama_index_docmemo.ingest.pdf import render_page

    return render_page(source, page, 1500)


def page_view(loop: DocMemoLoop, record: PageRecord) -> PageView:
    """A page as the reader sees it (its image cached in the engine's folder, when it has one)."""
    use_schema = loop.config.loop.use_schema
    cache = loop.parts.cache_dir
    return PageView(
        ref=record.ref,
        text=record.text,
        section=loop.schema.section_of(record.ref) if use_schema else "",
        summary=loop.schema.summary_of(record.ref) if use_schema else "",
        image=page_image(record, cache) if cache is not None else None,
        load_image=partial(_render, record.source, record.page) if cache is None else None,
    )


def node_of(loop: DocMemoLoop, record: PageRecord) -> BaseNode:
    summary = loop.schema.summary_of(record.ref) if loop.config.loop.use_schema else ""
    return page_node(record, summary=summary)


def selected_nodes(loop: DocMemoLoop, selection: RoundSelection) -> list[NodeWithScore]:
    """The round's selected pages as scored nodes."""
    return [
        PageWithScore(node=node_of(loop, record), score=score)
        for record, score in zip(selection.pages, selection.scores, strict=True)
    ]


def reading_input(
    loop: DocMemoLoop, selection: RoundSelection, crops: list[NodeWithScore]
) -> ReasoningInput:
    """Everything a round shows the reader (the memories only where they are switched on)."""
    settings, cap = loop.config.loop, loop.config.budget.max_llm_calls
    final = selection.round >= settings.effective_rounds or (
        cap is not None and loop.llm_calls + 1 >= cap - loop.parts.reserved_llm_calls
    )
    episodic = loop.episodic
    return ReasoningInput(
        question=loop.question,
        query=selection.query,
        pages=[page_view(loop, r) for r in selection.pages],
        crops=[crop_view(n) for n in crops],
        evidence=episodic.evidence if settings.use_episodic else [],
        missing=episodic.missing if settings.use_episodic else [],
        outline=loop.schema.describe() if settings.use_schema else "",
        round=selection.round,
        final_round=final,
        pages_read_total=len(loop.read) + len(selection.pages),
        pages_in_scope=loop.pages_known,
    )


def rerank_can_change(chosen: Sequence[PageRef], k: int) -> bool:
    """Whether reordering ``chosen`` can change the ``k`` pages a round reads: only when there
    are more than ``k`` of them. With ``k`` or fewer every one is read whatever the order, so a
    reranker's LLM call would buy nothing (the last pages of a document, a narrow scope)."""
    return len(chosen) > k > 0


def rerank_stage(
    loop: DocMemoLoop,
    reranker: BaseNodePostprocessor,
    query: str,
    chosen: list[PageRef],
    k: int,
) -> Steps[list[PageRef]]:
    """The rerank stage: any node postprocessor reorders the chosen pages; its picks (the
    first ``k``) come first, the rest keep their order behind."""
    from llama_index_docmemo.postprocessors.rerank import RoundQueryBundle

    yield from loop.fetch_records(chosen)
    nodes = [
        PageWithScore(node=node_of(loop, loop.records[r]), score=loop.last_scores.get(r, 0.0))
        for r in chosen
        if r in loop.records
    ]
    bundle = RoundQueryBundle(
        query_str=query,
        question=loop.question,
        evidence=loop.episodic.evidence,
        missing=loop.episodic.missing,
    )
    with (
        rerank_events(loop.callbacks(), reranker, nodes, bundle, k) as ended,
        counting_llm_calls(loop.round_cost),
    ):
        found = yield either(reranker.postprocess_nodes, reranker.apostprocess_nodes, nodes, bundle)
        reranked = ended(found)
    allowed = set(chosen)
    picked = [r for r in dict.fromkeys(node_ref(n) for n in reranked) if r in allowed][:k]
    return picked + [r for r in chosen if r not in picked]
