"""DocMemoLoop: one query's state, its rounds of select -> read -> update, and the stop policy.

Everything that belongs to one query lives on one :class:`DocMemoLoop` object (beliefs,
episodic and schema memory, records seen, LLM calls, the trace) and nowhere else, so concurrent
queries never share state. Each step is written once, as steps (``step_runtime.py``): it yields the
store searches, page reads, renders and LLM requests it needs, and :meth:`DocMemoLoop.run` /
:meth:`DocMemoLoop.arun` perform them with sync or async I/O (blocking work off the event loop).
The engine and the retriever are thin LlamaIndex adapters over it.

State grows with what a query touches, never with the corpus: beliefs exist only for pages
scored or labelled (the prior elsewhere), schemas are fetched only for documents that appear
among the candidates, and records only for pages retrieved or selected.
"""

from __future__ import annotations

import time
from dataclasses import replace
from typing import TYPE_CHECKING, Any

import llama_index.core.instrumentation as instrument
import numpy as np
from llama_index.core.callbacks import CallbackManager
from llama_index.core.schema import NodeWithScore, QueryBundle

from llama_index_docmemo.blocking import cpu_executor
from llama_index_docmemo.errors import DeadlineExceeded, LLMError
from llama_index_docmemo.events import (
    DocMemoRoundEndEvent,
    DocMemoRoundStartEvent,
    LLMCallTally,
    counting_llm_calls,
)
from llama_index_docmemo.expansion import expansion_terms
from llama_index_docmemo.levers.document_stage import (
    DocumentCard,
    card_scores,
    document_scores,
    hit_scores,
)
from llama_index_docmemo.levers.rounds import QuerySearches
from llama_index_docmemo.llms.servers import endpoint
from llama_index_docmemo.llms.wire import describe, is_llm_failure
from llama_index_docmemo.loop.instrumentation import retrieval_events
from llama_index_docmemo.loop.parts import LoopParts, clean_question
from llama_index_docmemo.loop.query_clock import QueryClock
from llama_index_docmemo.loop.reading import (
    reading_input,
    rerank_can_change,
    rerank_stage,
    selected_nodes,
)
from llama_index_docmemo.loop.result import (
    NOT_ANSWERABLE,
    DocMemoResult,
    build_result,
    capped_crops,
    round_trace,
)
from llama_index_docmemo.loop.snapshot import QuerySnapshot, RoundSelection
from llama_index_docmemo.loop.trust import RoundOutcome, stop_reason
from llama_index_docmemo.memory.belief import PageBeliefMemory, normalise_scores
from llama_index_docmemo.memory.documents import DocumentBeliefMemory
from llama_index_docmemo.memory.episodic import EpisodicMemory
from llama_index_docmemo.memory.schema import DocumentSchema, SchemaMemory
from llama_index_docmemo.reasoning.base import summarize_evidence
from llama_index_docmemo.reasoning.replies import sanitize_feedback
from llama_index_docmemo.selection import Selection, candidate_pool, select_pages
from llama_index_docmemo.step_runtime import Call, Steps, arun, either, offload, run
from llama_index_docmemo.store.scope import PageFilter
from llama_index_docmemo.trace import (
    DocumentBelief,
    PageScore,
    RoundTrace,
    StopReason,
)
from llama_index_docmemo.types import Feedback, PageHit, PageRecord, PageRef, QueryEmbedding

if TYPE_CHECKING:
    from llama_index.core.postprocessor.types import BaseNodePostprocessor

dispatcher = instrument.get_dispatcher(__name__)


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
        self.rng = np.random.default_rng(self.config.selection.seed)
        self.versions: dict[str, str] = {}  # doc_id -> version pinned when first seen
        self.retrieval: dict[PageRef, float] = {}  # best normalised retrieval score so far
        self.records: dict[PageRef, PageRecord] = {}
        self.read: set[PageRef] = set()
        self.round = 0
        self.llm_calls = 0
        self.valid_replies = 0  # readings whose reply was the structured reply asked for
        self.pages_known = 0  # pages of the documents among the candidates so far
        self.scope_pages: int | None = None  # counted by the store only when needed
        self.rounds: list[RoundTrace] = []
        self.crops: list[NodeWithScore] = []
        self.feedback: Feedback | None = None
        self.stop: StopReason | None = None
        self.error: str | None = None  # the reader's LLM failure that ended the query
        self.last_scores: dict[PageRef, float] = {}
        self.round_cost = LLMCallTally()  # this round's LLM requests (reranking and reading)
        self.searches = QuerySearches()  # the depth and question-only searches of all rounds
        self.documents: DocumentBeliefMemory | None = None  # set once candidates span documents
        self.cards: dict[str, DocumentCard] = {}  # the cards of the documents seen
        self.card_match: dict[str, float] = {}  # the question's match with each card
        self.scope_hits: dict[str, list[PageHit]] = {}  # the whole scope's search, by query
        self.doc_hits: dict[tuple[str, str, bool], list[PageHit]] = {}  # a document's search
        self.doc_searches: dict[str, QuerySearches] = {}  # each document's depth and statements
        self.allotted: dict[str, int] = {}  # this round's pages per document
        self.started = time.perf_counter()
        self.clock = QueryClock(parts.config.budget.max_seconds, parts.calls)

    # -- run ----------------------------------------------------------------------------------
    def run(self) -> DocMemoResult:
        """All rounds with sync I/O."""
        return run(self.steps())

    async def arun(self) -> DocMemoResult:
        """All rounds with async I/O; blocking work (renders, the embedded store, the
        encoder) runs off the event loop, GIL-holding work on the engine's CPU executor."""
        with cpu_executor(self.parts.cpu):
            return await arun(self.steps())

    def steps(self) -> Steps[DocMemoResult]:
        """The whole query, read top to bottom: rounds until the stop policy says why to end,
        then the result (one callback trace: LLM calls inside a round's RETRIEVE event must
        not reset the trace stack under it)."""
        with self.callbacks().as_trace("docmemo"):
            while self.stop is None:
                if self.clock.passed():
                    self.stop = "deadline"
                    self.error = self.error or (
                        f"the query's deadline of {self.config.budget.max_seconds:g} s "
                        f"(max_seconds) passed after {self.round} rounds"
                    )
                    break
                selection = yield from self.select()
                dispatcher.event(
                    DocMemoRoundStartEvent(round=selection.round, query=selection.query)
                )
                feedback = (yield from self.read_pages(selection)) if selection.pages else None
                if self._may_count_scope(selection, feedback):  # the stop rule's one count
                    store = self.parts.store
                    self.scope_pages = yield either(
                        store.count_pages, store.acount_pages, self.scope
                    )
                yield from self.update(selection, feedback)
            status, answer = self.verdict()
            return (yield from build_result(self.snapshot(), status, answer))

    def callbacks(self) -> CallbackManager:
        return self.parts.callback_manager or CallbackManager([])

    def snapshot(self) -> QuerySnapshot:
        """This query's state now, for the reading and result code (which never see the loop)."""
        parts = self.parts
        return QuerySnapshot(
            question=self.question,
            config=self.config,
            schema=self.schema,
            beliefs=self.beliefs,
            episodic=self.episodic,
            records=dict(self.records),
            read=frozenset(self.read),
            crops=tuple(self.crops),
            last_scores=dict(self.last_scores),
            llm_calls=self.llm_calls,
            pages_known=self.pages_known,
            reader=parts.reader,
            cache_dir=parts.cache_dir,
            evidence_images=parts.evidence_images,
            reserved_llm_calls=parts.reserved_llm_calls,
            stop=self.stop,
            error=self.error,
            rounds=tuple(self.rounds),
            seconds=time.perf_counter() - self.started,
        )

    # -- select -------------------------------------------------------------------------------
    def round_query(self) -> str:
        """Round 1 asks the question; later rounds the reader's refined query (episodic
        memory), expanded with distinctive terms of the pages judged useful (relevance feedback)."""
        query = self.question
        if self.round >= 1 and self.config.loop.use_episodic:
            refined = self.episodic.refined_query
            if refined and refined.strip():
                query = refined.strip()
        terms = self.config.selection.relevance_feedback
        if terms <= 0:
            return query
        useful = [self.records[r].text for r in self.episodic.useful_pages if r in self.records]
        extra = expansion_terms(query, useful, [rec.text for rec in self.records.values()], terms)
        return f"{query} {' '.join(extra)}" if extra else query

    def select(self) -> Steps[RoundSelection]:
        """Search this round's candidates and choose the pages to read (across documents by
        their beliefs, once the candidates span more than one)."""
        started = time.perf_counter()
        query = self.round_query()
        self.round_cost = LLMCallTally()
        with retrieval_events(self.callbacks(), query, enabled=self.parts.round_events) as ended:
            embedding = yield offload(self.parts.encoder.encode_query, query)
            hits: list[PageHit] = []
            if self.documents is not None or (self.round == 0 and self._documents_possible()):
                hits = yield from self._document_stage(query, embedding)
            if self.documents is None:
                hits = yield from self.parts.levers.candidates(
                    self.round + 1, self.question, embedding, self.scope, self.searches
                )
                if hits:
                    yield from self._load_schemas(hits)
                hits = self._pinned(hits)
            if self.round == 0 and self._beliefs_on():
                docs = self._prior_documents(hits)
                yield from self.parts.levers.question_prior(
                    self.beliefs,
                    self.question,
                    {d: self.schema.n_pages(d) for d in docs},
                    self.versions,
                    self.scope,
                )
            scores, k, lam = self._score(hits)
            if self.documents is not None:
                yield from self._document_candidates(query, embedding, k)
            chosen = self._choose(k, lam)
            if self.parts.reranker is not None and self._may_rerank(chosen, k):
                try:
                    stage = self._reranked(self.parts.reranker, query, chosen, k)
                    chosen = yield from self.clock.bound(stage)
                except DeadlineExceeded:  # the round keeps its own order; reading stops it
                    self.clock.cut = True
            yield from self.fetch_records(chosen[:k])
            selection = self._selection(query, lam, hits, scores, chosen[:k], started)
            ended(selected_nodes(self.snapshot(), selection))
        return selection

    def _may_rerank(self, chosen: list[PageRef], k: int) -> bool:
        """Reranking can change the pages read, and the call budget holds its call besides
        the reading's (charged before it is made; a reranking never takes a reading's call)."""
        needed = 1 + (self.parts.reader is not None)
        left = self._calls_left()
        return rerank_can_change(chosen, k) and (left is None or left >= needed)

    def _load_schemas(self, hits: list[PageHit]) -> Steps[list[DocumentSchema]]:
        """Schemas of the hits' documents not seen before (their versions pinned); returns
        those schemas."""
        store = self.parts.store
        new = self._new_documents(hits)
        if not new.doc_ids:
            return []
        schemas = yield either(store.list_documents, store.alist_documents, new)
        self._add_schemas(schemas)
        return schemas

    # -- documents ----------------------------------------------------------------------------
    def _documents_possible(self) -> bool:
        """Document beliefs may run: switched on, beliefs on, and the scope not one document."""
        ids = self.scope.doc_ids
        return (
            self.config.documents.document_beliefs
            and self._beliefs_on()
            and (ids is None or len(ids) > 1)
        )

    def _document_stage(self, query: str, embedding: QueryEmbedding) -> Steps[list[PageHit]]:
        """The round's search over the whole scope (``document_search_pages`` deep, once a
        query text), its new documents' schemas and stored cards, their priors; returns the page
        candidates (``candidates`` best). On round 1 it decides whether the candidates span
        documents: with one, the loop stays the per-document one and this returns nothing."""
        wide = self.scope_hits.get(query)
        if wide is None:
            settings = self.config.documents
            depth = self.searches.depth
            if depth is None:
                depth = self.searches.depth = yield from self.parts.levers.depth(self.scope)
            limit = max(self.config.selection.candidates, settings.document_search_pages)
            found = yield from self.parts.levers.search(embedding, self.scope, depth, limit)
            if found:
                yield from self._load_cards(found)
            wide = self.scope_hits[query] = self._pinned(found)
            if self.documents is None:
                if len({h.record.doc_id for h in wide}) < 2:
                    return []
                self.documents = DocumentBeliefMemory(
                    settings.document_prior_strength, settings.document_irrelevant_weight
                )
            pages = hit_scores(wide)
            self.documents.add(document_scores(pages, self.card_match, settings.card_weight))
        return wide[: self.config.selection.candidates]

    def _load_cards(self, hits: list[PageHit]) -> Steps[None]:
        """The schemas and cards of the hits' documents not seen before, read together in one
        request (the card is of the version pinned), then the question's card match of every
        document seen so far (a word's weight depends on how many cards carry it, so all are
        scored again when documents are added)."""
        store = self.parts.store
        new = self._new_documents(hits)
        if not new.doc_ids:
            return
        stored = yield either(store.list_cards, store.alist_cards, new)
        self._add_schemas([s.schema for s in stored])
        self.cards.update((s.schema.doc_id, s.card) for s in stored)
        self.card_match = card_scores(self.question, self.cards.values())

    def _document_candidates(self, query: str, embedding: QueryEmbedding, k: int) -> Steps[None]:
        """Allot the round's ``k`` pages across documents by their beliefs, then search each
        allotted document for its own candidates (once a query text and document): the
        levers' searches run inside it, never over the whole scope."""
        assert self.documents is not None
        open_pages = {
            d: self.schema.n_pages(d) - sum(1 for r in self.read if r.doc_id == d)
            for d in self.documents.documents
        }
        self.allotted = self.documents.allot(
            k,
            self.rng,
            self.config.selection.sampling,
            max_documents=self.config.documents.documents_per_round,
            share=self.config.documents.document_share,
            open_pages=open_pages,
        )
        levers = self.config.levers
        fused = levers.searching and self.round >= levers.statement_first_round
        for doc_id in self.allotted:
            key = (query, doc_id, fused)  # the levers' searches join from a later round
            if key in self.doc_hits:
                continue
            scope = replace(self.scope, doc_ids=(doc_id,))
            searches = self.doc_searches.setdefault(doc_id, QuerySearches())
            found = yield from self.parts.levers.candidates(
                self.round, self.question, embedding, scope, searches
            )
            hits = self.doc_hits[key] = self._pinned(found)
            for hit, score in zip(hits, normalise_scores([h.score for h in hits]), strict=True):
                self.records.setdefault(hit.ref, hit.record)
                self.retrieval[hit.ref] = max(self.retrieval.get(hit.ref, 0.0), float(score))

    def _prior_documents(self, hits: list[PageHit]) -> list[str]:
        """The documents the question's named pages are looked for in: the candidates', or
        with document beliefs the best-believed ones."""
        if self.documents is None:
            return sorted({h.ref.doc_id for h in hits})
        ranked = sorted(self.documents.documents, key=lambda d: -self.documents.mean(d))
        return sorted(ranked[: self.config.documents.documents_per_round])

    def _reranked(
        self, reranker: BaseNodePostprocessor, query: str, chosen: list[PageRef], k: int
    ) -> Steps[list[PageRef]]:
        """The chosen pages' records fetched, then the rerank stage over them."""
        yield from self.fetch_records(chosen)
        state = self.snapshot()
        return (
            yield from rerank_stage(
                state, reranker, query, chosen, k, self.callbacks(), self.round_cost
            )
        )

    def _beliefs_on(self) -> bool:
        return self.config.loop.use_belief and not self.config.loop.static

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

    def _pinned(self, hits: list[PageHit]) -> list[PageHit]:
        """The hits of each document's pinned version, best first (ties by document, page)."""
        return sorted(
            (h for h in hits if self.versions.get(h.record.doc_id) == h.record.doc_version),
            key=lambda h: (-h.score, h.record.doc_id, h.record.page),
        )

    def _score(self, hits: list[PageHit]) -> tuple[np.ndarray, int, float]:
        """A new round: the hits' normalised scores kept as retrieval scores; returns them,
        the round's page budget ``k`` and lambda."""
        self.round += 1
        scores = normalise_scores([h.score for h in hits])
        for hit, score in zip(hits, scores, strict=True):
            self.records[hit.ref] = hit.record
            self.retrieval[hit.ref] = max(self.retrieval.get(hit.ref, 0.0), float(score))
        lam = self.config.selection.lambda_at(self.round) if self._beliefs_on() else 0.0
        return scores, self._round_budget(), lam

    def _choose(self, k: int, lam: float) -> list[PageRef]:
        """The selection step (no I/O): score = (1 - lambda) c + lambda theta over the pool
        (candidates of every round so far plus pages the beliefs know about, minus pages read),
        within each allotted document when documents have beliefs.

        Returns the pages chosen (wider than ``k`` when a reranker will reorder them).
        """
        loop = self.config.loop
        reread = set(self.episodic.useful_pages) if loop.reread_useful else set()
        beliefs = self.beliefs if self._beliefs_on() else None
        pool = candidate_pool(self.retrieval, beliefs, self.read, reread)
        if self.documents is None:
            chosen = self._select(pool, k, lam)
        else:
            parts = [
                self._select([r for r in pool if r.doc_id == doc_id], n, lam)
                for doc_id, n in self.allotted.items()
            ]
            chosen = Selection(
                [r for part in parts for r in part.pages],
                [s for part in parts for s in part.scores],
                len(pool),
            )
        self.last_scores = dict(zip(chosen.pages, chosen.scores, strict=True))
        return chosen.pages

    def _select(self, pool: list[PageRef], k: int, lam: float) -> Selection:
        width = k if self.parts.reranker is None else max(2 * k, k + 5)
        return select_pages(
            pool,
            self.retrieval,
            self.beliefs if self._beliefs_on() else None,
            k=width,
            lam=lam,
            rng=self.rng,
            sampling=self.config.selection.sampling,
        )

    def _round_budget(self) -> int:
        """Pages this round reads (``pages_schedule`` / ``pages_per_round``), within
        ``max_pages`` in all."""
        k = self.config.loop.pages_at(self.round)
        cap = self.config.budget.max_pages
        return k if cap is None else max(0, min(k, cap - len(self.read)))

    def fetch_records(self, refs: list[PageRef]) -> Steps[None]:
        """Records of pages known only from beliefs (propagation), pinned versions only."""
        missing = [r for r in refs if r not in self.records]
        if not missing:
            return
        store = self.parts.store
        for record in (yield either(store.get_pages, store.aget_pages, missing, self.scope)):
            if self.versions.get(record.doc_id) == record.doc_version:
                self.records[record.ref] = record

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
            scores=[self.last_scores.get(r.ref, 0.0) for r in records],
            seconds=time.perf_counter() - started,
        )

    # -- read ---------------------------------------------------------------------------------
    def read_pages(self, selection: RoundSelection) -> Steps[Feedback | None]:
        """One reading of the selected pages (with crops of their tables and figures); None
        when there is no reader or the budget or the deadline is spent."""
        reader = self.parts.reader
        left = self._calls_left()
        if reader is None or (left is not None and left < 1) or self.clock.passed():
            return None
        crops = yield from self._crops(selection)
        if crops is None:  # the deadline passed while the pages were analysed
            self.clock.cut = True
            return None
        self.crops.extend(crops)
        # this round's reranking is charged already, and a reading told it is the last one
        state = replace(self.snapshot(), llm_calls=self._calls_made())
        reading = reading_input(state, selection, crops)
        try:
            with counting_llm_calls(self.round_cost):
                feedback = yield from self.clock.bound(reader.read(reading))
        except DeadlineExceeded as error:
            self._out_of_time(error)
            return None
        except Exception as error:  # noqa: BLE001 - an LLM class's own errors, sorted below
            if not is_llm_failure(error):
                raise  # a fault of the code, never taken for the LLM's
            if self.clock.passed():
                self._out_of_time(error)  # the request's own deadline, set to the query's
            else:
                self._llm_failed(error)
            return None
        self._check_reply(feedback, reading.final_round)
        return feedback

    def _crops(self, selection: RoundSelection) -> Steps[list[NodeWithScore] | None]:
        """Crops of the selected pages' tables and figures, under the query's clock (layout
        analysis of a page of many drawings takes seconds: it is cut at the deadline, and
        runs off the event loop); None when the deadline cut it."""
        cropper = self.parts.crops
        if cropper is None or not self.config.loop.adaptive_granularity:
            return []
        call = either(
            cropper.postprocess_nodes,
            cropper.apostprocess_nodes,
            selected_nodes(self.snapshot(), selection),
            QueryBundle(selection.query),
        )
        try:
            found = yield from self.clock.bound(_one(call))
        except DeadlineExceeded:
            return None
        return capped_crops(found, self.crops, self.config.loop.max_table_crops)

    def _check_reply(self, feedback: Feedback, final: bool) -> None:
        """A reply that was not the structured reply asked for brings no labels and the query
        goes on; when the last reading comes and no reply of this query was valid, the query
        ends with the LLM's failure (never as a plain "not found")."""
        if feedback.problem is None:
            self.valid_replies += 1
        elif final and not self.valid_replies:
            self._llm_failed(LLMError(f"no reply of this query was usable: {feedback.problem}"))

    def _where(self) -> str:
        """The reader's LLM as an error names it (model and URL)."""
        llm = getattr(self.parts.reader, "llm", None)
        return endpoint(llm) if llm is not None else type(self.parts.reader).__name__

    def _out_of_time(self, error: Exception) -> None:
        """The query's deadline cut the reader's request: the error says so, naming the LLM
        (stop "llm_error" when it never answered this query, else "deadline")."""
        self.clock.cut = True
        limit = self.config.budget.max_seconds
        within = "its deadline" if limit is None else f"the query's deadline of {limit:g} s"
        self.error = f"{self._where()}: no answer within {within} (max_seconds): {describe(error)}"

    def _llm_failed(self, error: Exception) -> None:
        """The reader's LLM failed: with pages read, the query ends keeping what was found
        (stop "llm_error", the error in the trace); with none, there is nothing to keep."""
        message = f"{self._where()}: {error if isinstance(error, LLMError) else describe(error)}"
        if not self.read:
            raise LLMError(
                f"the reader's LLM failed before any page was read: {message}; check that the "
                "server is up and reachable at that URL, the model name, and the API key"
            ) from error
        self.error = message  # the stop policy ends the query on it ("llm_error")

    def _calls_made(self) -> int:
        """LLM calls of this query so far, this round's (before its update) included."""
        return self.llm_calls + self.round_cost.calls

    def _calls_left(self) -> int | None:
        """Calls ``max_llm_calls`` still allows in this round (None: no cap), those kept for a
        final answer set aside."""
        cap = self.config.budget.max_llm_calls
        return None if cap is None else cap - self.parts.reserved_llm_calls - self._calls_made()

    def _budget_left(self) -> bool:
        cap = self.config.budget.max_llm_calls
        return cap is None or self.llm_calls < cap - self.parts.reserved_llm_calls

    # -- update and stop ----------------------------------------------------------------------
    def update(self, selection: RoundSelection, feedback: Feedback | None) -> Steps[None]:
        """Apply a round: sanitised labels to beliefs and episodic memory (and along the
        reference graphs), the round's trace, then the stop decision. Pages count as read only
        when a reader saw them."""
        loop, sel = self.config.loop, self.config.selection
        shown = [r.ref for r in selection.pages]
        dropped = 0
        self.llm_calls += self.round_cost.calls
        if feedback is not None:
            feedback, dropped = sanitize_feedback(
                feedback, shown, self.read, loop.max_label_changes_per_round
            )
            self.episodic.record(selection.round, selection.query, shown, feedback)
            self.read.update(shown)
            if loop.use_belief and loop.bayesian_update:
                self.beliefs.update(
                    useful=feedback.useful_pages,
                    irrelevant=feedback.irrelevant_pages,
                    radius=sel.propagation_radius if sel.propagation else 0,
                    gamma=sel.propagation_gamma,
                    weight=sel.propagation_weight,
                    same_section=self.schema.same_section if loop.use_schema else None,
                    cross_section=sel.cross_section_weight,
                )
                if self.documents is not None:
                    self.documents.update(feedback.useful_pages, feedback.irrelevant_pages)
                if sel.propagation:
                    yield from self.parts.levers.after_update(
                        self.beliefs, feedback.useful_pages, self.versions, self.scope
                    )
            self.feedback = feedback
        trace = round_trace(
            selection,
            feedback,
            dropped,
            self.beliefs,
            len(self.crops),
            self.round_cost,
            self._document_trace(),
        )
        self.rounds.append(trace)
        dispatcher.event(
            DocMemoRoundEndEvent(
                round=selection.round,
                pages=[str(r) for r in shown],
                status=feedback.status if feedback else "need_more",
                useful=[str(r) for r in (feedback.useful_pages if feedback else [])],
            )
        )
        self.stop = stop_reason(self.outcome(selection, feedback), loop, self.config.budget)

    def _document_trace(self) -> list[DocumentBelief]:
        """The document beliefs after a round, best-believed first, with the round's pages."""
        if self.documents is None:
            return []
        state = self.documents.as_dict()
        ranked = sorted(state, key=lambda d: (-self.documents.mean(d), d))
        return [
            DocumentBelief(
                doc=d, alpha=state[d][0], beta=state[d][1], pages=self.allotted.get(d, 0)
            )
            for d in ranked
        ]

    def _explored(self, round_: int) -> bool:
        """Enough of the scope was read to believe a reader that says "not in the documents"."""
        loop = self.config.loop
        if round_ >= min(loop.min_rounds_before_unanswerable, loop.rounds):
            return True
        # every page of the scope read (counted by the store once the documents seen are)
        return (
            self.scope_pages is not None
            and len(self.read) >= self.pages_known
            and len(self.read) >= self.scope_pages
        )

    def _may_count_scope(self, selection: RoundSelection, feedback: Feedback | None) -> bool:
        """Whether the stop rule may need the scope's page count (an early "unanswerable"
        after every page of the documents seen was read)."""
        return (
            self.scope_pages is None
            and feedback is not None
            and feedback.status == "unanswerable"
            and len(self.read | {r.ref for r in selection.pages}) >= self.pages_known
        )

    def outcome(self, selection: RoundSelection, feedback: Feedback | None) -> RoundOutcome:
        """What the stop policy sees of this round (``loop/trust.py``)."""
        return RoundOutcome(
            round=selection.round,
            shown=len(selection.pages),
            status=feedback.status if feedback is not None else None,
            useful_so_far=len(self.episodic.useful_pages),
            pages_read=len(self.read),
            explored=self._explored(selection.round),
            out_of_time=self.clock.passed(),
            calls_left=self._budget_left(),
            # a deadline after the LLM answered ends as "deadline" (the error still says why)
            llm_failed=self.error is not None and not (self.clock.cut and self.read),
            has_reader=self.parts.reader is not None,
        )

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


def _one(call: Call) -> Steps[Any]:
    """A single call as steps (what :meth:`QueryClock.bound` takes)."""
    return (yield call)
