"""The levers' one hook into the loop: candidates of a round, belief priors, updates, budgets.

The loop (:class:`~llama_index_docmemo.loop.DocMemoLoop`) calls :class:`RoundLevers` at four
points (candidate search, priming beliefs, after an update, the round's page budget); everything
the levers decide lives in the pure modules of this package, and this class only does the store
and encoder I/O they need. Per-query state stays in the loop; the only thing kept here is the
reference graph of each document version, which does not depend on the query.
"""

from __future__ import annotations

import threading
from collections.abc import Sequence
from typing import TYPE_CHECKING

import numpy as np

from llama_index_docmemo.config import DocMemoConfig
from llama_index_docmemo.levers.budget import pages_for_round
from llama_index_docmemo.levers.financial import statement_queries
from llama_index_docmemo.levers.fusion import fuse_rankings
from llama_index_docmemo.levers.priors import calibrated_probability
from llama_index_docmemo.levers.question_refs import labelled_pages, mentions_labels, named_pages
from llama_index_docmemo.levers.schema_field import schema_ranking
from llama_index_docmemo.levers.structure import reference_boosts
from llama_index_docmemo.levers.subqueries import split_question
from llama_index_docmemo.memory.references import ReferenceGraph, build_reference_graph
from llama_index_docmemo.types import PageFilter, PageHit, PageRecord, PageRef, QueryEmbedding

if TYPE_CHECKING:
    from llama_index_docmemo.encoders.base import PageEncoder
    from llama_index_docmemo.memory.belief import PageBeliefMemory
    from llama_index_docmemo.memory.schema import SchemaMemory
    from llama_index_docmemo.store.base import PageStore


class RoundLevers:
    """Applies the levers switched on in ``config`` to the rounds of one engine's queries
    (one instance per retriever, so reference graphs are built once per document version).

    Args:
        store: the page store (recommend / discovery searches, page text for the graph).
        encoder: encodes sub-queries.
        config: the switches (``feedback_search``, ``subqueries``, ``reference_weight``, ...).
    """

    def __init__(self, store: PageStore, encoder: PageEncoder, config: DocMemoConfig) -> None:
        self.store = store
        self.encoder = encoder
        self.config = config
        self._graphs: dict[tuple[str, str], ReferenceGraph] = {}
        self._lock = threading.Lock()

    # -- candidates --------------------------------------------------------------------------
    def candidate_limit(self, round_: int) -> int:
        """Candidates fetched in a 1-based round (a wider pool from round 2 on, if set)."""
        cfg = self.config
        if round_ >= 2 and cfg.later_candidates is not None:
            return cfg.later_candidates
        return cfg.candidates

    def candidates(
        self,
        round_: int,
        question: str,
        embedding: QueryEmbedding,
        page_filter: PageFilter,
        useful: Sequence[PageRef],
        irrelevant: Sequence[PageRef],
        schema: SchemaMemory | None = None,
        cache: dict[str, list[PageHit]] | None = None,
    ) -> list[PageHit]:
        """The round's candidates: the query's own ranking, fused from round 2 on with the
        rankings of the levers switched on. Round 1 is always the plain ranking, so baselines
        that read the first-round ranking read exactly what DocMemo's round 1 saw.

        ``cache`` (one per query) keeps the searches that depend on the question only
        (sub-queries, statements), so rounds 3.. do not repeat them."""
        cfg = self.config
        limit = self.candidate_limit(round_)
        base = self.store.search(
            embedding, limit=limit, page_filter=page_filter, prefetch_limit=cfg.prefetch
        )
        if round_ < 2:
            return base
        records: dict[PageRef, PageRecord] = {h.ref: h.record for h in base}
        others: list[tuple[dict[PageRef, float], float]] = []
        extra: list[tuple[str, float]] = []
        if cfg.subqueries:
            extra += [(part, cfg.subquery_weight) for part in split_question(question)]
        if cfg.statement_weight > 0:
            extra += [(q, cfg.statement_weight) for q in statement_queries(question)]
        for text, weight in extra:
            hits = cache.get(text) if cache is not None else None
            if hits is None:
                hits = self.store.search(
                    self.encoder.encode_query(text),
                    limit=limit,
                    page_filter=page_filter,
                    prefetch_limit=cfg.prefetch,
                )
                if cache is not None:
                    cache[text] = hits
            others.append(({h.ref: h.score for h in hits}, weight))
            records.update({h.ref: h.record for h in hits if h.ref not in records})
        if cfg.feedback_search != "off" and useful:
            hits = self.store.feedback_search(
                useful,
                irrelevant if cfg.feedback_negatives else (),
                limit=limit,
                page_filter=page_filter,
                using=cfg.feedback_vector,
                strategy=cfg.feedback_strategy,
                target=embedding if cfg.feedback_search == "discover" else None,
            )
            others.append(({h.ref: h.score for h in hits}, cfg.feedback_weight))
            records.update({h.ref: h.record for h in hits if h.ref not in records})
        if cfg.schema_field_weight > 0 and schema is not None:
            ranking = schema_ranking(question, schema.schemas.values())
            top = dict(list(ranking.items())[:limit])
            missing = [ref for ref in top if ref not in records]
            if missing:
                for record in self.store.get_pages(missing, page_filter):
                    records[record.ref] = record
            top = {ref: score for ref, score in top.items() if ref in records}
            others.append((top, cfg.schema_field_weight))
        if not others:
            return base
        fused = fuse_rankings({h.ref: h.score for h in base}, others, cfg.fusion_rule)
        return [PageHit(records[ref], score) for ref, score in fused.items()]

    # -- beliefs -----------------------------------------------------------------------------
    def prime(self, beliefs: PageBeliefMemory, refs: list[PageRef], scores: np.ndarray) -> None:
        """Prior of pages seen for the first time, from their retrieval scores (ranking order):
        calibrated probabilities when ``prior_calibration`` is set, else the raw scores."""
        cfg = self.config
        if cfg.prior_strength <= 0 or not refs:
            return
        prior = scores
        if cfg.prior_calibration is not None:
            prior = calibrated_probability(scores, cfg.prior_calibration)
        beliefs.set_prior_from_scores(refs, prior, cfg.prior_strength)

    def question_prior(
        self,
        beliefs: PageBeliefMemory,
        question: str,
        doc_pages: dict[str, int],
        versions: dict[str, str],
        page_filter: PageFilter,
    ) -> None:
        """alpha += ``question_reference_weight`` for the pages the question names ("page 25",
        "the cover", "Figure 9") in each document of ``doc_pages`` (doc -> page count)."""
        weight = self.config.question_reference_weight
        if weight <= 0:
            return
        labels = mentions_labels(question)
        boosts: dict[PageRef, float] = {}
        for doc_id, n_pages in doc_pages.items():
            pages = named_pages(question, n_pages)
            if labels and doc_id in versions:
                graph = self.reference_graph(doc_id, versions[doc_id], page_filter)
                pages += labelled_pages(question, graph)
            for page in dict.fromkeys(pages):
                boosts[PageRef(doc_id, page)] = weight
        beliefs.add_alpha(boosts)

    def after_update(
        self,
        beliefs: PageBeliefMemory,
        useful: Sequence[PageRef],
        versions: dict[str, str],
        page_filter: PageFilter,
    ) -> None:
        """Spread a round's useful labels along the documents' reference graphs."""
        cfg = self.config
        if cfg.reference_weight <= 0 and not cfg.continuation_weight:
            return
        if not useful:
            return
        graphs = {
            doc_id: self.reference_graph(doc_id, versions[doc_id], page_filter)
            for doc_id in {r.doc_id for r in useful}
            if doc_id in versions
        }
        beliefs.add_alpha(
            reference_boosts(
                useful,
                graphs,
                weight=cfg.reference_weight,
                continuation_weight=cfg.continuation_weight,
            )
        )

    def reference_graph(self, doc_id: str, version: str, page_filter: PageFilter) -> ReferenceGraph:
        """The document's reference graph, built once per version from its stored page text."""
        key = (doc_id, version)
        with self._lock:
            graph = self._graphs.get(key)
        if graph is not None:
            return graph
        schema = self.store.get_schema(doc_id, tenant=page_filter.tenant)
        n_pages = schema.n_pages if schema is not None else 0
        refs = [PageRef(doc_id, p) for p in range(1, n_pages + 1)]
        texts = {
            r.page: r.text
            for r in self.store.get_pages(refs, page_filter)
            if r.doc_version == version
        }
        graph = build_reference_graph(texts)
        with self._lock:
            self._graphs[key] = graph
        return graph

    # -- budget ------------------------------------------------------------------------------
    def round_budget(self, round_: int, read_so_far: int) -> int:
        """Pages to read in a 1-based round (budget shape, capped by ``max_pages``); a static
        engine reads ``pages_per_round`` in its one round."""
        cfg = self.config
        return pages_for_round(
            round_,
            cfg.pages_per_round,
            None if cfg.static else cfg.pages_schedule,
            read_so_far=read_so_far,
            max_pages=cfg.max_pages,
        )
