"""A query's documents: their schemas as the candidates reveal them, and over a collection the
document layer (issue 41), apart from the page rounds.

A question asked of a whole collection first has to find its document. Round 1's search over
the scope also feeds the *document stage* (:func:`document_stage`): each candidate document is
scored by its best page and its card (:mod:`llama_index_docmemo.levers.document_stage`), the
prior of a Beta belief per document (:class:`~.state.DocumentState`). Each round the beliefs
allot the round's pages (:func:`allot`) and each allotted document is searched on its own
(:func:`document_candidates`); the page selection then runs inside each
(:func:`~.state.choose`), and the reader's labels move the document beliefs
(:func:`~.state.apply`). With one document in scope none of it runs.

The rules here are pure functions of the state; the steps (:func:`load_schemas`,
:func:`document_stage`, :func:`load_cards`, :func:`document_candidates`) yield their store I/O
(``step_runtime.py``) and return the next state.
"""

from __future__ import annotations

import copy
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field, replace
from typing import TYPE_CHECKING

from llama_index_docmemo.levers.document_stage import (
    card_lead,
    card_scores,
    document_scores,
    hit_scores,
)
from llama_index_docmemo.levers.rounds import QuerySearches
from llama_index_docmemo.loop.state import (
    DocumentState,
    QueryState,
    new_documents,
    pages_for,
    pinned,
    with_schemas,
)
from llama_index_docmemo.memory.documents import DocumentBeliefMemory
from llama_index_docmemo.step_runtime import Steps, either
from llama_index_docmemo.trace import DocumentBelief

if TYPE_CHECKING:
    from llama_index_docmemo.config import DocMemoConfig
    from llama_index_docmemo.levers.document_stage import DocumentCard
    from llama_index_docmemo.loop.runner import DocMemoRunner
    from llama_index_docmemo.memory.schema import DocumentSchema
    from llama_index_docmemo.types import PageHit, QueryEmbedding


@dataclass
class DocumentSearches:
    """The searches one query's document layer made, kept so that a query text is searched
    once over the scope and once in each document (I/O results, not state: searching again
    would find the same)."""

    scope_hits: dict[str, list[PageHit]] = field(default_factory=dict)  # by query text
    doc_hits: dict[tuple[str, str, bool], list[PageHit]] = field(default_factory=dict)
    doc_searches: dict[str, QuerySearches] = field(default_factory=dict)  # per document


# -- rules -------------------------------------------------------------------------------------
def begin(wide: Sequence[PageHit], config: DocMemoConfig) -> DocumentState | None:
    """The document layer for a query whose scope-wide hits span documents (None: one)."""
    if len({h.record.doc_id for h in wide}) < 2:
        return None
    settings = config.documents
    memory = DocumentBeliefMemory(
        settings.document_prior_strength, settings.document_irrelevant_weight
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


# -- steps -------------------------------------------------------------------------------------
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
