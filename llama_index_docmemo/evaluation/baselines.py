"""The engines an evaluation compares, each behind one small interface: question in, pages read out.

- ``docmemo`` and its ablations: :class:`DocMemoQueryEngine` with a :class:`DocMemoConfig`.
- ``static``: the same engine with ``static=True`` and ``pages_per_round = k``, where k is the number of
  pages DocMemo read for that question (equal budget).
- ``llamaindex-topk``: a stock LlamaIndex ``RetrieverQueryEngine`` over a ``BM25Retriever`` built on the
  same stored pages of the question's document, with the same k; the evaluation's reasoner then reads
  the retrieved pages once, so every engine's answer comes from the same reader.
"""

from __future__ import annotations

import time
from abc import ABC, abstractmethod
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any

from llama_index_docmemo.config import DocMemoConfig
from llama_index_docmemo.errors import StoreError
from llama_index_docmemo.evaluation.datasets import QAItem
from llama_index_docmemo.evaluation.metrics import QuestionRun
from llama_index_docmemo.nodes import page_node
from llama_index_docmemo.reasoning.base import PageView, Reasoner, ReasoningInput
from llama_index_docmemo.store.base import PageStore
from llama_index_docmemo.trace import QueryTrace
from llama_index_docmemo.types import PageFilter, PageRef

ABLATIONS: dict[str, dict[str, Any]] = {
    "no_schema": {"use_schema": False},
    "no_belief": {"use_belief": False},
    "no_episodic": {"use_episodic": False},
    "no_memory": {"use_schema": False, "use_belief": False, "use_episodic": False},
    "no_bayes": {"bayesian_update": False},
    "greedy": {"sampling": "greedy"},  # the default since measurement (kept for the issue's list)
    "thompson": {"sampling": "thompson"},
    "paper": DocMemoConfig.paper().model_dump(
        include={
            "lambda_schedule",
            "sampling",
            "propagation_weight",
            "cross_section_weight",
            "relevance_feedback",
        }
    ),
    "no_propagation": {"propagation": False},
    "no_crops": {"adaptive_granularity": False},
    "relevance_feedback": {"relevance_feedback": 16},
}
BUDGET_ENGINES = ("static", "llamaindex-topk")
ENGINE_NAMES = ("docmemo", *BUDGET_ENGINES, *ABLATIONS)


@dataclass
class EngineOutput:
    """One question's run, plus the DocMemo trace when the engine produced one."""

    run: QuestionRun
    trace: QueryTrace | None = None


class EvalEngine(ABC):
    """An engine under evaluation. ``budget`` is DocMemo's pages read (equal-budget engines only)."""

    name: str
    needs_budget: bool = False

    @abstractmethod
    def run(self, item: QAItem, reasoner: Reasoner, budget: int | None = None) -> EngineOutput:
        """Answer one question, restricted to its document."""


def reads_from_trace(trace: QueryTrace) -> list[list[PageRef]]:
    """Pages read in each round of a DocMemo trace (rounds that read nothing stay empty)."""
    reads: list[list[PageRef]] = [[] for _ in trace.rounds]
    for read in trace.pages_read:
        while len(reads) < read.round:
            reads.append([])
        reads[read.round - 1].append(PageRef(read.doc, read.page))
    return reads


def _run_from_trace(name: str, item: QAItem, trace: QueryTrace, answer: str | None) -> QuestionRun:
    return QuestionRun(
        engine=name,
        qid=item.qid,
        reads=reads_from_trace(trace),
        answer=answer,
        status=trace.status,
        stop_reason=trace.stop_reason,
        llm_calls=trace.llm_calls,
        seconds=trace.seconds,
    )


def config_for(name: str, base: DocMemoConfig) -> DocMemoConfig:
    """The configuration of ``docmemo`` or of an ablation, on top of ``base`` (k, T, seed)."""
    if name == "docmemo":
        return base
    if name not in ABLATIONS:
        raise ValueError(f"unknown engine {name!r}; choose from {', '.join(ENGINE_NAMES)}")
    return base.model_copy(update=ABLATIONS[name])


EngineFactory = Callable[[DocMemoConfig, Reasoner], Any]


class DocMemoEvalEngine(EvalEngine):
    """DocMemo (or an ablation, or ``static`` when ``equal_budget``) on the shared store and encoder.

    Args:
        name: engine name in the report.
        config: its configuration.
        make_engine: builds a ``DocMemoQueryEngine`` from a config and a reasoner.
        equal_budget: run one static round of ``budget`` pages (the ``static`` baseline).
    """

    def __init__(
        self,
        name: str,
        config: DocMemoConfig,
        make_engine: EngineFactory,
        *,
        equal_budget: bool = False,
    ) -> None:
        self.name = name
        self.config = config
        self.needs_budget = equal_budget
        self._make_engine = make_engine
        self._engines: dict[tuple[int, int], Any] = {}

    def _engine(self, reasoner: Reasoner, k: int) -> Any:
        key = (id(reasoner), k)
        if key not in self._engines:
            config = self.config
            if self.needs_budget:
                config = config.model_copy(update={"static": True, "pages_per_round": k})
            self._engines[key] = self._make_engine(config, reasoner)
        return self._engines[key]

    def run(self, item: QAItem, reasoner: Reasoner, budget: int | None = None) -> EngineOutput:
        if self.needs_budget:
            if budget is None:
                raise ValueError(f"engine {self.name!r} needs DocMemo's pages read as its budget")
            if budget == 0:
                return EngineOutput(
                    QuestionRun(self.name, item.qid, reads=[[]], status="no_budget")
                )
        k = budget if self.needs_budget and budget is not None else self.config.pages_per_round
        engine = self._engine(reasoner, k)
        result = engine.run(item.question, page_filter=PageFilter(doc_ids=(item.doc,)))
        trace: QueryTrace = result.trace
        return EngineOutput(_run_from_trace(self.name, item, trace, result.answer), trace)


class LlamaIndexTopKEngine(EvalEngine):
    """Stock LlamaIndex: ``RetrieverQueryEngine`` over ``BM25Retriever`` on the document's stored pages.

    The retriever's top ``budget`` pages are what it "read"; the reasoner reads them once (final round)
    to produce the answer and its LLM calls.
    """

    name = "llamaindex-topk"
    needs_budget = True

    def __init__(self, store: PageStore) -> None:
        self._store = store
        self._nodes: dict[str, list[Any]] = {}
        self._retrievers: dict[str, Any] = {}

    def _doc_nodes(self, doc_id: str) -> list[Any]:
        if doc_id not in self._nodes:
            schema = self._store.get_schema(doc_id)
            if schema is None:
                raise StoreError(f"document {doc_id!r} is not in the store ({self._store!r})")
            refs = [PageRef(doc_id, p) for p in range(1, schema.n_pages + 1)]
            records = self._store.get_pages(refs, PageFilter(doc_ids=(doc_id,)))
            self._nodes[doc_id] = [page_node(r) for r in records]
        return self._nodes[doc_id]

    def _query_engine(self, doc_id: str, k: int) -> Any:
        from llama_index.core.llms import MockLLM
        from llama_index.core.query_engine import RetrieverQueryEngine
        from llama_index.core.response_synthesizers.no_text import NoText

        from llama_index_docmemo._extras import require

        if doc_id not in self._retrievers:
            bm25 = require(
                "llama_index.retrievers.bm25", extra="eval", feature="the llamaindex-topk engine"
            )
            self._retrievers[doc_id] = bm25.BM25Retriever.from_defaults(
                nodes=self._doc_nodes(doc_id)
            )
        retriever = self._retrievers[doc_id]
        retriever.similarity_top_k = min(k, len(self._doc_nodes(doc_id)))
        # Retrieval only (no LLM behind the synthesizer): the evaluation's reasoner reads the pages.
        return RetrieverQueryEngine(retriever=retriever, response_synthesizer=NoText(llm=MockLLM()))

    def run(self, item: QAItem, reasoner: Reasoner, budget: int | None = None) -> EngineOutput:
        if budget is None:
            raise ValueError(f"engine {self.name!r} needs DocMemo's pages read as its budget")
        if budget == 0 or not self._doc_nodes(item.doc):
            return EngineOutput(QuestionRun(self.name, item.qid, reads=[[]], status="no_budget"))
        start = time.perf_counter()
        response = self._query_engine(item.doc, budget).query(item.question)
        nodes = [sn.node for sn in response.source_nodes][:budget]
        refs = [PageRef(n.metadata["doc_id"], int(n.metadata["page"])) for n in nodes]
        feedback = reasoner.reason(
            ReasoningInput(
                question=item.question,
                query=item.question,
                pages=[
                    PageView(ref=ref, text=n.get_content(), section=n.metadata.get("section", ""))
                    for ref, n in zip(refs, nodes, strict=True)
                ],
                round=1,
                final_round=True,
                pages_in_scope=len(self._doc_nodes(item.doc)),
            )
        )
        return EngineOutput(
            QuestionRun(
                engine=self.name,
                qid=item.qid,
                reads=[refs],
                answer=feedback.answer,
                status=feedback.status,
                stop_reason="static",
                llm_calls=feedback.llm_calls,
                seconds=time.perf_counter() - start,
            )
        )


def build_engines(
    names: list[str],
    *,
    base: DocMemoConfig,
    make_engine: EngineFactory,
    store: PageStore,
) -> Mapping[str, EvalEngine]:
    """The requested engines by name, ``docmemo`` first (equal-budget engines need its pages read)."""
    unknown = [n for n in names if n not in ENGINE_NAMES]
    if unknown:
        raise ValueError(
            f"unknown engine(s) {', '.join(unknown)}; choose from {', '.join(ENGINE_NAMES)}"
        )
    ordered = list(
        dict.fromkeys(["docmemo", *names] if set(names) & set(BUDGET_ENGINES) else names)
    )
    engines: dict[str, EvalEngine] = {}
    for name in ordered:
        if name == "static":
            engines[name] = DocMemoEvalEngine(name, base, make_engine, equal_budget=True)
        elif name == "llamaindex-topk":
            engines[name] = LlamaIndexTopKEngine(store)
        else:
            engines[name] = DocMemoEvalEngine(name, config_for(name, base), make_engine)
    return engines
