"""What a round shows: the reader's input (pages with their cached images, crops within the
per-query cap, memories), the selected pages as nodes, and the rerank stage that reorders them
(any node postprocessor). Each function reads the query's state (a value, ``state.py``) and the
runner's settings; none changes either."""

from __future__ import annotations

from collections.abc import Sequence
from functools import partial
from pathlib import Path
from typing import TYPE_CHECKING

from llama_index.core.schema import NodeWithScore

from llama_index_docmemo.events import LLMCallTally, counting_llm_calls, rerank_events
from llama_index_docmemo.nodes import PageWithScore, node_ref, page_node
from llama_index_docmemo.page_images import PageImage
from llama_index_docmemo.readers.base import CropView, PageView, ReaderInput
from llama_index_docmemo.step_runtime import Steps, either
from llama_index_docmemo.types import PageRecord, PageRef

if TYPE_CHECKING:
    from llama_index.core.callbacks import CallbackManager
    from llama_index.core.postprocessor.types import BaseNodePostprocessor
    from llama_index.core.schema import BaseNode
    from PIL.Image import Image

    from llama_index_docmemo.config import DocMemoConfig
    from llama_index_docmemo.loop.runner import DocMemoRunner
    from llama_index_docmemo.loop.state import QueryState, RoundSelection


PAGE_IMAGE_SIDE = 1500
"""Long side of the page images shown to a reader and attached to evidence nodes."""


def page_image(record: PageRecord, cache: Path) -> PageImage:
    """Where a page's image is cached (the reader and the evidence nodes share the file)."""
    return PageImage(record.source, record.doc_version, record.page, PAGE_IMAGE_SIDE, cache)


def crop_view(node: NodeWithScore) -> CropView:
    """A crop node as the reader sees it (its image loaded on demand)."""
    meta = node.node.metadata
    image_path = meta.get("image_path")

    def load_image() -> Path:
        return Path(image_path)

    return CropView(
        page=node_ref(node),
        kind=str(meta.get("kind", "crop")),
        bbox=tuple(meta.get("bbox", (0.0, 0.0, 0.0, 0.0))),  # type: ignore[arg-type]
        text=node.node.get_content(),
        load_image=load_image if image_path else None,
    )


def capped_crops(
    new: Sequence[NodeWithScore], earlier: Sequence[NodeWithScore], max_tables: int
) -> list[NodeWithScore]:
    """The crops among a round's ``new`` nodes, within the per-query cap on table crops."""
    tables_left = max_tables - sum(c.node.metadata.get("kind") == "table" for c in earlier)
    crops = []
    for node in new:
        kind = node.node.metadata.get("kind")
        if kind == "page" or (kind == "table" and tables_left <= 0):
            continue
        tables_left -= kind == "table"
        crops.append(node)
    return crops


def _render(source: str, page: int) -> Image:
    """The page image for a reader without a cache folder, rendered when it asks for it."""
    from llama_index_docmemo.ingest.pdf import render_page

    return render_page(source, page, PAGE_IMAGE_SIDE)


def page_view(state: QueryState, runner: DocMemoRunner, record: PageRecord) -> PageView:
    """A page as the reader sees it (its image cached in the engine's folder, when it has one)."""
    use_schema = runner.config.loop.use_schema
    cache = runner.cache_dir
    return PageView(
        ref=record.ref,
        text=record.text,
        section=state.schema.section_of(record.ref) if use_schema else "",
        summary=state.schema.summary_of(record.ref) if use_schema else "",
        image=page_image(record, cache) if cache is not None else None,
        load_image=partial(_render, record.source, record.page) if cache is None else None,
    )


def node_of(state: QueryState, config: DocMemoConfig, record: PageRecord) -> BaseNode:
    summary = state.schema.summary_of(record.ref) if config.loop.use_schema else ""
    return page_node(record, summary=summary)


def selected_nodes(
    state: QueryState, config: DocMemoConfig, selection: RoundSelection
) -> list[NodeWithScore]:
    """The round's selected pages as scored nodes."""
    return [
        PageWithScore(node=node_of(state, config, record), score=score)
        for record, score in zip(selection.pages, selection.scores, strict=True)
    ]


def reading_input(
    state: QueryState,
    runner: DocMemoRunner,
    selection: RoundSelection,
    crops: list[NodeWithScore],
    calls: int,
) -> ReaderInput:
    """Everything a round shows the reader (the memories only where they are switched on);
    ``calls``: the LLM calls of the query so far, this round's reranking included, so a
    reading told it is the last one is the last one."""
    config = runner.config
    settings, cap = config.loop, config.budget.max_llm_calls
    final = selection.round >= settings.effective_rounds or (
        cap is not None and calls + 1 >= cap - runner.reserved_llm_calls
    )
    episodic = state.episodic
    return ReaderInput(
        question=state.question,
        query=selection.query,
        pages=[page_view(state, runner, r) for r in selection.pages],
        crops=[crop_view(n) for n in crops],
        evidence=episodic.evidence if settings.use_episodic else [],
        missing=episodic.missing if settings.use_episodic else [],
        outline=state.schema.describe() if settings.use_schema else "",
        round=selection.round,
        final_round=final,
        pages_read_total=len(state.read) + len(selection.pages),
        pages_in_scope=state.pages_known,
    )


def rerank_can_change(chosen: Sequence[PageRef], k: int) -> bool:
    """Whether reordering ``chosen`` can change the ``k`` pages a round reads: only when there
    are more than ``k`` of them. With ``k`` or fewer every one is read whatever the order, so a
    reranker's LLM call would buy nothing (the last pages of a document, a narrow scope)."""
    return len(chosen) > k > 0


def rerank_stage(
    state: QueryState,
    config: DocMemoConfig,
    reranker: BaseNodePostprocessor,
    query: str,
    chosen: list[PageRef],
    k: int,
    callbacks: CallbackManager,
    cost: LLMCallTally,
) -> Steps[list[PageRef]]:
    """The rerank stage: any node postprocessor reorders the chosen pages (those with a record
    in ``state``); its picks (the first ``k``) come first, the rest keep their order behind.
    Its LLM requests are counted in ``cost``."""
    from llama_index_docmemo.postprocessors.rerank import RoundQueryBundle

    nodes = [
        PageWithScore(
            node=node_of(state, config, state.records[r]), score=state.last_scores.get(r, 0.0)
        )
        for r in chosen
        if r in state.records
    ]
    bundle = RoundQueryBundle(
        query_str=query,
        question=state.question,
        evidence=state.episodic.evidence,
        missing=state.episodic.missing,
    )
    with (
        rerank_events(callbacks, reranker, nodes, bundle, k) as ended,
        counting_llm_calls(cost),
    ):
        found = yield either(reranker.postprocess_nodes, reranker.apostprocess_nodes, nodes, bundle)
        reranked = ended(found)
    allowed = set(chosen)
    picked = [r for r in dict.fromkeys(node_ref(n) for n in reranked) if r in allowed][:k]
    return picked + [r for r in chosen if r not in picked]
