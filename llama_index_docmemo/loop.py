"""DocMemoLoop: one query's state and its rounds of select -> read -> update -> stop.

Everything that belongs to one query lives on one :class:`DocMemoLoop` object (beliefs,
episodic and schema memory, records seen, LLM calls, the trace) and nowhere else, so concurrent
queries never share state. The engine and the retriever are thin LlamaIndex adapters over it:
the retriever runs :meth:`DocMemoLoop.select` once, the engine runs :meth:`DocMemoLoop.run`.

State grows with what a query touches, never with the corpus: beliefs exist only for pages
scored or labelled (the prior elsewhere), schemas are fetched only for documents that appear
among the candidates, and records only for pages retrieved or selected.
"""

from __future__ import annotations

import asyncio
import logging
import time
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from functools import partial
from pathlib import Path
from typing import TYPE_CHECKING, Any

import llama_index.core.instrumentation as instrument
import numpy as np
from llama_index.core.base.response.schema import Response
from llama_index.core.callbacks import CallbackManager, CBEventType, EventPayload
from llama_index.core.instrumentation.events.rerank import ReRankEndEvent, ReRankStartEvent
from llama_index.core.instrumentation.events.retrieval import (
    RetrievalEndEvent,
    RetrievalStartEvent,
)
from llama_index.core.schema import NodeWithScore, QueryBundle

from llama_index_docmemo.config import DocMemoConfig
from llama_index_docmemo.errors import IngestError, LLMError, QuestionError
from llama_index_docmemo.events import (
    DocMemoRoundEndEvent,
    DocMemoRoundStartEvent,
    counting_llm_calls,
)
from llama_index_docmemo.expansion import expansion_terms
from llama_index_docmemo.levers.rounds import RoundLevers
from llama_index_docmemo.llms.deadline import deadline_scope
from llama_index_docmemo.memory.belief import PageBeliefMemory, normalise_scores
from llama_index_docmemo.memory.episodic import EpisodicMemory
from llama_index_docmemo.memory.schema import DocumentSchema, SchemaMemory
from llama_index_docmemo.nodes import PageWithScore, is_page, node_ref, page_node
from llama_index_docmemo.reasoning.base import (
    CropView,
    PageView,
    Reasoner,
    ReasoningInput,
    summarize_evidence,
)
from llama_index_docmemo.reasoning.validation import sanitize_feedback
from llama_index_docmemo.selection import candidate_pool, select_pages
from llama_index_docmemo.trace import (
    BeliefState,
    FeedbackRecord,
    PageRead,
    PageScore,
    QueryTrace,
    RoundTrace,
    StopReason,
)
from llama_index_docmemo.types import Feedback, PageFilter, PageHit, PageRecord, PageRef

if TYPE_CHECKING:
    from llama_index.core.postprocessor.types import BaseNodePostprocessor

    from llama_index_docmemo.encoders.base import PageEncoder
    from llama_index_docmemo.store.base import PageStore

dispatcher = instrument.get_dispatcher(__name__)

_clock = time.perf_counter  # the deadline's clock (tests substitute a fake one)

NOT_ANSWERABLE = "Not answerable: the pages read do not contain this information."


@dataclass(frozen=True)
class LoopParts:
    """What every query of an engine shares, read-only.

    Args:
        store / encoder: the page store and the encoder that filled it.
        config: loop parameters and ablation switches.
        reader: reads the selected pages (None: selection only, as the retriever uses it).
        reranker: any node postprocessor reordering each round's candidates (LLMRerank, a
            cross-encoder, :class:`~llama_index_docmemo.postprocessors.LLMReranker`...).
        crops: adds table/figure crops of the pages read (adaptive granularity).
        callback_manager: receives a RETRIEVE event per round.
        evidence_images / cache_dir: render evidence pages to PNG files under ``cache_dir``.
        reserved_llm_calls: calls of ``max_llm_calls`` kept for a final answer (streaming).
        round_events: fire LlamaIndex retrieval events per round (off under a retriever,
            whose ``retrieve`` fires them).
    """

    store: PageStore
    encoder: PageEncoder
    config: DocMemoConfig
    reader: Reasoner | None = None
    reranker: BaseNodePostprocessor | None = None
    crops: BaseNodePostprocessor | None = None
    callback_manager: CallbackManager | None = None
    evidence_images: bool = False
    cache_dir: Path | None = None
    reserved_llm_calls: int = 0
    round_events: bool = True
    levers: RoundLevers | None = None


@dataclass
class RoundSelection:
    """What one round retrieved and chose to read."""

    round: int
    query: str
    lam: float
    candidates: list[PageScore]
    pages: list[PageRecord]
    scores: list[float]
    seconds: float
    store_seconds: float = 0.0

    def nodes(self, loop: DocMemoLoop) -> list[NodeWithScore]:
        return [
            PageWithScore(node=loop.node_of(record), score=score)
            for record, score in zip(self.pages, self.scores, strict=True)
        ]


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
class _Reading:
    """A round's reading request: the reader's input and the crop nodes shown with it."""

    input: ReasoningInput
    crops: list[NodeWithScore] = field(default_factory=list)


def clean_question(question: str, config: DocMemoConfig) -> str:
    """The question as the loop uses it: refused when empty, refused or cut when too long."""
    text = question.strip() if isinstance(question, str) else ""
    if not text:
        raise QuestionError("the question is empty: ask something to search the documents for")
    limit = config.max_question_chars
    if len(text) > limit:
        if config.question_overflow == "error":
            raise QuestionError(
                f"the question has {len(text)} characters, more than max_question_chars={limit}; "
                "shorten it, or set question_overflow='truncate' to cut it"
            )
        text = text[:limit].rstrip()
    return text


def _render(source: str, page: int) -> Any:
    """The page image for a reader, rendered only when it asks for it."""
    from llama_index_docmemo.ingest.pdf import render_page

    return render_page(source, page, 1500)


class DocMemoLoop:
    """One question's run of the DocMemo loop (never shared between queries).

    Args:
        parts: the engine's shared, read-only components.
        question: the user's question (checked by :func:`clean_question`).
        page_filter: tenant / ACL / document scope (a ``PageFilter``, already translated).
    """

    def __init__(self, parts: LoopParts, question: str, page_filter: PageFilter | None) -> None:
        self.parts = parts
        self.config = parts.config
        self.question = clean_question(question, parts.config)
        self.scope = page_filter or PageFilter()
        self.schema = SchemaMemory()
        self.beliefs = PageBeliefMemory()
        self.episodic = EpisodicMemory(self.question)
        self.rng = np.random.default_rng(self.config.seed)
        self.versions: dict[str, str] = {}  # doc_id -> version pinned when first seen
        self.retrieval: dict[PageRef, float] = {}  # best normalised retrieval score so far
        self.records: dict[PageRef, PageRecord] = {}
        self.read: set[PageRef] = set()
        self.round = 0
        self.llm_calls = 0
        self.pages_known = 0  # pages of the documents among the candidates so far
        self._scope_pages: int | None = None  # counted by the store only when needed
        self.rounds: list[RoundTrace] = []
        self.crops: list[NodeWithScore] = []
        self.feedback: Feedback | None = None
        self.stop: StopReason | None = None
        self._last_scores: dict[PageRef, float] = {}
        self.started = time.perf_counter()
        self._deadline_start = _clock()
        self.levers = parts.levers or RoundLevers(parts.store, parts.encoder, parts.config)
        self.lever_searches: dict[str, list[PageHit]] = {}  # question-only searches (levers)

    # -- start --------------------------------------------------------------------------------
    def start(self) -> DocMemoLoop:
        """Nothing to load: schemas and page counts arrive with the candidates (a query over a
        tenant of 10,000 documents starts as fast as one over a single document)."""
        return self

    async def astart(self) -> DocMemoLoop:
        return self.start()

    def pages_in_scope(self) -> int:
        """Pages visible through the scope (one store count, made at most once per query)."""
        if self._scope_pages is None:
            self._scope_pages = self.parts.store.count_pages(self.scope)
        return self._scope_pages

    # -- select -------------------------------------------------------------------------------
    def round_query(self) -> str:
        """Round 1 asks the question; later rounds the reader's refined query (episodic
        memory), expanded with distinctive terms of the pages judged useful (relevance feedback)."""
        query = self.question
        if self.round >= 1 and self.config.use_episodic:
            refined = self.episodic.refined_query
            if refined and refined.strip():
                query = refined.strip()
        if self.config.relevance_feedback <= 0:
            return query
        useful = [self.records[r].text for r in self.episodic.useful_pages if r in self.records]
        extra = expansion_terms(
            query,
            useful,
            [rec.text for rec in self.records.values()],
            self.config.relevance_feedback,
        )
        return f"{query} {' '.join(extra)}" if extra else query

    def select(self) -> RoundSelection:
        """Search this round's candidates and choose the pages to read."""
        started = time.perf_counter()
        query = self.round_query()
        with self._retrieval_events(query) as done:
            store, cfg = self.parts.store, self.config
            embedding = self.parts.encoder.encode_query(query)
            store_started = time.perf_counter()
            if self._plain_search():
                hits = store.search(
                    embedding,
                    limit=cfg.candidates,
                    page_filter=self.scope,
                    prefetch_limit=cfg.prefetch,
                )
            else:
                hits = self._lever_candidates(embedding)
            self._add_schemas(store.list_documents(self._new_documents(hits)) if hits else [])
            store_seconds = time.perf_counter() - store_started
            hits, scores, chosen, k, lam = self._choose(hits)
            if self.parts.reranker is not None and chosen:
                self._fetch_records(chosen)
                nodes, bundle = self._rerank_nodes(chosen), self._rerank_bundle(query)
                with self._rerank_events(nodes, bundle, k) as ended, counting_llm_calls() as tally:
                    reranked = ended(self.parts.reranker.postprocess_nodes(nodes, bundle))
                self.llm_calls += tally.calls
                chosen = self._reranked(chosen, reranked, k)
            self._fetch_records(chosen[:k])
            selection = self._selection(query, lam, hits, scores, chosen[:k], started)
            selection.store_seconds = store_seconds
            done(selection)
        return selection

    async def aselect(self) -> RoundSelection:
        """Async :meth:`select`: the store search and the reranker are awaited."""
        started = time.perf_counter()
        query = self.round_query()
        with self._retrieval_events(query) as done:
            store, cfg = self.parts.store, self.config
            embedding = await asyncio.to_thread(self.parts.encoder.encode_query, query)
            store_started = time.perf_counter()
            if self._plain_search():
                hits = await store.asearch(
                    embedding,
                    limit=cfg.candidates,
                    page_filter=self.scope,
                    prefetch_limit=cfg.prefetch,
                )
            else:
                hits = await asyncio.to_thread(self._lever_candidates, embedding)
            if hits:
                scope = self._new_documents(hits)
                self._add_schemas(await asyncio.to_thread(store.list_documents, scope))
            store_seconds = time.perf_counter() - store_started
            hits, scores, chosen, k, lam = self._choose(hits)
            if self.parts.reranker is not None and chosen:
                await asyncio.to_thread(self._fetch_records, chosen)
                nodes, bundle = self._rerank_nodes(chosen), self._rerank_bundle(query)
                with self._rerank_events(nodes, bundle, k) as ended, counting_llm_calls() as tally:
                    reranked = ended(await self.parts.reranker.apostprocess_nodes(nodes, bundle))
                self.llm_calls += tally.calls
                chosen = self._reranked(chosen, reranked, k)
            await asyncio.to_thread(self._fetch_records, chosen[:k])
            selection = self._selection(query, lam, hits, scores, chosen[:k], started)
            selection.store_seconds = store_seconds
            done(selection)
        return selection

    def _new_documents(self, hits: list[PageHit]) -> PageFilter:
        """The scope narrowed to the candidates' documents whose schema is not loaded yet.

        ``where`` conditions are left out: they name page payload keys a document record may
        not have, and the hits already passed them."""
        new = sorted({h.record.doc_id for h in hits} - set(self.versions))
        return PageFilter(
            doc_ids=tuple(new), tenant=self.scope.tenant, acl_groups=self.scope.acl_groups
        )

    def _add_schemas(self, schemas: list[DocumentSchema]) -> None:
        """Pin each new document's version and make its pages known to the beliefs."""
        for schema in schemas:
            if schema.doc_id not in self.versions:
                self.versions[schema.doc_id] = schema.doc_version
                self.schema.add(schema)
                self.beliefs.add_document(schema.doc_id, schema.n_pages)
                self.pages_known += schema.n_pages

    def _choose(
        self, hits: list[PageHit]
    ) -> tuple[list[PageHit], np.ndarray, list[PageRef], int, float]:
        """The selection step (no I/O): score = (1 - lambda) c + lambda theta over the pool
        (candidates of every round so far plus pages the beliefs know about, minus pages read).

        Returns the round's pinned-version hits, their normalised scores, the pages chosen
        (wider than ``k`` when a reranker will reorder them), ``k`` and lambda.
        """
        cfg = self.config
        self.round += 1
        hits = sorted(
            (h for h in hits if self.versions.get(h.record.doc_id) == h.record.doc_version),
            key=lambda h: (-h.score, h.record.doc_id, h.record.page),
        )
        scores = normalise_scores([h.score for h in hits])
        for hit, score in zip(hits, scores, strict=True):
            self.records[hit.ref] = hit.record
            self.retrieval[hit.ref] = max(self.retrieval.get(hit.ref, 0.0), float(score))
        use_beliefs = cfg.use_belief and not cfg.static
        if use_beliefs and cfg.prior_strength > 0 and hits:
            self.levers.prime(self.beliefs, [h.ref for h in hits], scores)
        if use_beliefs and self.round == 1:
            self.levers.question_prior(
                self.beliefs,
                self.question,
                {d: self.schema.n_pages(d) for d in sorted({h.ref.doc_id for h in hits})},
                self.versions,
                self.scope,
            )
        lam = cfg.lambda_at(self.round) if use_beliefs else 0.0
        reread = set(self.episodic.useful_pages) if cfg.reread_useful else set()
        beliefs = self.beliefs if use_beliefs else None
        pool = candidate_pool(self.retrieval, beliefs, self.read, reread)
        k = self._round_budget()
        width = k if self.parts.reranker is None else max(2 * k, k + 5)
        chosen = select_pages(
            pool, self.retrieval, beliefs, k=width, lam=lam, rng=self.rng, sampling=cfg.sampling
        )
        self._last_scores = dict(zip(chosen.pages, chosen.scores, strict=True))
        return hits, scores, chosen.pages, k, lam

    def _round_budget(self) -> int:
        return self.levers.round_budget(self.round, len(self.read))

    def _plain_search(self) -> bool:
        """Whether this round is the question's own search (round 1, or no lever that searches)."""
        cfg = self.config
        levers_on = (
            cfg.feedback_search != "off"
            or cfg.subqueries
            or cfg.later_candidates is not None
            or cfg.schema_field_weight > 0
            or cfg.statement_weight > 0
        )
        return self.round == 0 or not levers_on

    def _lever_candidates(self, embedding: Any) -> list[PageHit]:
        """The round's candidates fused with the levers' rankings (issue 14's one hook)."""
        return self.levers.candidates(
            self.round + 1,
            self.question,
            embedding,
            self.scope,
            useful=self.episodic.useful_pages,
            irrelevant=sorted(self.episodic.irrelevant_pages),
            schema=self.schema if self.config.use_schema else None,
            cache=self.lever_searches,
        )

    def _fetch_records(self, refs: list[PageRef]) -> None:
        """Records of pages known only from beliefs (propagation), pinned versions only."""
        missing = [r for r in refs if r not in self.records]
        if missing:
            for record in self.parts.store.get_pages(missing, self.scope):
                if self.versions.get(record.doc_id) == record.doc_version:
                    self.records[record.ref] = record

    def _rerank_nodes(self, refs: list[PageRef]) -> list[NodeWithScore]:
        return [
            PageWithScore(node=self.node_of(self.records[r]), score=self._last_scores.get(r, 0.0))
            for r in refs
            if r in self.records
        ]

    def _rerank_bundle(self, query: str) -> QueryBundle:
        from llama_index_docmemo.postprocessors.rerank import RoundQueryBundle

        return RoundQueryBundle(
            query_str=query,
            question=self.question,
            evidence=self.episodic.evidence,
            missing=self.episodic.missing,
        )

    @staticmethod
    def _reranked(refs: list[PageRef], reranked: list[NodeWithScore], k: int) -> list[PageRef]:
        """The reranker's picks among ``refs`` (first ``k``), then the rest in selection order."""
        allowed = set(refs)
        picked = [r for r in dict.fromkeys(node_ref(n) for n in reranked) if r in allowed][:k]
        return picked + [r for r in refs if r not in picked]

    def _selection(
        self,
        query: str,
        lam: float,
        hits: list[PageHit],
        scores: np.ndarray,
        chosen: list[PageRef],
        started: float,
    ) -> RoundSelection:
        records = [self.records[r] for r in chosen if r in self.records]
        return RoundSelection(
            round=self.round,
            query=query,
            lam=lam,
            candidates=[
                PageScore(doc=h.record.doc_id, page=h.record.page, score=float(s))
                for h, s in zip(hits, scores, strict=True)
            ],
            pages=records,
            scores=[self._last_scores.get(r.ref, 0.0) for r in records],
            seconds=time.perf_counter() - started,
        )

    @contextmanager
    def _retrieval_events(self, query: str) -> Iterator[Any]:
        """LlamaIndex's retrieval start/end events and a RETRIEVE callback event for a round."""
        ended: list[RoundSelection] = []
        if not self.parts.round_events:
            yield ended.append
            return
        bundle = QueryBundle(query)
        dispatcher.event(RetrievalStartEvent(str_or_query_bundle=bundle))
        with self._callbacks().event(
            CBEventType.RETRIEVE, payload={EventPayload.QUERY_STR: query}
        ) as cb_event:
            yield ended.append
            nodes = ended[0].nodes(self) if ended else []
            cb_event.on_end(payload={EventPayload.NODES: nodes})
        dispatcher.event(RetrievalEndEvent(str_or_query_bundle=bundle, nodes=nodes))

    @contextmanager
    def _rerank_events(
        self, nodes: list[NodeWithScore], bundle: QueryBundle, k: int
    ) -> Iterator[Any]:
        """LlamaIndex's rerank start/end events and a RERANKING callback event around the
        rerank stage, whichever postprocessor fills it."""
        reranker = self.parts.reranker
        model = str(getattr(reranker, "model", "") or type(reranker).__name__)
        dispatcher.event(ReRankStartEvent(query=bundle, nodes=nodes, top_n=k, model_name=model))
        out: list[list[NodeWithScore]] = []

        def ended(reranked: list[NodeWithScore]) -> list[NodeWithScore]:
            out.append(reranked)
            return reranked

        payload = {EventPayload.QUERY_STR: bundle.query_str, EventPayload.NODES: nodes}
        with self._callbacks().event(CBEventType.RERANKING, payload=payload) as cb_event:
            yield ended
            cb_event.on_end(payload={EventPayload.NODES: out[0] if out else []})
        dispatcher.event(ReRankEndEvent(nodes=out[0] if out else []))

    def page_view(self, record: PageRecord) -> PageView:
        use_schema = self.config.use_schema
        return PageView(
            ref=record.ref,
            text=record.text,
            section=self.schema.section_of(record.ref) if use_schema else "",
            summary=self.schema.summary_of(record.ref) if use_schema else "",
            load_image=partial(_render, record.source, record.page),
        )

    def node_of(self, record: PageRecord) -> Any:
        summary = self.schema.summary_of(record.ref) if self.config.use_schema else ""
        return page_node(record, summary=summary)

    # -- read ---------------------------------------------------------------------------------
    def _budget_left(self) -> bool:
        cap = self.config.max_llm_calls
        return cap is None or self.llm_calls < cap - self.parts.reserved_llm_calls

    def out_of_time(self) -> bool:
        limit = self.config.max_seconds
        return limit is not None and _clock() - self._deadline_start >= limit

    @contextmanager
    def _llm_deadline(self) -> Iterator[None]:
        """LLM requests inside share the query's ``max_seconds``: one cut short by it ends the
        reading (the round stops as "deadline"); any other LLM failure still propagates."""
        limit = self.config.max_seconds
        if limit is None:
            yield
            return
        try:
            with deadline_scope(max(limit - (_clock() - self._deadline_start), 0.0)):
                yield
        except LLMError:
            if not self.out_of_time():
                raise

    def _reading(self, selection: RoundSelection, crops: list[NodeWithScore]) -> _Reading:
        cfg = self.config
        cap = cfg.max_llm_calls
        final = selection.round >= cfg.effective_rounds or (
            cap is not None and self.llm_calls + 1 >= cap - self.parts.reserved_llm_calls
        )
        crops = self._capped_crops(crops)
        return _Reading(
            ReasoningInput(
                question=self.question,
                query=selection.query,
                pages=[self.page_view(r) for r in selection.pages],
                crops=[crop_view(n) for n in crops],
                evidence=self.episodic.evidence if cfg.use_episodic else [],
                missing=self.episodic.missing if cfg.use_episodic else [],
                outline=self.schema.describe() if cfg.use_schema else "",
                round=selection.round,
                final_round=final,
                pages_read_total=len(self.read) + len(selection.pages),
                pages_in_scope=self.pages_known,
            ),
            crops,
        )

    def _crop_request(self, selection: RoundSelection) -> list[NodeWithScore] | None:
        if self.parts.crops is None or not self.config.adaptive_granularity:
            return None
        return [
            PageWithScore(node=self.node_of(r), score=s)
            for r, s in zip(selection.pages, selection.scores, strict=True)
        ]

    def _capped_crops(self, out: list[NodeWithScore]) -> list[NodeWithScore]:
        """Crops of the round's pages, within the per-query cap on table crops."""
        tables_left = self.config.max_table_crops - sum(
            c.node.metadata.get("kind") == "table" for c in self.crops
        )
        crops = []
        for node in out:
            kind = node.node.metadata.get("kind")
            if kind == "page" or (kind == "table" and tables_left <= 0):
                continue
            tables_left -= kind == "table"
            crops.append(node)
        return crops

    def read_pages(self, selection: RoundSelection) -> Feedback | None:
        """One reading of the selected pages; None when the budget or the deadline is spent."""
        if self.parts.reader is None or not self._budget_left() or self.out_of_time():
            return None
        nodes = self._crop_request(selection)
        crops = []
        if nodes:
            crops = self.parts.crops.postprocess_nodes(nodes, QueryBundle(selection.query))  # type: ignore[union-attr]
        reading = self._reading(selection, crops)
        self.crops.extend(reading.crops)
        with self._llm_deadline():
            return self.parts.reader.reason(reading.input)
        return None  # the query's deadline cut the reading short

    async def aread_pages(self, selection: RoundSelection) -> Feedback | None:
        """Async :meth:`read_pages`: crops and the reader are awaited."""
        if self.parts.reader is None or not self._budget_left() or self.out_of_time():
            return None
        nodes = self._crop_request(selection)
        crops = []
        if nodes:
            crops = await self.parts.crops.apostprocess_nodes(nodes, QueryBundle(selection.query))  # type: ignore[union-attr]
        reading = self._reading(selection, crops)
        self.crops.extend(reading.crops)
        with self._llm_deadline():
            return await self.parts.reader.areason(reading.input)
        return None  # the query's deadline cut the reading short

    # -- update and stop ----------------------------------------------------------------------
    def update(self, selection: RoundSelection, feedback: Feedback | None) -> StopReason | None:
        """Apply a round: sanitised labels to beliefs and episodic memory, the round's trace,
        then the stop decision. Pages count as read only when a reader saw them."""
        cfg = self.config
        shown = [r.ref for r in selection.pages]
        dropped = 0
        if feedback is not None:
            self.llm_calls += feedback.llm_calls
            feedback, dropped = sanitize_feedback(
                feedback, shown, self.read, cfg.max_label_changes_per_round
            )
            self.episodic.record(selection.round, selection.query, shown, feedback)
            self.read.update(shown)
            if cfg.use_belief and cfg.bayesian_update:
                self.beliefs.update(
                    useful=feedback.useful_pages,
                    irrelevant=feedback.irrelevant_pages,
                    radius=cfg.propagation_radius if cfg.propagation else 0,
                    gamma=cfg.propagation_gamma,
                    weight=cfg.propagation_weight,
                    same_section=self.schema.same_section if cfg.use_schema else None,
                    cross_section=cfg.cross_section_weight,
                )
                if cfg.propagation:
                    self.levers.after_update(
                        self.beliefs, feedback.useful_pages, self.versions, self.scope
                    )
            self.feedback = feedback
        self.rounds.append(self._round_trace(selection, feedback, dropped))
        status = feedback.status if feedback else "need_more"
        dispatcher.event(
            DocMemoRoundEndEvent(
                round=selection.round,
                pages=[str(r) for r in shown],
                status=status,
                useful=[str(r) for r in (feedback.useful_pages if feedback else [])],
            )
        )
        self.stop = self.stop_reason(selection, feedback)
        return self.stop

    def _explored(self, round_: int) -> bool:
        """Enough of the scope was read to believe a reader that says "not in the documents"."""
        cfg = self.config
        if round_ >= min(cfg.min_rounds_before_unanswerable, cfg.rounds):
            return True
        # every page of the scope read; the store is asked only once the documents seen are
        return len(self.read) >= self.pages_known and len(self.read) >= self.pages_in_scope()

    def _may_count_scope(self, selection: RoundSelection, feedback: Feedback | None) -> bool:
        """Whether :meth:`update` may need the scope's page count (an early "unanswerable"
        after every page of the documents seen was read)."""
        return (
            self._scope_pages is None
            and feedback is not None
            and feedback.status == "unanswerable"
            and len(self.read | {r.ref for r in selection.pages}) >= self.pages_known
        )

    def stop_reason(
        self, selection: RoundSelection, feedback: Feedback | None
    ) -> StopReason | None:
        """The one stop policy: why the loop ends after this round, or None to go on."""
        cfg = self.config
        if not selection.pages:
            return "no_candidates"
        if cfg.static:
            return "static"
        status = feedback.status if feedback else "need_more"
        if status == "answered":
            return "answered"
        if status == "unanswerable" and self._explored(selection.round):
            return "unanswerable"
        if self.out_of_time():
            return "deadline"
        if feedback is None or not self._budget_left():
            return "budget" if self.parts.reader is not None else "max_rounds"
        if cfg.max_pages is not None and len(self.read) >= cfg.max_pages:
            return "budget"
        if selection.round >= cfg.rounds:
            return "max_rounds"
        return None

    # -- run ----------------------------------------------------------------------------------
    def _callbacks(self) -> CallbackManager:
        return self.parts.callback_manager or CallbackManager([])

    def run(self) -> DocMemoResult:
        """All rounds, synchronously (one callback trace: LLM calls inside a round's RETRIEVE
        event must not reset the trace stack under it)."""
        with self._callbacks().as_trace("docmemo"):
            return self._run()

    async def arun(self) -> DocMemoResult:
        """All rounds; the store, the reranker, crops and the reader are awaited."""
        with self._callbacks().as_trace("docmemo"):
            return await self._arun()

    def _run(self) -> DocMemoResult:
        self.start()
        while self.stop is None:
            if self.out_of_time():
                self.stop = "deadline"
                break
            selection = self.select()
            dispatcher.event(DocMemoRoundStartEvent(round=selection.round, query=selection.query))
            feedback = self.read_pages(selection) if selection.pages else None
            self.update(selection, feedback)
        return self.result()

    async def _arun(self) -> DocMemoResult:
        await self.astart()
        while self.stop is None:
            if self.out_of_time():
                self.stop = "deadline"
                break
            selection = await self.aselect()
            dispatcher.event(DocMemoRoundStartEvent(round=selection.round, query=selection.query))
            feedback = await self.aread_pages(selection) if selection.pages else None
            if self._may_count_scope(selection, feedback):  # the stop rule's one store count
                count = await asyncio.to_thread(self.parts.store.count_pages, self.scope)
                self._scope_pages = count
            self.update(selection, feedback)
        return self.result()

    # -- result -------------------------------------------------------------------------------
    def verdict(self) -> tuple[str, str]:
        """(status, answer) from the last feedback and the stop reason."""
        feedback = self.feedback
        if feedback is not None and feedback.status == "answered" and feedback.answer:
            return "answered", feedback.answer
        if self.stop == "unanswerable":
            answer = feedback.answer if feedback and feedback.answer else None
            return "unanswerable", answer or NOT_ANSWERABLE
        reader = self.parts.reader
        evidence, draft = self.episodic.evidence, self.episodic.last_answer
        if reader is not None:
            return "need_more", reader.synthesize(self.question, evidence, draft)
        return "need_more", summarize_evidence(evidence, draft)

    def result(self) -> DocMemoResult:
        """The answer, the evidence nodes and the trace: built here and only here."""
        status, answer = self.verdict()
        useful = set(self.episodic.useful_pages)
        sources = self.evidence_nodes() + [c for c in self.crops if node_ref(c) in useful]
        trace = QueryTrace(
            question=self.question,
            answer=answer,
            status=status,
            stop_reason=self.stop or "max_rounds",
            rounds=self.rounds,
            pages_read=[
                PageRead(doc=r.doc_id, page=r.page, round=self.episodic.round_of(r) or 0)
                for r in self.episodic.pages_read
            ],
            evidence=[
                PageScore(
                    doc=str(n.node.metadata["doc_id"]),
                    page=int(n.node.metadata["page"]),
                    score=n.score or 0.0,
                )
                for n in sources
                if is_page(n)
            ],
            llm_calls=self.llm_calls,
            seconds=time.perf_counter() - self.started,
            reasoner=self.parts.reader.name if self.parts.reader is not None else "",
        )
        return DocMemoResult(answer=answer, status=status, source_nodes=sources, trace=trace)

    def evidence_nodes(self) -> list[NodeWithScore]:
        """Pages judged useful or cited by a note (never a page merely read), scored by
        posterior mean. An unanswered question may have none."""
        cited = [n.page for n in self.episodic.evidence]
        refs = [r for r in dict.fromkeys([*self.episodic.useful_pages, *cited]) if r in self.read]
        records = [self.records[r] for r in refs if r in self.records]
        nodes = [
            PageWithScore(
                node=page_node(rec, image_path=self._rendered(rec)),
                score=float(self.beliefs.mean([rec.ref])[0]) if rec.ref in self.beliefs else 0.5,
            )
            for rec in records
        ]
        return sorted(nodes, key=lambda n: -(n.score or 0.0))

    def _rendered(self, record: PageRecord) -> Path | None:
        cache = self.parts.cache_dir
        if not self.parts.evidence_images or cache is None:
            return None
        if not record.source or not Path(record.source).is_file():
            return None
        from llama_index_docmemo.ingest.pdf import render_page

        path = cache / "pages" / f"{record.doc_version[:16]}-p{record.page}.png"
        if not path.is_file():
            path.parent.mkdir(parents=True, exist_ok=True)
            try:
                render_page(record.source, record.page, 1500).save(path, format="PNG")
            except IngestError as exc:  # a page MuPDF cannot render keeps its text
                logging.getLogger(__name__).warning("no evidence image: %s", exc)
                return None
        return path

    def _round_trace(
        self, selection: RoundSelection, feedback: Feedback | None, dropped: int
    ) -> RoundTrace:
        record = FeedbackRecord.of(feedback, dropped) if feedback is not None else None
        watched = dict.fromkeys(
            [r.ref for r in selection.pages]
            + [PageRef(c.doc, c.page) for c in selection.candidates]
            + self.beliefs.informed_refs()
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
            crops=len(self.crops),
            feedback=record,
            beliefs=self.belief_states(list(watched)),
            llm_calls=feedback.llm_calls if feedback else 0,
            seconds=selection.seconds,
        )

    def belief_states(self, refs: list[PageRef]) -> list[BeliefState]:
        out = []
        for ref in refs:
            if ref in self.beliefs:
                a, b = self.beliefs.get(ref)
                out.append(BeliefState(doc=ref.doc_id, page=ref.page, alpha=a, beta=b))
        return out


def crop_view(node: NodeWithScore) -> CropView:
    """A crop node as the reader sees it (its image loaded on demand)."""
    meta = node.node.metadata
    image_path = meta.get("image_path")

    def load_image() -> Any:
        from PIL import Image

        return Image.open(image_path)

    return CropView(
        page=node_ref(node),
        kind=str(meta.get("kind", "crop")),
        bbox=tuple(meta.get("bbox", (0.0, 0.0, 0.0, 0.0))),  # type: ignore[arg-type]
        text=node.node.get_content(),
        load_image=load_image if image_path else None,
    )
