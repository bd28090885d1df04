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

The rules here are pure functions of the state, with no I/O; the steps that search and read
for them (``document_stage``, ``document_candidates``, ``load_cards``) are the rounds' I/O, in
``query.py``, so a search over the store passes the same modules wherever it is asked.
"""

from __future__ import annotations

import copy
from collections.abc import Mapping, Sequence
from dataclasses import replace
from typing import TYPE_CHECKING

from llama_index_docmemo.levers.document_stage import (
    card_lead,
    card_scores,
    document_scores,
    hit_scores,
)
from llama_index_docmemo.loop.state import (
    DocumentState,
    QueryState,
    pages_for,
)
from llama_index_docmemo.memory.documents import DocumentBeliefMemory
from llama_index_docmemo.trace import DocumentBelief

if TYPE_CHECKING:
    from llama_index_docmemo.config import DocMemoConfig
    from llama_index_docmemo.levers.document_stage import DocumentCard
    from llama_index_docmemo.types import PageHit


# -- rules -------------------------------------------------------------------------------------
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
