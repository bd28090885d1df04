"""A query's rounds: the I/O between the pure rules of ``state.py``, read top to bottom.

:func:`query_steps` is the whole query: a fresh :class:`~.state.QueryState`, then rounds until
the stop policy says why to end, then the result. A round (:func:`one_round`) searches
(``select``), reads (``read_pages``) and applies the reading; every decision is a pure function
of the state (``choose``, ``apply``, ``close_round``, the document layer's),
so this module holds only the I/O (the document stage's searches and reads too) and the query's
deadline (:class:`QueryClock`).

Each step is written once, as steps (``step_runtime.py``): it yields the store searches, page
reads, renders and LLM requests it needs, and :func:`run_query` / :func:`arun_query` perform
them with sync or async I/O (blocking work off the event loop). Everything a query needs comes
from one :class:`~.runner.DocMemoRunner`; nothing of a query outlives it.
"""

from __future__ import annotations

import time
from collections.abc import Sequence
from dataclasses import dataclass, field, replace
from typing import TYPE_CHECKING, Any, TypeVar

import llama_index.core.instrumentation as instrument
from llama_index.core.schema import NodeWithScore, QueryBundle

from llama_index_docmemo.errors import DeadlineExceeded, LLMError
from llama_index_docmemo.events import (
    DocMemoRoundEndEvent,
    DocMemoRoundStartEvent,
    LLMCallTally,
    counting_llm_calls,
    retrieval_events,
)
from llama_index_docmemo.levers.rounds import QuerySearches
from llama_index_docmemo.llms.servers import endpoint
from llama_index_docmemo.llms.wire import deadline_scope, describe, is_llm_failure
from llama_index_docmemo.loop.reading import (
    capped_crops,
    reading_input,
    rerank_can_change,
    rerank_stage,
    selected_nodes,
)
from llama_index_docmemo.loop.result import DocMemoResult, build_result, round_trace
from llama_index_docmemo.loop.state import (
    Choice,
    Clock,
    QueryState,
    Reading,
    RoundSelection,
    allot,
    apply,
    begin,
    beliefs_on,
    calls_left,
    choose,
    close_round,
    document_trace,
    documents_possible,
    names_documents,
    needs_scope_count,
    new_documents,
    pinned,
    prior_documents,
    round_query,
    round_selection,
    spreads_labels,
    start,
    verdict,
    with_cards,
    with_priors,
    with_records,
    with_schemas,
)
from llama_index_docmemo.readers.base import summarize_evidence
from llama_index_docmemo.step_runtime import (
    Call,
    Steps,
    arun,
    cpu_executor,
    either,
    offload,
    run,
    within,
)

if TYPE_CHECKING:
    from concurrent.futures import Executor

    from llama_index_docmemo.levers.document_stage import DocumentCard
    from llama_index_docmemo.loop.runner import DocMemoRunner
    from llama_index_docmemo.memory.schema import DocumentSchema
    from llama_index_docmemo.store.scope import PageFilter
    from llama_index_docmemo.types import Feedback, PageHit, PageRef, QueryEmbedding

dispatcher = instrument.get_dispatcher(__name__)
T = TypeVar("T")
_clock = time.perf_counter  # the deadline's clock (tests substitute a fake one)


# -- the query's deadline ----------------------------------------------------------------------
class QueryClock:
    """The query's ``max_seconds``, read by the stop policy and applied to each slow step.

    Args:
        limit: the query's ``max_seconds`` (None: unbounded).
        calls: the bounded pool the sync driver runs calls on, so it can stop waiting at the
            deadline (None: inline, checked between calls).
    """

    def __init__(self, limit: float | None, calls: Executor | None) -> None:
        self.limit = limit
        self.calls = calls
        self.cut = False  # a deadline cut work in flight
        self._start = _clock()

    def bound(self, steps: Steps[T]) -> Steps[T]:
        """``steps`` cut at the deadline, whatever the LLM class: cancelled (async) or abandoned
        on the bounded pool (sync), raising :class:`~llama_index_docmemo.errors.DeadlineExceeded`;
        requests of ``OpenAICompatible`` also carry the deadline."""
        if self.limit is None:
            return (yield from steps)
        left = max(self.limit - (_clock() - self._start), 0.0)
        with deadline_scope(left):
            return (yield within(time.monotonic() + left, steps, self.calls))

    def passed(self) -> bool:
        """The deadline has passed, or cut work in flight."""
        return self.cut or (self.limit is not None and _clock() - self._start >= self.limit)


@dataclass
class DocumentSearches:
    """The searches one query's document layer made, kept so that a query text is searched
    once over the scope and once in each document (I/O results, not state: searching again
    would find the same)."""

    scope_hits: dict[str, list[PageHit]] = field(default_factory=dict)  # by query text
    doc_hits: dict[tuple[str, str, bool], list[PageHit]] = field(default_factory=dict)
    doc_searches: dict[str, QuerySearches] = field(default_factory=dict)  # per document


@dataclass
class QueryIO:
    """What one query's I/O keeps besides its state: its deadline and the searches made (a
    query text is searched once; searching again would find the same)."""

    clock: QueryClock
    searches: QuerySearches = field(default_factory=QuerySearches)  # depth, statements
    documents: DocumentSearches = field(default_factory=DocumentSearches)
    started: float = field(default_factory=time.perf_counter)

    @classmethod
    def of(cls, runner: DocMemoRunner) -> QueryIO:
        return cls(QueryClock(runner.config.budget.max_seconds, runner.calls))


# -- entry points ------------------------------------------------------------------------------
def run_query(runner: DocMemoRunner, question: str, scope: PageFilter | None) -> DocMemoResult:
    """One question, every round, with sync I/O."""
    return run(query_steps(runner, question, scope))


async def arun_query(
    runner: DocMemoRunner, question: str, scope: PageFilter | None
) -> DocMemoResult:
    """One question with async I/O; blocking work (renders, the embedded store, the encoder)
    runs off the event loop, GIL-holding work on the runner's CPU executor."""
    with cpu_executor(runner.cpu):
        return await arun(query_steps(runner, question, scope))


def query_steps(
    runner: DocMemoRunner, question: str, scope: PageFilter | None
) -> Steps[DocMemoResult]:
    """The whole query: rounds, then the result (one callback trace: LLM calls inside a
    round's RETRIEVE event must not reset the trace stack under it)."""
    state = start(question, scope, runner.config)
    io = QueryIO.of(runner)
    with runner.callbacks().as_trace("docmemo"):
        state = yield from rounds(runner, state, io)
        return (yield from answer(runner, state, io))


def first_round(
    runner: DocMemoRunner, question: str, scope: PageFilter | None
) -> Steps[list[NodeWithScore]]:
    """Round 1's selection as scored page nodes (what a retriever returns); nothing is read."""
    state, selection = yield from select(runner, start(question, scope, runner.config))
    return selected_nodes(state, runner.config, selection)


def rounds(runner: DocMemoRunner, state: QueryState, io: QueryIO) -> Steps[QueryState]:
    """Rounds until the stop policy (or the deadline, checked before each) says why to end;
    returns the final state."""
    while state.stop is None:
        if io.clock.passed():
            limit = runner.config.budget.max_seconds
            error = state.error or (
                f"the query's deadline of {limit:g} s (max_seconds) passed after "
                f"{state.round} rounds"
            )
            return replace(state, stop="deadline", error=error)
        state = yield from one_round(runner, state, io)
    return state


def one_round(runner: DocMemoRunner, state: QueryState, io: QueryIO) -> Steps[QueryState]:
    """One round: choose the pages, read them, apply what the reader said, decide to stop."""
    config, store = runner.config, runner.store
    cost = LLMCallTally()  # this round's LLM requests (reranking and reading)
    state, selection = yield from select(runner, state, io, cost)
    dispatcher.event(DocMemoRoundStartEvent(round=selection.round, query=selection.query))
    feedback = None
    if selection.pages:
        state, feedback = yield from read_pages(runner, state, io, selection, cost)
    reading = Reading(selection, feedback, cost)
    if needs_scope_count(state, reading):  # the stop rule's one count
        pages = yield either(store.count_pages, store.acount_pages, state.scope)
        state = replace(state, scope_pages=pages)
    state, reading = apply(state, reading, config)
    if spreads_labels(reading, config):  # along the documents' reference graphs
        assert reading.feedback is not None
        beliefs = state.beliefs.copy()
        useful = reading.feedback.useful_pages
        versions = dict(state.versions)
        yield from runner.levers.after_update(beliefs, useful, versions, state.scope)
        state = replace(state, beliefs=beliefs)
    trace = round_trace(
        selection,
        reading.feedback,
        reading.dropped,
        state.beliefs,
        len(state.crops),
        cost,
        document_trace(state),
    )
    shown = [str(r.ref) for r in selection.pages]
    applied = reading.feedback
    dispatcher.event(
        DocMemoRoundEndEvent(
            round=selection.round,
            pages=shown,
            status=applied.status if applied else "need_more",
            useful=[str(r) for r in (applied.useful_pages if applied else [])],
        )
    )
    clock = Clock(
        out_of_time=io.clock.passed(),
        cut=io.clock.cut,
        has_reader=runner.reader is not None,
        reserved=runner.reserved_llm_calls,
    )
    return close_round(state, reading, trace, config, clock)


# -- the document stage ----------------------------------------------------------------------
def load_schemas(
    runner: DocMemoRunner, state: QueryState, hits: Sequence[PageHit]
) -> Steps[tuple[QueryState, list[DocumentSchema]]]:
    """Schemas of the hits' documents not seen before, their versions pinned; returns the
    state and those schemas."""
    store = runner.store
    new = new_documents(state, hits)
    if not new.doc_ids:
        return state, []
    schemas = yield either(store.list_documents, store.alist_documents, new)
    return with_schemas(state, schemas), schemas


def load_cards(
    runner: DocMemoRunner, state: QueryState, hits: Sequence[PageHit]
) -> Steps[tuple[QueryState, dict[str, DocumentCard]]]:
    """The schemas and stored cards of the hits' documents not seen before, read together in
    one request (the card is the pinned version's); returns the state and the new cards."""
    store = runner.store
    new = new_documents(state, hits)
    if not new.doc_ids:
        return state, {}
    stored = yield either(store.list_cards, store.alist_cards, new)
    state = with_schemas(state, [s.schema for s in stored])
    return state, {s.schema.doc_id: s.card for s in stored}


def document_stage(
    runner: DocMemoRunner,
    state: QueryState,
    searches: QuerySearches,
    memo: DocumentSearches,
    query: str,
    embedding: QueryEmbedding,
) -> Steps[tuple[QueryState, list[PageHit]]]:
    """The round's search over the whole scope (``document_search_pages`` deep, once a query
    text), its new documents' schemas and stored cards, their priors; returns the state and the page
    candidates (``candidates`` best). On round 1 it decides whether the candidates span
    documents: with one, ``state.documents`` stays None and this returns no candidates."""
    config = runner.config
    wide = memo.scope_hits.get(query)
    if wide is None:
        settings = config.documents
        depth = searches.depth
        if depth is None:
            depth = searches.depth = yield from runner.levers.depth(state.scope)
        limit = max(config.selection.candidates, settings.document_search_pages)
        found = yield from runner.levers.search(embedding, state.scope, depth, limit)
        cards: dict[str, DocumentCard] = {}
        if found:
            state, cards = yield from load_cards(runner, state, found)
        wide = memo.scope_hits[query] = pinned(state, found)
        documents = state.documents
        starting = documents is None
        if documents is None:
            documents = begin(wide, config)
            if documents is None:
                return state, []
        if cards:
            documents = with_cards(documents, cards, state.question)
        if starting and not names_documents(documents.card_match, config):
            return state, []  # the question names no document apart: pages over the scope
        state = replace(state, documents=with_priors(documents, wide, config))
    return state, wide[: config.selection.candidates]


def document_candidates(
    runner: DocMemoRunner,
    state: QueryState,
    memo: DocumentSearches,
    query: str,
    embedding: QueryEmbedding,
) -> Steps[list[list[PageHit]]]:
    """Each allotted document searched for its own candidates (once a query text and
    document): the levers' searches run inside it, never over the whole scope. Returns the
    new searches' pinned hits, in the allotted order."""
    assert state.documents is not None
    levers = runner.config.levers
    round_ = state.round + 1
    fused = levers.searching and round_ >= levers.statement_first_round
    within: list[list[PageHit]] = []
    for doc_id in state.documents.allotted:
        key = (query, doc_id, fused)  # the levers' searches join from a later round
        if key in memo.doc_hits:
            continue
        scope = replace(state.scope, doc_ids=(doc_id,))
        searches = memo.doc_searches.setdefault(doc_id, QuerySearches())
        found = yield from runner.levers.candidates(
            round_, state.question, embedding, scope, searches
        )
        memo.doc_hits[key] = hits = pinned(state, found)
        within.append(hits)
    return within


# -- select ------------------------------------------------------------------------------------
def select(
    runner: DocMemoRunner,
    state: QueryState,
    io: QueryIO | None = None,
    cost: LLMCallTally | None = None,
) -> Steps[tuple[QueryState, RoundSelection]]:
    """Search this round's candidates and choose the pages to read (across documents by
    their beliefs, once the candidates span more than one)."""
    config = runner.config
    io = io or QueryIO.of(runner)
    cost = cost or LLMCallTally()
    started = time.perf_counter()
    query = round_query(state, config)
    with retrieval_events(runner.callbacks(), query, enabled=runner.round_events) as ended:
        embedding = yield offload(runner.encoder.encode_query, query)
        hits: list[PageHit] = []
        if state.documents is not None or (state.round == 0 and documents_possible(state, config)):
            state, hits = yield from document_stage(
                runner, state, io.searches, io.documents, query, embedding
            )
        if state.documents is None:
            hits = yield from runner.levers.candidates(
                state.round + 1, state.question, embedding, state.scope, io.searches
            )
            if hits:
                state, _ = yield from load_schemas(runner, state, hits)
            hits = pinned(state, hits)
        if state.round == 0 and beliefs_on(config):
            state = yield from question_prior(runner, state, hits)
        within: list[list[PageHit]] = []
        if state.documents is not None:
            state = allot(state, config)
            within = yield from document_candidates(runner, state, io.documents, query, embedding)
        reranker = runner.reranker
        state, choice = choose(state, hits, config, within=within, rerank=reranker is not None)
        chosen = choice.pages
        if reranker is not None and may_rerank(runner, state, choice, cost):
            try:
                stage = reranked(runner, state, query, choice, cost)
                state, chosen = yield from io.clock.bound(stage)
            except DeadlineExceeded:  # the round keeps its own order; reading stops it
                io.clock.cut = True
        state = yield from fetch_records(runner, state, chosen[: choice.k])
        seconds = time.perf_counter() - started
        selection = round_selection(state, query, choice, chosen[: choice.k], seconds)
        ended(selected_nodes(state, config, selection))
    return state, selection


def question_prior(
    runner: DocMemoRunner, state: QueryState, hits: list[PageHit]
) -> Steps[QueryState]:
    """The pages the question names ("page 25", "Figure 9") raised in the documents it is
    looked for in (the levers read the reference graphs they need)."""
    docs = prior_documents(state, hits, runner.config)
    beliefs = state.beliefs.copy()
    yield from runner.levers.question_prior(
        beliefs,
        state.question,
        {d: state.schema.n_pages(d) for d in docs},
        dict(state.versions),
        state.scope,
    )
    return replace(state, beliefs=beliefs)


def may_rerank(
    runner: DocMemoRunner, state: QueryState, choice: Choice, cost: LLMCallTally
) -> bool:
    """Reranking can change the pages read, and the call budget holds its call besides
    the reading's (charged before it is made; a reranking never takes a reading's call)."""
    needed = 1 + (runner.reader is not None)
    left = calls_left(state, runner.config, runner.reserved_llm_calls, cost.calls)
    return rerank_can_change(choice.pages, choice.k) and (left is None or left >= needed)


def reranked(
    runner: DocMemoRunner, state: QueryState, query: str, choice: Choice, cost: LLMCallTally
) -> Steps[tuple[QueryState, list[PageRef]]]:
    """The chosen pages' records fetched, then the rerank stage over them."""
    assert runner.reranker is not None
    state = yield from fetch_records(runner, state, choice.pages)
    picked = yield from rerank_stage(
        state,
        runner.config,
        runner.reranker,
        query,
        choice.pages,
        choice.k,
        runner.callbacks(),
        cost,
    )
    return state, picked


def fetch_records(
    runner: DocMemoRunner, state: QueryState, refs: list[PageRef]
) -> Steps[QueryState]:
    """Records of pages known only from beliefs (propagation), pinned versions only."""
    missing = [r for r in refs if r not in state.records]
    if not missing:
        return state
    store = runner.store
    return with_records(
        state, (yield either(store.get_pages, store.aget_pages, missing, state.scope))
    )


# -- read --------------------------------------------------------------------------------------
def read_pages(
    runner: DocMemoRunner,
    state: QueryState,
    io: QueryIO,
    selection: RoundSelection,
    cost: LLMCallTally,
) -> Steps[tuple[QueryState, Feedback | None]]:
    """One reading of the selected pages (with crops of their tables and figures); no
    feedback when there is no reader or the budget or the deadline is spent."""
    reader = runner.reader
    left = calls_left(state, runner.config, runner.reserved_llm_calls, cost.calls)
    if reader is None or (left is not None and left < 1) or io.clock.passed():
        return state, None
    crops = yield from crops_of(runner, state, io, selection)
    if crops is None:  # the deadline passed while the pages were analysed
        io.clock.cut = True
        return state, None
    state = replace(state, crops=(*state.crops, *crops))
    # this round's reranking is charged already, and a reading told it is the last one
    reading = reading_input(state, runner, selection, crops, state.llm_calls + cost.calls)
    try:
        with counting_llm_calls(cost):
            feedback = yield from io.clock.bound(reader.read_steps(reading))
    except DeadlineExceeded as error:
        return out_of_time(runner, state, io, error), None
    except Exception as error:  # noqa: BLE001 - an LLM class's own errors, sorted below
        if not is_llm_failure(error):
            raise  # a fault of the code, never taken for the LLM's
        if io.clock.passed():  # the request's own deadline, set to the query's
            return out_of_time(runner, state, io, error), None
        return llm_failed(runner, state, error), None
    return checked_reply(runner, state, feedback, reading.final_round), feedback


def crops_of(
    runner: DocMemoRunner, state: QueryState, io: QueryIO, selection: RoundSelection
) -> Steps[list[NodeWithScore] | None]:
    """Crops of the selected pages' tables and figures, under the query's clock (layout
    analysis of a page of many drawings takes seconds: it is cut at the deadline, and
    runs off the event loop); None when the deadline cut it."""
    cropper, config = runner.crops, runner.config
    if cropper is None or not config.loop.adaptive_granularity:
        return []
    call = either(
        cropper.postprocess_nodes,
        cropper.apostprocess_nodes,
        selected_nodes(state, config, selection),
        QueryBundle(selection.query),
    )
    try:
        found = yield from io.clock.bound(_one(call))
    except DeadlineExceeded:
        return None
    return capped_crops(found, state.crops, config.loop.max_table_crops)


def checked_reply(
    runner: DocMemoRunner, state: QueryState, feedback: Feedback, final: bool
) -> QueryState:
    """A reply that was not the structured reply asked for brings no labels and the query
    goes on; when the last reading comes and no reply of this query was valid, the query
    ends with the LLM's failure (never as a plain "not found")."""
    if feedback.problem is None:
        return replace(state, valid_replies=state.valid_replies + 1)
    if final and not state.valid_replies:
        error = LLMError(f"no reply of this query was usable: {feedback.problem}")
        return llm_failed(runner, state, error)
    return state


def _where(runner: DocMemoRunner) -> str:
    """The reader's LLM as an error names it (model and URL)."""
    llm = getattr(runner.reader, "llm", None)
    return endpoint(llm) if llm is not None else type(runner.reader).__name__


def out_of_time(
    runner: DocMemoRunner, state: QueryState, io: QueryIO, error: Exception
) -> QueryState:
    """The query's deadline cut the reader's request: the error says so, naming the LLM
    (stop "llm_error" when it never answered this query, else "deadline")."""
    io.clock.cut = True
    limit = runner.config.budget.max_seconds
    within_ = "its deadline" if limit is None else f"the query's deadline of {limit:g} s"
    message = f"{_where(runner)}: no answer within {within_} (max_seconds): {describe(error)}"
    return replace(state, error=message)


def llm_failed(runner: DocMemoRunner, state: QueryState, error: Exception) -> QueryState:
    """The reader's LLM failed: with pages read, the query ends keeping what was found
    (stop "llm_error", the error in the trace); with none, there is nothing to keep."""
    message = f"{_where(runner)}: {error if isinstance(error, LLMError) else describe(error)}"
    if not state.read:
        raise LLMError(
            f"the reader's LLM failed before any page was read: {message}; check that the "
            "server is up and reachable at that URL, the model name, and the API key"
        ) from error
    return replace(state, error=message)  # the stop policy ends the query on it ("llm_error")


# -- result ------------------------------------------------------------------------------------
def answer(runner: DocMemoRunner, state: QueryState, io: QueryIO) -> Steps[DocMemoResult]:
    """The verdict (the reader writes an answer from the evidence when the rounds found none),
    then the result."""
    status, text = verdict(state)
    if text is None:
        evidence, draft = state.episodic.evidence, state.episodic.last_answer
        reader = runner.reader
        if reader is not None:
            text = reader.synthesize(state.question, evidence, draft)
        else:
            text = summarize_evidence(evidence, draft)
    seconds = time.perf_counter() - io.started
    return (yield from build_result(state, runner, status, text, seconds))


def _one(call: Call) -> Steps[Any]:
    """A single call as steps (what :meth:`QueryClock.bound` takes)."""
    return (yield call)
