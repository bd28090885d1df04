"""DocMemoQueryEngine: the retrieve -> read -> update loop of DocMemo as a LlamaIndex query engine.

A drop-in for ``RetrieverQueryEngine``: ``query``/``aquery`` return a ``Response`` whose
``source_nodes`` are the evidence pages and whose ``metadata["docmemo"]`` is the round-by-round
trace; ``retrieve``/``synthesize`` let it sit under routers and tools.
"""

from __future__ import annotations

import asyncio
import logging
import time
from collections.abc import Generator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import llama_index.core.instrumentation as instrument
from llama_index.core.base.base_query_engine import BaseQueryEngine
from llama_index.core.base.response.schema import RESPONSE_TYPE, Response, StreamingResponse
from llama_index.core.callbacks import CallbackManager
from llama_index.core.llms import LLM
from llama_index.core.postprocessor.types import BaseNodePostprocessor
from llama_index.core.prompts.mixin import PromptMixinType
from llama_index.core.schema import MediaResource, Node, NodeWithScore, QueryBundle

from llama_index_docmemo.config import DocMemoConfig
from llama_index_docmemo.encoders.base import PageEncoder
from llama_index_docmemo.errors import IngestError
from llama_index_docmemo.events import DocMemoRoundEndEvent, DocMemoRoundStartEvent
from llama_index_docmemo.paths import default_cache_dir
from llama_index_docmemo.reasoning.base import (
    CropView,
    Feedback,
    PageReranker,
    Reasoner,
    ReasoningInput,
)
from llama_index_docmemo.reasoning.validation import sanitize_feedback
from llama_index_docmemo.retriever import DocMemoRetriever, QueryState, RoundSelection, page_node
from llama_index_docmemo.store.base import PageStore
from llama_index_docmemo.trace import (
    FeedbackRecord,
    PageRead,
    PageScore,
    QueryTrace,
    RoundTrace,
    StopReason,
)
from llama_index_docmemo.types import PageFilter, PageRecord, PageRef

dispatcher = instrument.get_dispatcher(__name__)


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


@dataclass
class _Loop:
    """Mutable bookkeeping of one run of the loop (per query, never shared)."""

    state: QueryState
    started: float
    rounds: list[RoundTrace]
    crops: list[NodeWithScore]
    feedback: Feedback | None = None
    stop: StopReason | None = None


class DocMemoQueryEngine(BaseQueryEngine):
    """Answers a question by up to T rounds of retrieve -> read -> update, stopping early.

    Args:
        retriever: the round-by-round retriever (store, encoder, beliefs, schema).
        reasoner: reads the pages and labels them (offline, VLM, or simulated).
        crop_postprocessor: adds table/figure crops of the pages read (adaptive granularity).
        llm: used to stream the final answer when ``streaming`` is on.
        evidence_images: attach the rendered page image to each evidence node.
        cache_dir: where rendered evidence pages are cached.
    """

    def __init__(
        self,
        retriever: DocMemoRetriever,
        reasoner: Reasoner,
        crop_postprocessor: BaseNodePostprocessor | None = None,
        llm: LLM | None = None,
        streaming: bool = False,
        evidence_images: bool = True,
        cache_dir: str | Path | None = None,
        callback_manager: CallbackManager | None = None,
    ) -> None:
        super().__init__(callback_manager=callback_manager)
        if streaming and llm is None:
            raise ValueError("streaming=True needs an llm to stream the final answer")
        self.retriever = retriever
        self.reasoner = reasoner
        self.crop_postprocessor = crop_postprocessor
        self.llm = llm
        self.streaming = streaming
        self.evidence_images = evidence_images
        self.cache_dir = Path(cache_dir) if cache_dir else default_cache_dir()

    @property
    def config(self) -> DocMemoConfig:
        return self.retriever.config

    @classmethod
    def from_defaults(
        cls,
        store: PageStore,
        encoder: PageEncoder | None = None,
        llm: LLM | None = None,
        reasoner: Reasoner | None = None,
        config: DocMemoConfig | None = None,
        page_filter: PageFilter | None = None,
        crop_postprocessor: BaseNodePostprocessor | None = None,
        reranker: PageReranker | None = None,
        streaming: bool = False,
        **kwargs: Any,
    ) -> DocMemoQueryEngine:
        """Wire an engine: default CPU encoder, and the VLM reasoner when an ``llm`` is given
        (else the offline reasoner, which needs no model). With an ``llm`` and
        ``config.adaptive_granularity``, table/figure crops are added for it to look at; the
        offline reasoner gets crops only when a ``crop_postprocessor`` is passed."""
        if encoder is None:
            from llama_index_docmemo.encoders import default_encoder

            encoder = default_encoder()
        if reasoner is None:
            if llm is not None:
                from llama_index_docmemo.reasoning.vlm import VLMReasoner

                reasoner = VLMReasoner(llm)
            else:
                from llama_index_docmemo.reasoning.offline import OfflineReasoner

                reasoner = OfflineReasoner()
        config = config or DocMemoConfig()
        if crop_postprocessor is None and llm is not None and config.adaptive_granularity:
            from llama_index_docmemo.postprocessors.crops import CropPostprocessor

            crop_postprocessor = CropPostprocessor()
        if reranker is None and llm is not None and config.llm_rerank:
            from llama_index_docmemo.reasoning.reranker import LLMReranker

            reranker = LLMReranker(llm)
        retriever = DocMemoRetriever(
            store, encoder, config=config, page_filter=page_filter, reranker=reranker
        )
        return cls(
            retriever,
            reasoner,
            crop_postprocessor=crop_postprocessor,
            llm=llm,
            streaming=streaming,
            **kwargs,
        )

    def _get_prompt_modules(self) -> PromptMixinType:
        return {}

    # -- the loop ---------------------------------------------------------------------------
    def run(self, question: str, page_filter: PageFilter | None = None) -> DocMemoResult:
        """Run the loop for one question (synchronously)."""
        loop = _Loop(self.retriever.start(question, page_filter), time.perf_counter(), [], [])
        for _ in range(self.config.effective_rounds):
            selection = self.retriever.retrieve_round(loop.state)
            if self._begin(loop, selection):
                break
            inp = self._reasoning_input(loop, selection)
            feedback = self.reasoner.reason(inp) if inp is not None else None
            if self._end(loop, selection, feedback):
                break
        return self._result(loop)

    async def arun(self, question: str, page_filter: PageFilter | None = None) -> DocMemoResult:
        """Async :meth:`run`: store search and reasoning are awaited, never blocking the loop."""
        state = await asyncio.to_thread(self.retriever.start, question, page_filter)
        loop = _Loop(state, time.perf_counter(), [], [])
        for _ in range(self.config.effective_rounds):
            selection = await self.retriever.aretrieve_round(loop.state)
            if self._begin(loop, selection):
                break
            inp = await asyncio.to_thread(self._reasoning_input, loop, selection)
            feedback = await self.reasoner.areason(inp) if inp is not None else None
            if self._end(loop, selection, feedback):
                break
        return await asyncio.to_thread(self._result, loop)

    def _begin(self, loop: _Loop, selection: RoundSelection) -> bool:
        """Announce the round; True when there is nothing to read (the loop stops)."""
        dispatcher.event(DocMemoRoundStartEvent(round=selection.round, query=selection.query))
        if not selection.pages:
            loop.stop = "no_candidates"
            loop.rounds.append(self._round_trace(loop, selection, None, 0, 0))
            return True
        return False

    def _reasoning_input(self, loop: _Loop, selection: RoundSelection) -> ReasoningInput | None:
        state, cfg = loop.state, self.config
        if cfg.max_llm_calls is not None and state.llm_calls >= cfg.max_llm_calls:
            return None
        crops = self._crops(loop, selection)
        loop.crops.extend(crops)
        final = selection.round >= cfg.effective_rounds or (
            cfg.max_llm_calls is not None and state.llm_calls + 1 >= cfg.max_llm_calls
        )
        return ReasoningInput(
            question=state.question,
            query=selection.query,
            pages=[self.retriever.page_view(state, r) for r in selection.pages],
            crops=[_crop_view(n) for n in crops],
            evidence=state.episodic.evidence if cfg.use_episodic else [],
            missing=state.episodic.missing if cfg.use_episodic else [],
            outline=state.schema.describe() if cfg.use_schema else "",
            round=selection.round,
            final_round=final,
            pages_read_total=len(state.read) + len(selection.pages),
            pages_in_scope=state.pages_in_scope,
        )

    def _crops(self, loop: _Loop, selection: RoundSelection) -> list[NodeWithScore]:
        """Crops of the round's pages, within the per-query cap on table crops."""
        if self.crop_postprocessor is None or not self.config.adaptive_granularity:
            return []
        nodes = [
            NodeWithScore(node=page_node(r), score=s)
            for r, s in zip(selection.pages, selection.scores, strict=True)
        ]
        out = self.crop_postprocessor.postprocess_nodes(nodes, QueryBundle(selection.query))
        tables_left = self.config.max_table_crops - sum(
            c.node.metadata.get("kind") == "table" for c in loop.crops
        )
        crops = []
        for node in out:
            kind = node.node.metadata.get("kind")
            if kind == "page" or (kind == "table" and tables_left <= 0):
                continue
            tables_left -= kind == "table"
            crops.append(node)
        return crops

    def _end(self, loop: _Loop, selection: RoundSelection, feedback: Feedback | None) -> bool:
        """Apply the round's feedback; True when the loop should stop."""
        state, cfg = loop.state, self.config
        shown = [r.ref for r in selection.pages]
        dropped = 0
        if feedback is not None:
            state.llm_calls += feedback.llm_calls
            feedback, dropped = sanitize_feedback(
                feedback, shown, state.read, cfg.max_label_changes_per_round
            )
        self.retriever.update(state, selection, feedback)
        loop.feedback = feedback
        loop.rounds.append(self._round_trace(loop, selection, feedback, dropped, len(loop.crops)))
        status = feedback.status if feedback else "need_more"
        dispatcher.event(
            DocMemoRoundEndEvent(
                round=selection.round,
                pages=[str(r) for r in shown],
                status=status,
                useful=[str(r) for r in (feedback.useful_pages if feedback else [])],
            )
        )
        loop.stop = self._stop_reason(loop, status, selection.round)
        return loop.stop is not None

    def _stop_reason(self, loop: _Loop, status: str, round_: int) -> StopReason | None:
        state, cfg = loop.state, self.config
        if cfg.static:
            return "static"
        if status == "answered":
            return "answered"
        explored = (
            round_ >= min(cfg.min_rounds_before_unanswerable, cfg.rounds)
            or len(state.read) >= state.pages_in_scope
        )
        if status == "unanswerable" and explored:
            return "unanswerable"
        if cfg.max_llm_calls is not None and state.llm_calls >= cfg.max_llm_calls:
            return "budget"
        if cfg.max_pages is not None and len(state.read) >= cfg.max_pages:
            return "budget"
        if round_ >= cfg.rounds:
            return "max_rounds"
        return None

    # -- results ----------------------------------------------------------------------------
    def _result(self, loop: _Loop) -> DocMemoResult:
        state = loop.state
        feedback = loop.feedback
        stop = loop.stop or "max_rounds"
        if feedback is not None and feedback.status == "answered" and feedback.answer:
            status, answer = "answered", feedback.answer
        elif stop == "unanswerable":
            status = "unanswerable"
            answer = (feedback.answer if feedback and feedback.answer else None) or (
                "Not answerable: the pages read do not contain this information."
            )
        else:
            status = "need_more"
            answer = self.reasoner.synthesize(
                state.question, state.episodic.evidence, state.episodic.last_answer
            )
        useful = set(state.episodic.useful_pages)
        sources = self._evidence_nodes(state) + [c for c in loop.crops if _node_ref(c) in useful]
        trace = QueryTrace(
            question=state.question,
            answer=answer,
            status=status,
            stop_reason=stop,
            rounds=loop.rounds,
            pages_read=[
                PageRead(doc=r.doc_id, page=r.page, round=state.episodic.round_of(r) or 0)
                for r in state.episodic.pages_read
            ],
            evidence=[
                PageScore(
                    doc=n.node.metadata["doc_id"],
                    page=n.node.metadata["page"],
                    score=n.score or 0.0,
                )
                for n in sources
                if n.node.metadata.get("kind") == "page"
            ],
            llm_calls=state.llm_calls,
            seconds=time.perf_counter() - loop.started,
            reasoner=self.reasoner.name,
        )
        return DocMemoResult(answer=answer, status=status, source_nodes=sources, trace=trace)

    def _evidence_nodes(self, state: QueryState) -> list[NodeWithScore]:
        """Pages judged useful or cited by a note (never a page merely read), scored by
        posterior mean. An unanswered question may have none."""
        read = set(state.episodic.pages_read)
        cited = [n.page for n in state.episodic.evidence]
        refs = [r for r in dict.fromkeys([*state.episodic.useful_pages, *cited]) if r in read]
        records = [state.records[r] for r in refs if r in state.records]
        nodes = [
            NodeWithScore(
                node=self._evidence_node(rec), score=float(state.beliefs.mean([rec.ref])[0])
            )
            for rec in records
        ]
        return sorted(nodes, key=lambda n: -(n.score or 0.0))

    def _evidence_node(self, record: PageRecord) -> Node:
        base = page_node(record)
        image = None
        if self.evidence_images and record.source and Path(record.source).is_file():
            try:
                image = MediaResource(path=self._rendered(record))
            except IngestError as exc:  # a page MuPDF cannot render keeps its text
                logging.getLogger(__name__).warning("no evidence image: %s", exc)
        return Node(
            id_=base.id_,
            text_resource=MediaResource(text=record.text),
            image_resource=image,
            metadata=base.metadata,
            excluded_embed_metadata_keys=base.excluded_embed_metadata_keys,
            excluded_llm_metadata_keys=base.excluded_llm_metadata_keys,
        )

    def _rendered(self, record: PageRecord) -> Path:
        from llama_index_docmemo.ingest.pdf import render_page

        path = self.cache_dir / "pages" / f"{record.doc_version[:16]}-p{record.page}.png"
        if not path.is_file():
            path.parent.mkdir(parents=True, exist_ok=True)
            render_page(record.source, record.page, 1500).save(path, format="PNG")
        return path

    def _round_trace(
        self,
        loop: _Loop,
        selection: RoundSelection,
        feedback: Feedback | None,
        dropped: int,
        crops: int,
    ) -> RoundTrace:
        state = loop.state
        record = None
        if feedback is not None:
            record = FeedbackRecord(
                status=feedback.status,
                answer=feedback.answer,
                useful=[
                    PageScore(doc=r.doc_id, page=r.page, score=1.0) for r in feedback.useful_pages
                ],
                irrelevant=[
                    PageScore(doc=r.doc_id, page=r.page, score=1.0)
                    for r in feedback.irrelevant_pages
                ],
                notes=[f"p{n.page.page}: {n.fact}" for n in feedback.notes],
                missing=feedback.missing,
                refined_query=feedback.refined_query,
                dropped_labels=dropped,
            )
        watched = list(
            dict.fromkeys(
                [r.ref for r in selection.pages]
                + [PageRef(c.doc, c.page) for c in selection.candidates]
                + state.beliefs.informed_refs()
            )
        )
        return RoundTrace(
            round=selection.round,
            query=selection.query,
            lam=selection.lam,
            candidates=selection.candidates,
            selected=[
                PageScore(doc=r.doc_id, page=r.page, score=s)
                for r, s in zip(selection.pages, selection.scores, strict=True)
            ],
            crops=crops,
            feedback=record,
            beliefs=self.retriever.belief_states(state, watched),
            llm_calls=feedback.llm_calls if feedback else 0,
            seconds=selection.seconds,
        )

    # -- BaseQueryEngine hooks ----------------------------------------------------------------
    @dispatcher.span
    def _query(self, query_bundle: QueryBundle) -> RESPONSE_TYPE:
        result = self.run(query_bundle.query_str)
        return self._respond(result)

    @dispatcher.span
    async def _aquery(self, query_bundle: QueryBundle) -> RESPONSE_TYPE:
        result = await self.arun(query_bundle.query_str)
        return self._respond(result)

    def _respond(self, result: DocMemoResult) -> RESPONSE_TYPE:
        response = result.to_response()
        if not self.streaming:
            return response
        return StreamingResponse(
            response_gen=self._stream_answer(result),
            source_nodes=response.source_nodes,
            metadata=response.metadata,
        )

    def _stream_answer(self, result: DocMemoResult) -> Generator[str, None, None]:
        """Stream a final answer written by the LLM from the evidence the loop found."""
        assert self.llm is not None
        evidence = "\n".join(
            f"[{n.node.metadata['doc_id']} p.{n.node.metadata['page']}] {n.node.get_content()[:1500]}"
            for n in result.source_nodes
            if n.node.metadata.get("kind") == "page"
        )
        prompt = (
            "Answer the question from the evidence pages below. Cite pages as [doc p.N]. "
            "If the evidence does not contain the answer, say so.\n\n"
            f"Question: {result.trace.question}\n\nDraft answer: {result.answer}\n\n"
            f"Evidence:\n{evidence}\n\nAnswer:"
        )
        for chunk in self.llm.stream_complete(prompt):
            yield chunk.delta or ""

    def retrieve(self, query_bundle: QueryBundle) -> list[NodeWithScore]:
        """The evidence pages the full loop finds for the query."""
        return self.run(query_bundle.query_str).source_nodes

    def synthesize(
        self,
        query_bundle: QueryBundle,
        nodes: list[NodeWithScore],
        additional_source_nodes: list[NodeWithScore] | None = None,
    ) -> RESPONSE_TYPE:
        """One reading of the given page nodes by the reasoner (no retrieval)."""
        feedback = self.reasoner.reason(self._input_for_nodes(query_bundle.query_str, nodes))
        shown = [_node_ref(n) for n in nodes if n.node.metadata.get("kind") == "page"]
        feedback, _ = sanitize_feedback(
            feedback, shown, shown, self.config.max_label_changes_per_round
        )
        answer = feedback.answer or self.reasoner.synthesize(
            query_bundle.query_str, feedback.notes, None
        )
        return Response(
            response=answer,
            source_nodes=list(nodes) + list(additional_source_nodes or []),
            metadata={"docmemo": {"status": feedback.status, "llm_calls": feedback.llm_calls}},
        )

    async def asynthesize(
        self,
        query_bundle: QueryBundle,
        nodes: list[NodeWithScore],
        additional_source_nodes: list[NodeWithScore] | None = None,
    ) -> RESPONSE_TYPE:
        return await asyncio.to_thread(
            self.synthesize, query_bundle, nodes, additional_source_nodes
        )

    def _input_for_nodes(self, question: str, nodes: list[NodeWithScore]) -> ReasoningInput:
        from llama_index_docmemo.reasoning.base import PageView

        pages = [
            PageView(
                ref=_node_ref(n),
                text=n.node.get_content(),
                section=n.node.metadata.get("section", ""),
            )
            for n in nodes
            if n.node.metadata.get("kind") == "page"
        ]
        crops = [_crop_view(n) for n in nodes if n.node.metadata.get("kind") not in (None, "page")]
        return ReasoningInput(
            question=question, query=question, pages=pages, crops=crops, final_round=True
        )


def _node_ref(node: NodeWithScore) -> PageRef:
    return PageRef(node.node.metadata["doc_id"], int(node.node.metadata["page"]))


def _crop_view(node: NodeWithScore) -> CropView:
    meta = node.node.metadata
    image_path = meta.get("image_path")

    def load_image() -> Any:
        from PIL import Image

        return Image.open(image_path)

    return CropView(
        page=_node_ref(node),
        kind=str(meta.get("kind", "crop")),
        bbox=tuple(meta.get("bbox", (0.0, 0.0, 0.0, 0.0))),  # type: ignore[arg-type]
        text=node.node.get_content(),
        load_image=load_image if image_path else None,
    )
