"""What a query returns (the answer, the evidence nodes and the trace) and the pieces of a
round shown to the reader (page images, crops within the per-query cap).

Evidence pages may carry their rendered image (for an app to show): the same file the reader was
shown, rendered once per document version and page (``page_images.py``).
"""

from __future__ import annotations

import logging
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING

from llama_index.core.base.response.schema import Response
from llama_index.core.schema import NodeWithScore

from llama_index_docmemo.loop.citing import cited_answer, mark_sources
from llama_index_docmemo.nodes import PageWithScore, is_page, node_ref, page_node
from llama_index_docmemo.page_images import PageImage, page_image_files
from llama_index_docmemo.reasoning.base import CropView
from llama_index_docmemo.step_runtime import Steps
from llama_index_docmemo.trace import (
    BeliefState,
    DocumentBelief,
    FeedbackRecord,
    PageRead,
    PageScore,
    QueryTrace,
    RoundTrace,
)
from llama_index_docmemo.types import Feedback, PageRecord, PageRef

if TYPE_CHECKING:
    from llama_index_docmemo.events import LLMCallTally
    from llama_index_docmemo.loop.runner import DocMemoRunner
    from llama_index_docmemo.loop.state import QueryState, RoundSelection
    from llama_index_docmemo.memory.belief import PageBeliefMemory

logger = logging.getLogger(__name__)

PAGE_IMAGE_SIDE = 1500
"""Long side of the page images shown to a reader and attached to evidence nodes."""


@dataclass
class DocMemoResult:
    """The outcome of one question: answer, verdict, evidence nodes and the full trace."""

    answer: str
    status: str
    source_nodes: list[NodeWithScore]
    trace: QueryTrace

    def to_response(self) -> Response:
        return Response(
            response=self.answer,
            source_nodes=self.source_nodes,
            metadata={"docmemo": self.trace.model_dump(mode="json")},
        )


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


def evidence_refs(
    useful: Sequence[PageRef], cited: Sequence[PageRef], read: set[PageRef]
) -> list[PageRef]:
    """Evidence pages: judged useful or cited by a note, and read (never a page merely read)."""
    return [r for r in dict.fromkeys([*useful, *cited]) if r in read]


def build_result(
    state: QueryState, runner: DocMemoRunner, status: str, answer: str, seconds: float
) -> Steps[DocMemoResult]:
    """The answer, the evidence nodes (with their page images when asked for) and the trace of
    a finished query (``state``, with its verdict, after ``seconds``): built here and only
    here."""
    episodic = state.episodic
    cited = [n.page for n in episodic.evidence]
    refs = evidence_refs(episodic.useful_pages, cited, state.read)
    records = [state.records[r] for r in refs if r in state.records]
    images: dict[PageRef, Path | None] = {}
    cache = runner.cache_dir
    if runner.evidence_images and cache is not None and records:
        files = yield from page_image_files([page_image(r, cache) for r in records])
        images = {r.ref: path for r, path in zip(records, files, strict=True)}
    beliefs = state.beliefs
    belief_of = {
        ref: float(beliefs.mean([ref])[0]) if ref in beliefs else 0.5 for ref in state.read
    }
    cited = yield from cited_answer(state, runner.config, status, answer, refs, belief_of)
    status, answer = cited.status, cited.answer
    evidence = sorted(
        (
            PageWithScore(
                node=page_node(rec, image_path=images.get(rec.ref)),
                score=belief_of.get(rec.ref, 0.5),
            )
            for rec in records
        ),
        key=lambda n: -(n.score or 0.0),
    )
    useful = set(episodic.useful_pages)
    sources = evidence + [c for c in state.crops if node_ref(c) in useful]
    cited = mark_sources(cited, sources, runner.config.answer.citation_markers)
    answer = cited.answer
    if not sources and state.error is not None:  # cut short: what round 1 would have read
        sources = unread_candidates(state)
    reader = runner.reader
    decide = getattr(reader, "images_now", None)  # after a refusal a server gets text
    choice = decide() if callable(decide) else None
    trace = QueryTrace(
        question=state.question,
        answer=answer,
        status=status,
        stop_reason=state.stop or "max_rounds",
        error=state.error,
        rounds=list(state.rounds),
        pages_read=[
            PageRead(doc_id=r.doc_id, page=r.page, round=episodic.round_of(r) or 0)
            for r in episodic.pages_read
        ],
        evidence=[
            PageScore(
                doc_id=str(n.node.metadata["doc_id"]),
                page=int(n.node.metadata["page"]),
                score=n.score or 0.0,
            )
            for n in sources
            if is_page(n) and not n.node.metadata.get("unread")
        ],
        citations=cited.citations,
        abstained=cited.abstained,
        llm_calls=state.llm_calls,
        seconds=seconds,
        reader=reader.name if reader is not None else "",
        images=images_shown(state, bool(choice.send) if choice is not None else False),
        images_reason=images_reason(state, choice.reason if choice is not None else ""),
    )
    return DocMemoResult(answer=answer, status=status, source_nodes=sources, trace=trace)


def _fileless(state: QueryState) -> list[str]:
    """The documents of the pages read that have no file to render (indexed from text alone)."""
    records = [state.records[r] for r in state.read if r in state.records]
    if not records or any(Path(r.source).is_file() for r in records):
        return []
    return sorted({r.doc_id for r in records})


def images_shown(state: QueryState, chosen: bool) -> bool:
    """Whether the reader was shown page images: chosen, and a page read had a file."""
    return chosen and not _fileless(state)


def images_reason(state: QueryState, chosen: str) -> str:
    """Why (not) images: the reader's choice, or the pages read having no file."""
    fileless = _fileless(state)
    if not fileless:
        return chosen
    return (
        f"no page images: {', '.join(fileless)} were indexed without their PDF file (their "
        "Documents carried no file_path), so their pages were read as text"
    )


def unread_candidates(state: QueryState) -> list[NodeWithScore]:
    """Round 1's chosen pages, best first, marked ``unread`` in their metadata: what a query
    cut by its deadline or its LLM's failure before any evidence still gives an app to show."""
    if not state.rounds:
        return []
    nodes = []
    for chosen in sorted(state.rounds[0].selected, key=lambda s: -s.score):
        record = state.records.get(PageRef(chosen.doc_id, chosen.page))
        if record is not None:
            node = page_node(record)
            node.metadata["unread"] = True
            nodes.append(PageWithScore(node=node, score=chosen.score))
    return nodes


def round_trace(
    selection: RoundSelection,
    feedback: Feedback | None,
    dropped: int,
    beliefs: PageBeliefMemory,
    crops: int,
    cost: LLMCallTally,
    documents: list[DocumentBelief] | None = None,
) -> RoundTrace:
    """What a round retrieved, read, learned and cost (``cost``), and the ``beliefs`` it left
    (``documents``: the document beliefs, over a scope of several); ``crops``: the crops shown
    so far."""
    record = FeedbackRecord.of(feedback, dropped) if feedback is not None else None
    watched = dict.fromkeys(
        [r.ref for r in selection.pages]
        + [PageRef(c.doc_id, c.page) for c in selection.candidates]
        + beliefs.informed_refs()
    )
    return RoundTrace(
        round=selection.round,
        query=selection.query,
        lam=selection.lam,
        candidates=selection.candidates,
        selected=[
            PageScore(doc_id=r.doc_id, page=r.page, score=s)
            for r, s in zip(selection.pages, selection.scores, strict=True)
        ],
        crops=crops,
        feedback=record,
        beliefs=belief_states(beliefs, list(watched)),
        documents=documents or [],
        llm_calls=cost.calls,
        images=cost.images,
        image_tokens=cost.image_tokens,
        prompt_tokens=cost.prompt_tokens,
        completion_tokens=cost.completion_tokens,
        seconds=selection.seconds,
    )


def belief_states(beliefs: PageBeliefMemory, refs: list[PageRef]) -> list[BeliefState]:
    """(alpha, beta) of the pages of ``refs`` that hold a belief of their own."""
    out = []
    for ref in refs:
        if ref in beliefs:
            a, b = beliefs.get(ref)
            out.append(BeliefState(doc_id=ref.doc_id, page=ref.page, alpha=a, beta=b))
    return out
