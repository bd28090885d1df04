"""DocMemoRetriever: one round of candidate search + belief-guided selection per call.

The per-query state (beliefs, episodic memory, schema, candidates, seeded generator) lives in an
explicit :class:`QueryState`, so concurrent queries never share it. Plain ``retrieve()`` starts a
fresh state and runs round 1; the query engine drives further rounds with ``retrieve_round`` and
``update``.
"""

from __future__ import annotations

import asyncio
import time
from dataclasses import dataclass, field
from functools import partial
from typing import Any

import numpy as np
from llama_index.core.base.base_retriever import BaseRetriever
from llama_index.core.callbacks import CallbackManager
from llama_index.core.schema import NodeWithScore, QueryBundle, TextNode

from llama_index_docmemo.config import DocMemoConfig
from llama_index_docmemo.encoders.base import PageEncoder
from llama_index_docmemo.expansion import expansion_terms
from llama_index_docmemo.levers.rounds import RoundLevers
from llama_index_docmemo.memory.belief import PageBeliefMemory, normalise_scores
from llama_index_docmemo.memory.episodic import EpisodicMemory
from llama_index_docmemo.memory.schema import SchemaMemory
from llama_index_docmemo.reasoning.base import Feedback, PageReranker, PageView
from llama_index_docmemo.selection import candidate_pool, select_pages
from llama_index_docmemo.store.base import PageStore
from llama_index_docmemo.trace import BeliefState, PageScore
from llama_index_docmemo.types import PageFilter, PageHit, PageRecord, PageRef


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


@dataclass
class QueryState:
    """Everything one query carries across rounds; never shared between queries."""

    question: str
    page_filter: PageFilter
    schema: SchemaMemory
    beliefs: PageBeliefMemory
    episodic: EpisodicMemory
    rng: np.random.Generator
    versions: dict[str, str]
    retrieval: dict[PageRef, float] = field(default_factory=dict)
    records: dict[PageRef, PageRecord] = field(default_factory=dict)
    round: int = 0
    llm_calls: int = 0
    lever_searches: dict[str, list[PageHit]] = field(default_factory=dict)

    @property
    def pages_in_scope(self) -> int:
        return len(self.beliefs)

    @property
    def read(self) -> set[PageRef]:
        return set(self.episodic.pages_read)


def page_node(record: PageRecord) -> TextNode:
    """A page as a LlamaIndex node (text + the metadata postprocessors and citations need)."""
    return TextNode(
        id_=f"{record.doc_id}#p{record.page}@{record.doc_version[:16]}",
        text=record.text,
        metadata={
            "kind": "page",
            "doc_id": record.doc_id,
            "page": record.page,
            "doc_version": record.doc_version,
            "source": record.source,
            "section": record.section,
        },
        excluded_embed_metadata_keys=["doc_version", "source", "kind"],
        excluded_llm_metadata_keys=["doc_version", "source", "kind"],
    )


def _render(source: str, page: int) -> Any:
    """The page image for a VLM, rendered only when a reasoner asks for it."""
    from llama_index_docmemo.ingest.pdf import render_page

    return render_page(source, page, 1500)


class DocMemoRetriever(BaseRetriever):
    """Candidate search on the page store + selection by (1 - lambda) c + lambda theta.

    Args:
        store: the page store (Qdrant Edge or qdrant-client).
        encoder: the encoder that filled the store.
        config: loop parameters and ablation switches.
        page_filter: tenant / ACL / document scope, applied inside Qdrant on every call.
        reranker: optional LLM reranker over the top candidates' schema summaries.
    """

    def __init__(
        self,
        store: PageStore,
        encoder: PageEncoder,
        config: DocMemoConfig | None = None,
        page_filter: PageFilter | None = None,
        reranker: PageReranker | None = None,
        callback_manager: CallbackManager | None = None,
        verbose: bool = False,
    ) -> None:
        super().__init__(callback_manager=callback_manager, verbose=verbose)
        if getattr(store, "encoder_name", encoder.name) != encoder.name:
            from llama_index_docmemo.errors import StoreError

            raise StoreError(
                f"the store was built with encoder {store.encoder_name!r}, "
                f"but the retriever was given {encoder.name!r}"
            )
        self.store = store
        self.encoder = encoder
        self.config = config or DocMemoConfig()
        self.page_filter = page_filter or PageFilter()
        self.reranker = reranker
        self.levers = RoundLevers(store, encoder, self.config)

    # -- state --------------------------------------------------------------------------------
    def start(self, question: str, page_filter: PageFilter | None = None) -> QueryState:
        """A fresh per-query state over the documents visible through the filter."""
        scope = page_filter or self.page_filter
        schemas = self.store.list_documents(scope)
        cfg = self.config
        return QueryState(
            question=question,
            page_filter=scope,
            schema=SchemaMemory(schemas),
            beliefs=PageBeliefMemory({s.doc_id: s.n_pages for s in schemas}),
            episodic=EpisodicMemory(question),
            rng=np.random.default_rng(cfg.seed),
            versions={s.doc_id: s.doc_version for s in schemas},
        )

    def round_query(self, state: QueryState) -> str:
        """Round 1 asks the question; later rounds the reasoner's refined query (episodic
        memory), expanded with distinctive terms of the pages judged useful (relevance feedback)."""
        query = state.question
        if state.round >= 1 and self.config.use_episodic:
            refined = state.episodic.refined_query
            if refined and refined.strip():
                query = refined.strip()
        useful = [state.records[r].text for r in state.episodic.useful_pages if r in state.records]
        extra = expansion_terms(
            query,
            useful,
            [rec.text for rec in state.records.values()],
            self.config.relevance_feedback,
        )
        return f"{query} {' '.join(extra)}" if extra else query

    # -- one round ----------------------------------------------------------------------------
    def retrieve_round(self, state: QueryState) -> RoundSelection:
        """Search candidates for this round's query and select the pages to read."""
        started = time.perf_counter()
        query = self.round_query(state)
        hits = self._candidates(state, query, self.encoder.encode_query(query))
        return self._select(state, query, hits, started)

    async def aretrieve_round(self, state: QueryState) -> RoundSelection:
        started = time.perf_counter()
        query = self.round_query(state)
        embedding = await asyncio.to_thread(self.encoder.encode_query, query)
        if self._plain_search(state):
            hits = await self.store.asearch(
                embedding,
                limit=self.config.candidates,
                page_filter=state.page_filter,
                prefetch_limit=self.config.prefetch,
            )
        else:
            hits = await asyncio.to_thread(self._candidates, state, query, embedding)
        return await asyncio.to_thread(self._select, state, query, hits, started)

    def _plain_search(self, state: QueryState) -> bool:
        """Whether this round is the question's own search (round 1, or no lever that searches)."""
        cfg = self.config
        levers_on = (
            cfg.feedback_search != "off"
            or cfg.subqueries
            or cfg.later_candidates is not None
            or cfg.schema_field_weight > 0
            or cfg.statement_weight > 0
        )
        return state.round == 0 or not levers_on

    def _candidates(self, state: QueryState, query: str, embedding: Any) -> list[PageHit]:
        """The round's candidate hits (the levers' hook: fused rankings from round 2 on)."""
        return self.levers.candidates(
            state.round + 1,
            state.question,
            embedding,
            state.page_filter,
            useful=state.episodic.useful_pages,
            irrelevant=sorted(state.episodic.irrelevant_pages),
            schema=state.schema if self.config.use_schema else None,
            cache=state.lever_searches,
        )

    def _select(
        self, state: QueryState, query: str, hits: list[PageHit], started: float
    ) -> RoundSelection:
        cfg = self.config
        state.round += 1
        hits = sorted(
            (h for h in hits if state.versions.get(h.record.doc_id) == h.record.doc_version),
            key=lambda h: (-h.score, h.record.doc_id, h.record.page),
        )
        c = normalise_scores([h.score for h in hits])
        round_scores: dict[PageRef, float] = {}
        for hit, score in zip(hits, c, strict=True):
            state.records[hit.ref] = hit.record
            round_scores[hit.ref] = float(score)
            state.retrieval[hit.ref] = max(state.retrieval.get(hit.ref, 0.0), float(score))
        if cfg.use_belief and cfg.prior_strength > 0 and round_scores:
            refs = list(round_scores)
            self.levers.prime(state.beliefs, refs, np.array([round_scores[r] for r in refs]))
        if cfg.use_belief and state.round == 1:
            self.levers.question_prior(
                state.beliefs,
                state.question,
                {d: state.schema.n_pages(d) for d in sorted({h.ref.doc_id for h in hits})},
                state.versions,
                state.page_filter,
            )
        use_beliefs = cfg.use_belief and not cfg.static
        lam = cfg.lambda_at(state.round) if use_beliefs else 0.0
        reread = set(state.episodic.useful_pages) if cfg.reread_useful else set()
        pool = candidate_pool(
            state.retrieval, state.beliefs if use_beliefs else None, state.read, reread
        )
        k = self._round_budget(state)
        width = k if self.reranker is None else max(2 * k, k + 5)
        selection = select_pages(
            pool,
            state.retrieval,
            state.beliefs if use_beliefs else None,
            k=width,
            lam=lam,
            rng=state.rng,
            sampling=cfg.sampling,
        )
        chosen = selection.pages
        if self.reranker is not None and chosen:
            chosen = self._rerank(state, query, chosen, k)
        chosen = chosen[:k]
        records = self._records(state, chosen)
        score_of = dict(zip(selection.pages, selection.scores, strict=True))
        return RoundSelection(
            round=state.round,
            query=query,
            lam=lam,
            candidates=[
                PageScore(doc=h.record.doc_id, page=h.record.page, score=float(s))
                for h, s in zip(hits, c, strict=True)
            ],
            pages=records,
            scores=[score_of.get(r.ref, 0.0) for r in records],
            seconds=time.perf_counter() - started,
        )

    def _round_budget(self, state: QueryState) -> int:
        return self.levers.round_budget(state.round, len(state.read))

    def _records(self, state: QueryState, refs: list[PageRef]) -> list[PageRecord]:
        """Records of ``refs`` (fetched for pages known only from beliefs), pinned versions only."""
        missing = [r for r in refs if r not in state.records]
        if missing:
            for record in self.store.get_pages(missing, state.page_filter):
                if state.versions.get(record.doc_id) == record.doc_version:
                    state.records[record.ref] = record
        return [state.records[r] for r in refs if r in state.records]

    def _rerank(self, state: QueryState, query: str, refs: list[PageRef], k: int) -> list[PageRef]:
        records = self._records(state, refs)
        views = [self.page_view(state, r) for r in records]
        reranker = self.reranker
        assert reranker is not None
        calls_before = reranker.llm_calls
        ordered = reranker.rerank(
            state.question, query, views, k, state.episodic.evidence, state.episodic.missing
        )
        state.llm_calls += reranker.llm_calls - calls_before
        allowed = {r.ref for r in records}
        picked = [r for r in dict.fromkeys(ordered) if r in allowed][:k]
        rest = [r for r in refs if r not in picked]
        return picked + rest

    def page_view(self, state: QueryState, record: PageRecord) -> PageView:
        use_schema = self.config.use_schema
        return PageView(
            ref=record.ref,
            text=record.text,
            section=state.schema.section_of(record.ref) if use_schema else "",
            summary=state.schema.summary_of(record.ref) if use_schema else "",
            load_image=partial(_render, record.source, record.page),
        )

    # -- update -------------------------------------------------------------------------------
    def update(
        self, state: QueryState, selection: RoundSelection, feedback: Feedback | None
    ) -> None:
        """Write the round into episodic memory and apply the labels to the beliefs."""
        refs = [r.ref for r in selection.pages]
        state.episodic.record(selection.round, selection.query, refs, feedback)
        cfg = self.config
        if feedback is None or not cfg.use_belief or not cfg.bayesian_update:
            return
        state.beliefs.update(
            useful=feedback.useful_pages,
            irrelevant=feedback.irrelevant_pages,
            radius=cfg.propagation_radius if cfg.propagation else 0,
            gamma=cfg.propagation_gamma,
            weight=cfg.propagation_weight,
            same_section=state.schema.same_section if cfg.use_schema else None,
            cross_section=cfg.cross_section_weight,
        )
        if cfg.propagation:
            self.levers.after_update(
                state.beliefs, feedback.useful_pages, state.versions, state.page_filter
            )

    def belief_states(self, state: QueryState, refs: list[PageRef]) -> list[BeliefState]:
        out = []
        for ref in refs:
            if ref in state.beliefs:
                a, b = state.beliefs.get(ref)
                out.append(BeliefState(doc=ref.doc_id, page=ref.page, alpha=a, beta=b))
        return out

    # -- BaseRetriever hooks ------------------------------------------------------------------
    def _retrieve(self, query_bundle: QueryBundle) -> list[NodeWithScore]:
        state = self.start(query_bundle.query_str)
        selection = self.retrieve_round(state)
        return self._nodes(selection)

    async def _aretrieve(self, query_bundle: QueryBundle) -> list[NodeWithScore]:
        state = await asyncio.to_thread(self.start, query_bundle.query_str)
        selection = await self.aretrieve_round(state)
        return self._nodes(selection)

    @staticmethod
    def _nodes(selection: RoundSelection) -> list[NodeWithScore]:
        return [
            NodeWithScore(node=page_node(record), score=score)
            for record, score in zip(selection.pages, selection.scores, strict=True)
        ]

    def __repr__(self) -> str:
        return f"DocMemoRetriever(encoder={self.encoder.name!r}, config={self.config!r})"
