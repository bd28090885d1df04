"""The engines an evaluation compares, each behind one small interface: question in, pages read out.

- ``docmemo`` and its ablations: :class:`DocMemoQueryEngine` with a :class:`DocMemoConfig`.
- ``static@K``: the first K pages of the first-round ranking, read in one round (no stop).
- ``static-paged``: the same ranking read in DocMemo's round sizes, with the same stop rule as DocMemo.
- ``neighbours``: pages within +-2 of each page judged useful, the rest from the ranking, same stop.
- ``two-stage``: the document stage DocMemo's loop uses (best page scores fused with the cards),
  then the first-round ranking inside its best documents, read like ``static-paged``.
- ``llamaindex-topk`` / ``llamaindex-vector`` (and ``-ocr``, over the store's OCR'd page text):
  stock LlamaIndex pipelines over chunks (:mod:`.llamaindex_pipeline`).

The first-round ranking is the store's search for the question, exactly as DocMemo's round 1 sees it
(same encoder, candidates, prefetch and scope), so round 1 is the same pages for every
ranking-based engine. The scope is each question's own document (``document``, the default) or
the whole store (``corpus``: the question names no document, as a pilot asks), the same for every
engine. No engine sees the gold pages: only the stop rule may, and only under
``--stop oracle`` / ``noisy`` (see :mod:`.stopping`).
"""

from __future__ import annotations

import re
import time
from abc import ABC, abstractmethod
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import TYPE_CHECKING

from llama_index_docmemo.config import BudgetSettings, DocMemoConfig
from llama_index_docmemo.encoders.base import PageEncoder
from llama_index_docmemo.errors import StoreError
from llama_index_docmemo.evaluation.configs import ABLATIONS, EngineConfigs
from llama_index_docmemo.evaluation.datasets import QAItem
from llama_index_docmemo.evaluation.metrics import QuestionRun
from llama_index_docmemo.evaluation.orders import next_in_ranking, next_neighbours
from llama_index_docmemo.events import counting_llm_calls
from llama_index_docmemo.levers.document_stage import (
    card_scores,
    document_scores,
    hit_scores,
)
from llama_index_docmemo.levers.rounds import QuerySearches, RoundLevers
from llama_index_docmemo.loop.state import RoundOutcome, names_documents, stop_reason
from llama_index_docmemo.readers.base import PageView, Reader, ReaderInput
from llama_index_docmemo.step_runtime import run as run_steps
from llama_index_docmemo.store.base import PageStore
from llama_index_docmemo.store.scope import PageFilter
from llama_index_docmemo.trace import QueryTrace
from llama_index_docmemo.types import PageRecord, PageRef

if TYPE_CHECKING:
    from llama_index_docmemo.query_engine import DocMemoQueryEngine

RANKING_ENGINES = ("static-paged", "neighbours", "two-stage")
SCOPES = ("document", "corpus")
STOCK_ENGINES = (
    "llamaindex-topk",
    "llamaindex-vector",
    "llamaindex-topk-ocr",
    "llamaindex-vector-ocr",
)
ENGINE_NAMES = ("docmemo", "static@K", *RANKING_ENGINES, *STOCK_ENGINES, *ABLATIONS)
_STATIC_AT = re.compile(r"static@([1-9][0-9]*)")
NO_BUDGET = BudgetSettings()
"""A ranking baseline's budget: its rounds alone (it makes no calls of its own to count)."""


def scope_filter(item: QAItem, scope: str) -> PageFilter:
    """The store scope a question is asked in: its own document, or the whole store."""
    if scope not in SCOPES:
        raise ValueError(f"scope must be one of {', '.join(SCOPES)}, got {scope!r}")
    return PageFilter(doc_ids=(item.doc_id,)) if scope == "document" else PageFilter()


def static_k(name: str) -> int | None:
    """K of a ``static@K`` engine name, else None."""
    match = _STATIC_AT.fullmatch(name)
    return int(match.group(1)) if match else None


def check_engine_names(names: list[str]) -> None:
    """Raise ValueError naming every unknown engine (``static@K`` accepts any K >= 1)."""
    unknown = [
        n for n in names if static_k(n) is None and (n not in ENGINE_NAMES or n == "static@K")
    ]
    if unknown:
        raise ValueError(
            f"unknown engine(s) {', '.join(unknown)}; choose from {', '.join(ENGINE_NAMES)} "
            "(static@K with K a page count, e.g. static@10)"
        )


@dataclass
class EngineOutput:
    """One question's run, plus the DocMemo trace when the engine produced one."""

    run: QuestionRun
    trace: QueryTrace | None = None


class EvalEngine(ABC):
    """An engine under evaluation, answering one question restricted to its document."""

    name: str

    @abstractmethod
    def run(self, item: QAItem, reader: Reader) -> EngineOutput:
        """Read pages for ``item`` with ``reader`` (which applies the evaluation's stop rule)."""


def reads_from_trace(trace: QueryTrace) -> list[list[PageRef]]:
    """Pages read in each round of a DocMemo trace (rounds that read nothing stay empty)."""
    reads: list[list[PageRef]] = [[] for _ in trace.rounds]
    for read in trace.pages_read:
        while len(reads) < read.round:
            reads.append([])
        reads[read.round - 1].append(PageRef(read.doc_id, read.page))
    return reads


def useful_from_trace(trace: QueryTrace) -> list[PageRef]:
    """Pages the reader labelled useful in any round, in the order first labelled."""
    useful: dict[PageRef, None] = {}
    for round_ in trace.rounds:
        if round_.feedback is not None:
            for page in round_.feedback.useful:
                useful.setdefault(PageRef(page.doc_id, page.page), None)
    return list(useful)


EngineFactory = Callable[[DocMemoConfig, Reader], "DocMemoQueryEngine"]


class DocMemoEvalEngine(EvalEngine):
    """DocMemo (or an ablation) on the shared store and encoder.

    Args:
        name: engine name in the report.
        config: its configuration.
        make_engine: builds a ``DocMemoQueryEngine`` from a config and a reader.
    """

    def __init__(
        self,
        name: str,
        config: DocMemoConfig,
        make_engine: EngineFactory,
        scope: str = "document",
    ) -> None:
        self.name = name
        self.config = config
        self.scope = scope
        self._make_engine = make_engine
        self._engines: dict[int, tuple[Reader, DocMemoQueryEngine]] = {}

    def _engine(self, reader: Reader) -> DocMemoQueryEngine:
        if id(reader) not in self._engines:
            self._engines[id(reader)] = (reader, self._make_engine(self.config, reader))
        return self._engines[id(reader)][1]

    def run(self, item: QAItem, reader: Reader) -> EngineOutput:
        result = self._engine(reader).run(item.question, page_filter=scope_filter(item, self.scope))
        trace: QueryTrace = result.trace
        run = QuestionRun(
            engine=self.name,
            qid=item.qid,
            reads=reads_from_trace(trace),
            useful=useful_from_trace(trace),
            answer=result.answer,
            status=trace.status,
            stop_reason=trace.stop_reason,
            llm_calls=trace.llm_calls,
            seconds=trace.seconds,
        )
        return EngineOutput(run, trace)


class FirstRoundRanking:
    """The candidates for a question in its scope, best first, as DocMemo's round 1 sees them:
    the levers' round-1 candidates (:meth:`RoundLevers.candidates`), so a lever that fuses
    searches into round 1 changes every baseline's ranking too.

    Ties in score are broken by (document, page), as the retriever does.
    """

    def __init__(
        self,
        store: PageStore,
        encoder: PageEncoder,
        config: DocMemoConfig,
        scope: str = "document",
    ) -> None:
        self.store = store
        self.encoder = encoder
        self.config = config
        self.scope = scope
        self._scope_pages: int | None = None

    def levers(self, depth: int) -> RoundLevers:
        """The levers with at least ``config.selection.candidates`` and ``depth`` candidates."""
        selection = self.config.selection
        wide = selection.model_copy(update={"candidates": max(selection.candidates, depth)})
        return RoundLevers(self.store, self.encoder, self.config.levers, wide)

    def ranked(self, question: str, scope: PageFilter, depth: int) -> list[PageRecord]:
        """Round 1's candidates of ``question`` within ``scope``, best first."""
        query = self.encoder.encode_query(question)
        found = run_steps(self.levers(depth).candidates(1, question, query, scope, QuerySearches()))
        hits = sorted(found, key=lambda h: (-h.score, h.record.doc_id, h.record.page))
        return [h.record for h in hits]

    def records(self, item: QAItem, depth: int) -> list[PageRecord]:
        """At least ``config.selection.candidates`` and up to ``depth`` pages of the ranking."""
        return self.ranked(item.question, self.filter(item), depth)

    def filter(self, item: QAItem) -> PageFilter:
        return scope_filter(item, self.scope)

    def n_pages(self, doc_id: str) -> int:
        schema = self.store.get_schema(doc_id)
        if schema is None:
            raise StoreError(f"document {doc_id!r} is not in the store ({self.store!r})")
        return schema.n_pages

    def pages_in_scope(self, item: QAItem) -> int:
        """Pages the question is asked of: its document's, or the whole store's."""
        if self.scope == "document":
            return self.n_pages(item.doc_id)
        if self._scope_pages is None:
            self._scope_pages = self.store.count_pages(PageFilter())
        return self._scope_pages


class TwoStageRanking(FirstRoundRanking):
    """``two-stage``: the document stage of DocMemo's loop (the question's search over the
    scope, ``document_search_pages`` deep; each document's best page fused with its card,
    :mod:`~llama_index_docmemo.levers.document_stage`), then the first-round ranking inside
    the best document, then inside the next, and so on. A question whose cards stand level
    (``card_lead``) is ranked over the whole scope, as the loop reads it."""

    def documents(self, item: QAItem) -> list[str] | None:
        """The scope's documents best first by the document stage's score (None: the
        question names no document apart)."""
        settings, scope = self.config.documents, self.filter(item)
        limit = max(self.config.selection.candidates, settings.document_search_pages)
        levers = RoundLevers(self.store, self.encoder, self.config.levers, self.config.selection)
        query = self.encoder.encode_query(item.question)
        depth = run_steps(levers.depth(scope))
        hits = run_steps(levers.search(query, scope, depth, limit))
        docs = tuple(sorted({h.record.doc_id for h in hits}))
        stored = self.store.list_cards(replace(scope, doc_ids=docs)) if docs else []
        matches = card_scores(item.question, [s.card for s in stored])
        if len(docs) > 1 and not names_documents(matches, self.config):
            return None
        scores = document_scores(hit_scores(hits), matches, settings.card_weight)
        return sorted(scores, key=lambda d: (-scores[d], d))

    def records(self, item: QAItem, depth: int) -> list[PageRecord]:
        documents = self.documents(item)
        if documents is None:
            return super().records(item, depth)
        out: list[PageRecord] = []
        for doc_id in documents:
            if len(out) >= depth:
                break
            out += self.ranked(item.question, replace(self.filter(item), doc_ids=(doc_id,)), depth)
        return out


@dataclass
class _Reading:
    """What a round-based baseline has read so far on one question."""

    records: dict[PageRef, PageRecord]
    reads: list[list[PageRef]] = field(default_factory=list)
    useful: list[PageRef] = field(default_factory=list)
    answer: str | None = None
    status: str = "need_more"
    stop_reason: str = "max_rounds"
    llm_calls: int = 0

    @property
    def read(self) -> set[PageRef]:
        return {ref for round_ in self.reads for ref in round_}


class RankingEngine(EvalEngine):
    """Reads the first-round ranking in rounds, choosing each round's pages by a policy.

    ``static@K`` is one round of K pages; ``static-paged`` and ``neighbours`` read DocMemo's
    round sizes (``round_pages``) and stop by DocMemo's own policy,
    :func:`~llama_index_docmemo.loop.state.stop_reason`: a trusted "answered", "unanswerable"
    once ``min_rounds_before_unanswerable`` rounds (or the whole document) were read, nothing
    found after ``give_up_after_pages`` pages, or the last round.
    """

    def __init__(
        self,
        name: str,
        ranking: FirstRoundRanking,
        *,
        round_pages: Sequence[int],
        follow_neighbours: bool = False,
    ) -> None:
        if not round_pages:
            raise ValueError(f"engine {name!r} needs at least one round")
        self.name = name
        self.ranking = ranking
        self.round_pages = list(round_pages)
        self.follow_neighbours = follow_neighbours

    def _next(self, item: QAItem, state: _Reading, order: list[PageRef], k: int) -> list[PageRef]:
        if not self.follow_neighbours:
            return next_in_ranking(order, state.read, k)
        docs = {ref.doc_id for ref in state.useful}
        n_pages = {doc_id: self.ranking.n_pages(doc_id) for doc_id in sorted(docs)}
        return next_neighbours(order, state.useful, state.read, k, n_pages)

    def _fetch(self, item: QAItem, state: _Reading, refs: list[PageRef]) -> list[PageRecord]:
        missing = [ref for ref in refs if ref not in state.records]
        if missing:
            for record in self.ranking.store.get_pages(missing, self.ranking.filter(item)):
                state.records[record.ref] = record
        return [state.records[ref] for ref in refs if ref in state.records]

    def run(self, item: QAItem, reader: Reader) -> EngineOutput:
        start = time.perf_counter()
        ranked = self.ranking.records(item, sum(self.round_pages))
        order = [record.ref for record in ranked]
        state = _Reading(records={record.ref: record for record in ranked})
        n_pages = self.ranking.pages_in_scope(item)
        loop = self.ranking.config.loop
        rounds = len(self.round_pages)
        settings = loop.model_copy(update={"rounds": rounds, "static": rounds == 1})
        for round_, k in enumerate(self.round_pages, start=1):
            records = self._fetch(item, state, self._next(item, state, order, k))
            if not records:
                state.stop_reason = "no_candidates"
                break
            final = round_ == rounds
            with counting_llm_calls() as tally:
                feedback = reader.read(
                    ReaderInput(
                        question=item.question,
                        query=item.question,
                        pages=[
                            PageView(ref=r.ref, text=r.text, section=r.section) for r in records
                        ],
                        round=round_,
                        final_round=final,
                        pages_read_total=len(state.read),
                        pages_in_scope=n_pages,
                    )
                )
            shown = [r.ref for r in records]
            state.reads.append(shown)
            state.llm_calls += tally.calls
            state.useful += [
                ref for ref in feedback.useful_pages if ref in shown and ref not in state.useful
            ]
            state.answer, state.status = feedback.answer, feedback.status
            outcome = RoundOutcome(
                round=round_,
                shown=len(shown),
                status=feedback.status,
                useful_so_far=len(state.useful),
                pages_read=len(state.read),
                explored=round_ >= min(loop.min_rounds_before_unanswerable, rounds)
                or len(state.read) >= n_pages,
            )
            reason = stop_reason(outcome, settings, NO_BUDGET)
            if reason is not None:
                state.stop_reason = reason
                break
        run = QuestionRun(
            engine=self.name,
            qid=item.qid,
            reads=state.reads or [[]],
            useful=state.useful,
            answer=state.answer,
            status=state.status,
            stop_reason=state.stop_reason,
            llm_calls=state.llm_calls,
            seconds=time.perf_counter() - start,
        )
        return EngineOutput(run)


def build_engines(
    names: list[str],
    *,
    configs: EngineConfigs,
    seed: int | None,
    make_engine: EngineFactory,
    store: PageStore,
    encoder: PageEncoder,
    data_root: Path | None = None,
    scope: str = "document",
) -> Mapping[str, EvalEngine]:
    """The requested engines by name, in the order asked.

    Args:
        names: engine names (``static@K`` for any K).
        configs: k, T and overrides: DocMemo's configuration of each engine, whose candidates,
            prefetch and stop rule the baselines share.
        seed: the run's seed.
        make_engine: builds DocMemo engines.
        store / encoder: the shared page store and encoder (the first-round ranking).
        data_root: the dataset's ``pdfs/`` folder (the stock LlamaIndex pipelines read the PDFs).
        scope: ``document`` (each question in its own document) or ``corpus`` (the whole store),
            for every engine.
    """
    check_engine_names(names)
    reference = configs.for_engine("docmemo", seed=seed)
    ranking = FirstRoundRanking(store, encoder, reference, scope)
    engines: dict[str, EvalEngine] = {}
    for name in dict.fromkeys(names):
        k = static_k(name)
        if k is not None:
            engines[name] = RankingEngine(name, ranking, round_pages=[k])
        elif name in RANKING_ENGINES:
            engines[name] = RankingEngine(
                name,
                TwoStageRanking(store, encoder, reference, scope)
                if name == "two-stage"
                else ranking,
                round_pages=reference.loop.round_pages(),
                follow_neighbours=name == "neighbours",
            )
        elif name in STOCK_ENGINES:
            from llama_index_docmemo.evaluation.llamaindex_pipeline import stock_engine

            if scope != "document":
                raise ValueError(
                    f"engine {name!r} builds an index per document and runs in the document "
                    "scope only; leave it out of --engines with --scope corpus"
                )

            if data_root is None:
                raise ValueError(f"engine {name!r} needs the dataset's pdfs/ folder")
            engines[name] = stock_engine(
                name, pdf_dir=data_root, store=store, budget=configs.budget, encoder=encoder
            )
        else:
            engines[name] = DocMemoEvalEngine(
                name, configs.for_engine(name, seed=seed), make_engine, scope
            )
    return engines
