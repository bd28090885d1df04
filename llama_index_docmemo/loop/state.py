"""A query's state as a value, and the pure rules that advance it.

:class:`QueryState` is everything one question has gathered (its memories, the pages seen and
read, the calls spent, the rounds' traces, why it stopped). It is frozen: the rules below never
change a state, they return the next one, so each rule is tested by building a state and
calling it, with no store, reader or runtime. A round (``query.py``) is the I/O between them::

    state, choice = choose(state, hits, config)        # which pages this round reads
    state, reading = apply(state, reading, config)     # what the reader's labels teach
    state = close_round(state, reading, config, ...)   # the round's trace, and whether to stop

The selection rule (score = (1 - lambda) c + lambda theta over the pool of candidates and
believed pages), the document layer's rules over a collection (issue 41) and the stop policy (:func:`stop_reason`, shared with the evaluation's ranking
baselines) live here too. No I/O, no model calls.
"""

from __future__ import annotations

import copy
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field, replace
from typing import TYPE_CHECKING

import numpy as np

from llama_index_docmemo.errors import QuestionError
from llama_index_docmemo.expansion import expansion_terms
from llama_index_docmemo.levers.document_stage import (
    card_lead,
    card_scores,
    document_scores,
    hit_scores,
)
from llama_index_docmemo.memory.belief import (
    PageBeliefMemory,
    Sampling,
    normalise_scores,
    selection_scores,
)
from llama_index_docmemo.memory.documents import DocumentBeliefMemory
from llama_index_docmemo.memory.episodic import EpisodicMemory
from llama_index_docmemo.memory.schema import SchemaMemory
from llama_index_docmemo.readers.base import sanitize_feedback
from llama_index_docmemo.store.scope import PageFilter
from llama_index_docmemo.trace import DocumentBelief, PageScore

if TYPE_CHECKING:
    from llama_index.core.schema import NodeWithScore

    from llama_index_docmemo.config import BudgetSettings, DocMemoConfig, LoopSettings
    from llama_index_docmemo.events import LLMCallTally
    from llama_index_docmemo.levers.document_stage import DocumentCard
    from llama_index_docmemo.memory.schema import DocumentSchema
    from llama_index_docmemo.trace import RoundTrace, StopReason
    from llama_index_docmemo.types import Feedback, PageHit, PageRecord, PageRef

NOT_ANSWERABLE = "Not answerable: the pages read do not contain this information."


def clean_question(question: str, config: DocMemoConfig) -> str:
    """The question as the loop uses it: refused when empty, refused or cut when too long."""
    text = question.strip() if isinstance(question, str) else ""
    if not text:
        raise QuestionError("the question is empty: ask something to search the documents for")
    limit = config.budget.max_question_chars
    if len(text) > limit:
        if config.budget.question_overflow == "error":
            raise QuestionError(
                f"the question has {len(text)} characters, more than max_question_chars={limit}; "
                "shorten it, or set question_overflow='truncate' to cut it"
            )
        text = text[:limit].rstrip()
    return text


# -- the state ---------------------------------------------------------------------------------
@dataclass(frozen=True)
class DocumentState:
    """The document layer's state, once a query's candidates span documents.

    Args:
        beliefs: a Beta belief per candidate document that it holds the evidence.
        cards: the cards of the documents seen (what each is known by).
        card_match: the question's match with each card.
        allotted: this round's pages per document.
    """

    beliefs: DocumentBeliefMemory
    cards: Mapping[str, DocumentCard] = field(default_factory=dict)
    card_match: Mapping[str, float] = field(default_factory=dict)
    allotted: Mapping[str, int] = field(default_factory=dict)


@dataclass(frozen=True)
class QueryState:
    """One question's state between two rules (never shared between queries).

    State grows with what a query touches, never with the corpus: beliefs exist only for pages
    scored or labelled (the prior elsewhere), schemas only for documents among the candidates,
    records only for pages retrieved or selected. The memories are objects with methods of
    their own; a rule that changes one works on a copy.

    Args:
        question / scope: the question as the loop accepts it; the caller's scope.
        schema / beliefs / episodic: the Document Schema, Page Belief and Episodic memories.
        rng: the selection's random stream (Thompson draws; the seed is ``config.selection.seed``).
        versions: each document's version, pinned when it was first seen.
        retrieval: each candidate page's best normalised retrieval score so far.
        records: the records of the pages seen (pinned versions only).
        read: pages a reader has seen.
        round: rounds begun.
        llm_calls / valid_replies: LLM calls of the finished rounds; readings whose reply was
            the structured reply asked for.
        pages_known / scope_pages: pages of the documents among the candidates so far; of the
            whole scope (counted by the store only when the stop rule needs it).
        rounds / crops: the finished rounds' traces; the crops shown so far.
        feedback: the last reading's feedback (sanitised).
        stop / error: why the query ended (None: it goes on); the reader's LLM failure.
        last_scores: the selection scores of the round's chosen pages.
        documents: the document layer (None while the candidates come from one document).
    """

    question: str
    scope: PageFilter
    schema: SchemaMemory
    beliefs: PageBeliefMemory
    episodic: EpisodicMemory
    rng: np.random.Generator
    versions: Mapping[str, str] = field(default_factory=dict)
    retrieval: Mapping[PageRef, float] = field(default_factory=dict)
    records: Mapping[PageRef, PageRecord] = field(default_factory=dict)
    read: frozenset[PageRef] = frozenset()
    round: int = 0
    llm_calls: int = 0
    valid_replies: int = 0
    pages_known: int = 0
    scope_pages: int | None = None
    rounds: tuple[RoundTrace, ...] = ()
    crops: tuple[NodeWithScore, ...] = ()
    feedback: Feedback | None = None
    stop: StopReason | None = None
    error: str | None = None
    last_scores: Mapping[PageRef, float] = field(default_factory=dict)
    documents: DocumentState | None = None


def start(question: str, scope: PageFilter | None, config: DocMemoConfig) -> QueryState:
    """A question's first state: the question checked (:func:`clean_question`), empty memories."""
    text = clean_question(question, config)
    return QueryState(
        question=text,
        scope=scope or PageFilter(),
        schema=SchemaMemory(),
        beliefs=PageBeliefMemory(),
        episodic=EpisodicMemory(text),
        rng=np.random.default_rng(config.selection.seed),
    )


def beliefs_on(config: DocMemoConfig) -> bool:
    """Page beliefs steer the selection (off for the static ranking and its ablation)."""
    return config.loop.use_belief and not config.loop.static


# -- what a round searches for -----------------------------------------------------------------
def round_query(state: QueryState, config: DocMemoConfig) -> str:
    """Round 1 asks the question; later rounds the reader's refined query (episodic memory),
    expanded with distinctive terms of the pages judged useful (relevance feedback)."""
    query = state.question
    if state.round >= 1 and config.loop.use_episodic:
        refined = state.episodic.refined_query
        if refined and refined.strip():
            query = refined.strip()
    terms = config.selection.relevance_feedback
    if terms <= 0:
        return query
    records = state.records
    useful = [records[r].text for r in state.episodic.useful_pages if r in records]
    extra = expansion_terms(query, useful, [rec.text for rec in records.values()], terms)
    return f"{query} {' '.join(extra)}" if extra else query


def documents_possible(state: QueryState, config: DocMemoConfig) -> bool:
    """Document beliefs may run: switched on, page beliefs on, and the scope not one document."""
    ids = state.scope.doc_ids
    return (
        config.documents.document_beliefs and beliefs_on(config) and (ids is None or len(ids) > 1)
    )


def new_documents(state: QueryState, hits: Sequence[PageHit]) -> PageFilter:
    """The scope narrowed to the hits' documents whose schema is not loaded yet.

    ``where`` conditions are left out: they name page payload keys a document record may not
    have, and the hits already passed them."""
    new = sorted({h.record.doc_id for h in hits} - set(state.versions))
    scope = state.scope
    return PageFilter(doc_ids=tuple(new), tenant=scope.tenant, acl_groups=scope.acl_groups)


def with_schemas(state: QueryState, schemas: Sequence[DocumentSchema]) -> QueryState:
    """Each new document's version pinned and its pages made known to the beliefs."""
    versions = dict(state.versions)
    schema, beliefs = state.schema.copy(), state.beliefs.copy()
    known = state.pages_known
    for found in schemas:
        if found.doc_id not in versions:
            versions[found.doc_id] = found.doc_version
            schema.add(found)
            beliefs.add_document(found.doc_id, found.n_pages)
            known += found.n_pages
    return replace(state, versions=versions, schema=schema, beliefs=beliefs, pages_known=known)


def pinned(state: QueryState, hits: Sequence[PageHit]) -> list[PageHit]:
    """The hits of each document's pinned version, best first (ties by document, page): a query
    never mixes two versions of a document, whatever is re-indexed while it runs."""
    versions = state.versions
    return sorted(
        (h for h in hits if versions.get(h.record.doc_id) == h.record.doc_version),
        key=lambda h: (-h.score, h.record.doc_id, h.record.page),
    )


def with_records(state: QueryState, records: Sequence[PageRecord]) -> QueryState:
    """Records fetched for pages known only from beliefs, pinned versions only."""
    kept = {r.ref: r for r in records if state.versions.get(r.doc_id) == r.doc_version}
    return replace(state, records={**state.records, **kept}) if kept else state


# -- the document layer ------------------------------------------------------------------------
# Over a collection a question first has to find its document: round 1's search over the scope
# scores each candidate document by its best page and its card (``levers/document_stage.py``),
# the prior of its Beta belief; each round the beliefs allot the round's pages (``allot``) and
# the page selection runs inside each allotted document; the reader's labels move the document
# beliefs (``apply``). With one document in scope none of it runs.
def begin(wide: Sequence[PageHit], config: DocMemoConfig) -> DocumentState | None:
    """The document layer for a query whose scope-wide hits span documents (None: one)."""
    if len({h.record.doc_id for h in wide}) < 2:
        return None
    settings = config.documents
    memory = DocumentBeliefMemory(
        settings.document_prior_strength,
        settings.document_irrelevant_weight,
        settings.document_miss_weight,
    )
    return DocumentState(beliefs=memory)


def with_cards(
    documents: DocumentState, cards: dict[str, DocumentCard], question: str
) -> DocumentState:
    """New cards kept, and the question's card match of every document seen so far (a word's
    weight depends on how many cards carry it, so all are scored again when documents are
    added)."""
    kept = {**documents.cards, **cards}
    return replace(documents, cards=kept, card_match=card_scores(question, kept.values()))


def names_documents(card_match: Mapping[str, float], config: DocMemoConfig) -> bool:
    """Whether the question's card match puts one or two documents (``documents_per_round``)
    at least ``card_lead`` ahead of the rest: only then are documents chosen (by the beliefs,
    or by ``two-stage``)."""
    settings = config.documents
    return card_lead(card_match, settings.documents_per_round) >= settings.card_lead


def with_priors(
    documents: DocumentState, wide: Sequence[PageHit], config: DocMemoConfig
) -> DocumentState:
    """Documents seen for the first time get their prior from their best page and their card
    (a document already held keeps its belief)."""
    memory = documents.beliefs.copy()
    weight = config.documents.card_weight
    memory.add(document_scores(hit_scores(wide), documents.card_match, weight))
    return replace(documents, beliefs=memory)


def allot(state: QueryState, config: DocMemoConfig) -> QueryState:
    """The next round's pages allotted across documents by their beliefs (a draw from the
    query's random stream), each within its unread pages."""
    documents = state.documents
    assert documents is not None
    memory = documents.beliefs
    open_pages = {
        d: state.schema.n_pages(d) - sum(1 for r in state.read if r.doc_id == d)
        for d in memory.documents
    }
    rng = copy.deepcopy(state.rng)  # the state's own stream stays where it was
    allotted = memory.allot(
        pages_for(state, config),
        rng,
        config.selection.sampling,
        max_documents=config.documents.documents_per_round,
        share=config.documents.document_share,
        open_pages=open_pages,
    )
    return replace(state, rng=rng, documents=replace(documents, allotted=allotted))


def prior_documents(state: QueryState, hits: Sequence[PageHit], config: DocMemoConfig) -> list[str]:
    """The documents the question's named pages are looked for in: the candidates', or with
    document beliefs the best-believed ones."""
    documents = state.documents
    if documents is None:
        return sorted({h.ref.doc_id for h in hits})
    memory = documents.beliefs
    ranked = sorted(memory.documents, key=lambda d: -memory.mean(d))
    return sorted(ranked[: config.documents.documents_per_round])


def document_trace(state: QueryState) -> list[DocumentBelief]:
    """The document beliefs after a round, best-believed first, with the round's pages."""
    documents = state.documents
    if documents is None:
        return []
    memory = documents.beliefs
    beliefs = memory.as_dict()
    ranked = sorted(beliefs, key=lambda d: (-memory.mean(d), d))
    return [
        DocumentBelief(
            doc_id=d, alpha=beliefs[d][0], beta=beliefs[d][1], pages=documents.allotted.get(d, 0)
        )
        for d in ranked
    ]


# -- choose ------------------------------------------------------------------------------------
@dataclass(frozen=True)
class Selection:
    """The pages chosen this round, best first, with the scores that ranked them."""

    pages: list[PageRef]
    scores: list[float]
    pool: int


def candidate_pool(
    retrieval: Mapping[PageRef, float],
    beliefs: PageBeliefMemory | None,
    read: frozenset[PageRef] | set[PageRef],
    reread: set[PageRef],
) -> list[PageRef]:
    """Pages eligible this round: retrieved candidates plus pages the beliefs know about,
    minus pages already read (except those in ``reread``). Deterministic order."""
    pool: dict[PageRef, None] = dict.fromkeys(retrieval)
    if beliefs is not None:
        for ref in beliefs.informed_refs():
            pool.setdefault(ref, None)
    return [r for r in pool if r not in read or r in reread]


def select_pages(
    pool: Sequence[PageRef],
    retrieval: Mapping[PageRef, float],
    beliefs: PageBeliefMemory | None,
    *,
    k: int,
    lam: float,
    rng: np.random.Generator,
    sampling: Sampling,
) -> Selection:
    """Top-k of score = (1 - lam) * c + lam * theta over ``pool`` (``rng`` draws theta).

    Without beliefs (or with lam = 0) this is the static retrieval ranking. Ties keep the
    pool order (retrieval order), so a fixed seed always gives the same selection.
    """
    if not pool:
        return Selection([], [], 0)
    c = np.array([retrieval.get(ref, 0.0) for ref in pool], dtype=np.float64)
    if beliefs is None or lam == 0.0:
        scores = c
    else:
        scores = selection_scores(c, beliefs.draw(list(pool), rng, sampling), lam)
    order = np.argsort(-scores, kind="stable")[:k]
    return Selection([pool[i] for i in order], [float(scores[i]) for i in order], len(pool))


def pages_for(state: QueryState, config: DocMemoConfig) -> int:
    """Pages the next round reads (``pages_schedule`` / ``pages_per_round``), within
    ``max_pages`` in all."""
    k = config.loop.pages_at(state.round + 1)
    cap = config.budget.max_pages
    return k if cap is None else max(0, min(k, cap - len(state.read)))


@dataclass(frozen=True)
class Choice:
    """What :func:`choose` decided for a round.

    Args:
        pages: the pages chosen, best first (wider than ``k`` when a reranker reorders them).
        k: the pages the round reads.
        lam: the round's lambda.
        candidates: the round's search hits with their normalised scores (for the trace).
    """

    pages: list[PageRef]
    k: int
    lam: float
    candidates: list[PageScore]


def choose(
    state: QueryState,
    hits: Sequence[PageHit],
    config: DocMemoConfig,
    *,
    within: Sequence[Sequence[PageHit]] = (),
    rerank: bool = False,
) -> tuple[QueryState, Choice]:
    """A new round: its ``hits`` (pinned, best first) kept as candidates with their normalised
    scores, then score = (1 - lambda) c + lambda theta over the pool (candidates of every round
    so far plus pages the beliefs know about, minus pages read).

    Over several documents the selection runs inside each document the round allotted pages
    to (``state.documents.allotted``), ``within`` holding each one's own search
    (:mod:`.documents`). With ``rerank``, a wider list is chosen for the reranker to reorder.
    """
    round_ = state.round + 1
    records, retrieval = dict(state.records), dict(state.retrieval)
    scores = normalise_scores([h.score for h in hits])
    for hit, score in zip(hits, scores, strict=True):
        records[hit.ref] = hit.record
        retrieval[hit.ref] = max(retrieval.get(hit.ref, 0.0), float(score))
    for found in within:
        for hit, score in zip(found, normalise_scores([h.score for h in found]), strict=True):
            records.setdefault(hit.ref, hit.record)
            retrieval[hit.ref] = max(retrieval.get(hit.ref, 0.0), float(score))
    k = pages_for(state, config)
    lam = config.selection.lambda_at(round_) if beliefs_on(config) else 0.0
    reread = set(state.episodic.useful_pages) if config.loop.reread_useful else set()
    beliefs = state.beliefs if beliefs_on(config) else None
    pool = candidate_pool(retrieval, beliefs, state.read, reread)
    rng = copy.deepcopy(state.rng)  # the state's stream stays where it was

    def select(refs: list[PageRef], n: int) -> Selection:
        width = max(2 * n, n + 5) if rerank else n
        sampling = config.selection.sampling
        return select_pages(refs, retrieval, beliefs, k=width, lam=lam, rng=rng, sampling=sampling)

    if state.documents is None:
        chosen = select(pool, k)
    else:
        allotted = state.documents.allotted
        parts = [select([r for r in pool if r.doc_id == d], n) for d, n in allotted.items()]
        chosen = Selection(
            [r for part in parts for r in part.pages],
            [s for part in parts for s in part.scores],
            len(pool),
        )
    candidates = [
        PageScore(doc_id=h.record.doc_id, page=h.record.page, score=float(s))
        for h, s in zip(hits, scores, strict=True)
    ]
    state = replace(
        state,
        round=round_,
        records=records,
        retrieval=retrieval,
        rng=rng,
        last_scores=dict(zip(chosen.pages, chosen.scores, strict=True)),
    )
    return state, Choice(chosen.pages, k, lam, candidates)


@dataclass(frozen=True)
class RoundSelection:
    """What one round retrieved and chose to read."""

    round: int
    query: str
    lam: float
    candidates: list[PageScore]
    pages: list[PageRecord]
    scores: list[float]
    seconds: float


def round_selection(
    state: QueryState, query: str, choice: Choice, chosen: Sequence[PageRef], seconds: float
) -> RoundSelection:
    """The round's selection as the reader, the trace and the retriever see it: the records of
    ``chosen`` (the reranker's order, when there is one) with their selection scores."""
    records = [state.records[r] for r in chosen if r in state.records]
    return RoundSelection(
        round=state.round,
        query=query,
        lam=choice.lam,
        candidates=choice.candidates,
        pages=records,
        scores=[state.last_scores.get(r.ref, 0.0) for r in records],
        seconds=seconds,
    )


# -- apply -------------------------------------------------------------------------------------
@dataclass(frozen=True)
class Reading:
    """What a round's reading brought back.

    Args:
        selection: the pages shown.
        feedback: the reader's feedback (None: nothing was read: no reader, no budget, no time).
        cost: the round's LLM requests (reranking and reading).
        dropped: labels and notes :func:`apply` dropped (feedback naming pages never shown).
    """

    selection: RoundSelection
    feedback: Feedback | None
    cost: LLMCallTally
    dropped: int = 0


def apply(state: QueryState, reading: Reading, config: DocMemoConfig) -> tuple[QueryState, Reading]:
    """A round's reading applied: its LLM calls counted; the sanitised labels into episodic
    memory and the page beliefs (and to neighbouring pages of the same document and section),
    and to the document beliefs over a collection.
    Pages count as read only when a reader saw them. Returns the state and the reading as
    applied (its feedback sanitised, with what was dropped)."""
    state = replace(state, llm_calls=state.llm_calls + reading.cost.calls)
    feedback = reading.feedback
    if feedback is None:
        return state, reading
    loop, sel = config.loop, config.selection
    shown = [r.ref for r in reading.selection.pages]
    feedback, dropped = sanitize_feedback(
        feedback, shown, state.read, loop.max_label_changes_per_round
    )
    episodic = state.episodic.copy()
    episodic.record(reading.selection.round, reading.selection.query, shown, feedback)
    beliefs, documents = state.beliefs, state.documents
    if loop.use_belief and loop.bayesian_update:
        beliefs = beliefs.copy()
        beliefs.update(
            useful=feedback.useful_pages,
            irrelevant=feedback.irrelevant_pages,
            radius=sel.propagation_radius if sel.propagation else 0,
            gamma=sel.propagation_gamma,
            weight=sel.propagation_weight,
            same_section=state.schema.same_section if loop.use_schema else None,
            cross_section=sel.cross_section_weight,
        )
        if documents is not None:  # a useful page raises its document, an irrelevant one less
            moved = documents.beliefs.copy()
            moved.update(feedback.useful_pages, feedback.irrelevant_pages, documents.card_match)
            documents = replace(documents, beliefs=moved)
    state = replace(
        state,
        documents=documents,
        episodic=episodic,
        read=state.read | frozenset(shown),
        beliefs=beliefs,
        feedback=feedback,
    )
    return state, replace(reading, feedback=feedback, dropped=dropped)


def spreads_labels(reading: Reading, config: DocMemoConfig) -> bool:
    """Whether the round's useful labels also spread along the reference graphs (an I/O step
    of the levers after :func:`apply`)."""
    loop = config.loop
    return (
        reading.feedback is not None
        and loop.use_belief
        and loop.bayesian_update
        and config.selection.propagation
    )


def calls_left(
    state: QueryState, config: DocMemoConfig, reserved: int, round_calls: int
) -> int | None:
    """Calls ``max_llm_calls`` still allows in this round (None: no cap), those ``reserved``
    for a final answer set aside and the round's ``round_calls`` spent."""
    cap = config.budget.max_llm_calls
    return None if cap is None else cap - reserved - state.llm_calls - round_calls


def needs_scope_count(state: QueryState, reading: Reading) -> bool:
    """Whether the stop rule may need the scope's page count (an early "unanswerable" after
    every page of the documents seen was read)."""
    feedback = reading.feedback
    shown = {r.ref for r in reading.selection.pages}
    return (
        state.scope_pages is None
        and feedback is not None
        and feedback.status == "unanswerable"
        and len(state.read | shown) >= state.pages_known
    )


# -- stop --------------------------------------------------------------------------------------
def trusts_answer(status: str, *, useful_so_far: int, needs_evidence: bool) -> bool:
    """Whether a round's ``status`` ends the reading as "answered".

    With ``needs_evidence`` an answer counts only once some page read was labelled useful: a
    reader that says "answered" from pages it judged irrelevant is guessing, and the next round
    costs less than a wrong answer.

    Args:
        status: the reader's status after the round.
        useful_so_far: pages labelled useful in this and earlier rounds.
        needs_evidence: the ``answer_needs_evidence`` setting.
    """
    return status == "answered" and (useful_so_far > 0 or not needs_evidence)


def gives_up(*, pages_read: int, useful_so_far: int, after_pages: int | None) -> bool:
    """Whether the reading ends with nothing found: ``after_pages`` pages read, none useful.

    A document that showed the reader that many of its best-ranked pages without one worth
    keeping rarely holds the evidence further down, and every later round is paid in full
    (measured in docs/evaluation.md: it also loses the questions found late).

    Args:
        pages_read: distinct pages read so far.
        useful_so_far: pages labelled useful in this and earlier rounds.
        after_pages: the ``give_up_after_pages`` setting (None: never give up).
    """
    return after_pages is not None and useful_so_far == 0 and pages_read >= after_pages


@dataclass(frozen=True)
class RoundOutcome:
    """What the stop policy sees after a round.

    Args:
        round: the round just done (1-based).
        shown: pages selected for it (0: no candidates left).
        status: the reader's status (None: nothing was read: no reader, no budget, no time).
        useful_so_far: pages labelled useful in this and earlier rounds.
        pages_read: distinct pages read so far.
        explored: enough of the scope was read to believe "not in the documents".
        out_of_time: ``max_seconds`` has passed or cut work in flight.
        calls_left: ``max_llm_calls`` leaves room for another reading.
        llm_failed: the reader's LLM failed after pages were read.
        has_reader: a reader reads the pages (False: selection only, the retriever).
    """

    round: int
    shown: int
    status: str | None
    useful_so_far: int
    pages_read: int
    explored: bool = False
    out_of_time: bool = False
    calls_left: bool = True
    llm_failed: bool = False
    has_reader: bool = True


def stop_reason(
    outcome: RoundOutcome, loop: LoopSettings, budget: BudgetSettings
) -> StopReason | None:
    """The one stop policy: why the loop ends after this round, or None to go on. Checked in
    this order, so a round that both answers and spends the budget reports "answered"."""
    if outcome.llm_failed:
        return "llm_error"
    if not outcome.shown:
        return "no_candidates"
    if loop.static:
        return "static"
    status = outcome.status or "need_more"
    useful = outcome.useful_so_far
    if trusts_answer(status, useful_so_far=useful, needs_evidence=loop.answer_needs_evidence):
        return "answered"
    if status == "unanswerable" and outcome.explored:
        return "unanswerable"
    if outcome.out_of_time:
        return "deadline"
    if outcome.status is None or not outcome.calls_left:
        return "budget" if outcome.has_reader else "max_rounds"
    if budget.max_pages is not None and outcome.pages_read >= budget.max_pages:
        return "budget"
    if gives_up(
        pages_read=outcome.pages_read, useful_so_far=useful, after_pages=loop.give_up_after_pages
    ):
        return "no_evidence"
    if outcome.round >= loop.rounds:
        return "max_rounds"
    return None


def explored(state: QueryState, round_: int, config: DocMemoConfig) -> bool:
    """Enough of the scope was read to believe a reader that says "not in the documents"."""
    loop = config.loop
    if round_ >= min(loop.min_rounds_before_unanswerable, loop.rounds):
        return True
    # every page of the scope read (counted by the store once the documents seen are)
    read = len(state.read)
    return state.scope_pages is not None and read >= state.pages_known and read >= state.scope_pages


@dataclass(frozen=True)
class Clock:
    """What the stop policy needs of the query's clock and engine after a round.

    Args:
        out_of_time: the deadline has passed, or cut work in flight.
        cut: a deadline cut work in flight (an LLM error after pages were read is then the
            deadline's doing).
        has_reader: a reader reads the pages.
        reserved: calls of ``max_llm_calls`` kept for a final answer.
    """

    out_of_time: bool
    cut: bool
    has_reader: bool
    reserved: int


def close_round(
    state: QueryState, reading: Reading, trace: RoundTrace, config: DocMemoConfig, clock: Clock
) -> QueryState:
    """The round's ``trace`` kept, and the stop policy's decision (None: another round)."""
    selection, feedback = reading.selection, reading.feedback
    state = replace(state, rounds=(*state.rounds, trace))
    cap = config.budget.max_llm_calls
    outcome = RoundOutcome(
        round=selection.round,
        shown=len(selection.pages),
        status=feedback.status if feedback is not None else None,
        useful_so_far=len(state.episodic.useful_pages),
        pages_read=len(state.read),
        explored=explored(state, selection.round, config),
        out_of_time=clock.out_of_time,
        calls_left=cap is None or state.llm_calls < cap - clock.reserved,
        # a deadline after the LLM answered ends as "deadline" (the error still says why)
        llm_failed=state.error is not None and not (clock.cut and state.read),
        has_reader=clock.has_reader,
    )
    return replace(state, stop=stop_reason(outcome, config.loop, config.budget))


def verdict(state: QueryState) -> tuple[str, str | None]:
    """(status, answer) from the last feedback and the stop reason; the answer is None when
    the reader must write one from the evidence (``need_more``)."""
    feedback = state.feedback
    if feedback is not None and feedback.status == "answered" and feedback.answer:
        return "answered", feedback.answer
    if state.stop == "unanswerable":
        answer = feedback.answer if feedback and feedback.answer else None
        return "unanswerable", answer or NOT_ANSWERABLE
    return "need_more", None
