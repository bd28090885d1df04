"""The rerank stage runs only when it can change which pages a round reads."""

from __future__ import annotations

from fakes_docmemo import BagOfWordsEncoder, GoldReader
from llama_index.core.postprocessor.types import BaseNodePostprocessor
from llama_index.core.schema import NodeWithScore, QueryBundle
from stores_docmemo import add_document, client_store

from llama_index_docmemo.config import DocMemoConfig
from llama_index_docmemo.loop.reading import rerank_can_change
from llama_index_docmemo.query_engine import DocMemoQueryEngine
from llama_index_docmemo.store.scope import PageFilter
from llama_index_docmemo.types import PageRef

DOC = "report.pdf"


class Reversing(BaseNodePostprocessor):
    """Reverses the candidates and counts its calls (a stand-in for an LLM reranker)."""

    calls: int = 0

    def _postprocess_nodes(
        self, nodes: list[NodeWithScore], query_bundle: QueryBundle | None = None
    ) -> list[NodeWithScore]:
        self.calls += 1
        return list(reversed(nodes))


def test_the_condition() -> None:
    refs = [PageRef(DOC, n) for n in range(1, 7)]
    assert rerank_can_change(refs, 5)
    assert not rerank_can_change(refs[:5], 5)  # every one is read in any order
    assert not rerank_can_change(refs[:2], 5)
    assert not rerank_can_change(refs, 0)  # the page budget is spent


def rounds_reranked(n_pages: int) -> tuple[int, list[list[int]]]:
    store = client_store()
    add_document(store, DOC, [f"page {i} about revenue and costs" for i in range(1, n_pages + 1)])
    reranker = Reversing()
    engine = DocMemoQueryEngine.from_defaults(
        store=store,
        encoder=BagOfWordsEncoder(),
        reader=GoldReader({PageRef(DOC, n_pages + 1)}),  # never found: every round runs
        config=DocMemoConfig(rounds=3, pages_per_round=3, candidates=10),
        reranker=reranker,
        page_filter=PageFilter(doc_ids=(DOC,)),
        evidence_images=False,
    )
    trace = engine.run("revenue and costs").trace
    read = [[p.page for p in trace.pages_read if p.round == r] for r in (1, 2, 3)]
    return reranker.calls, read


def test_a_round_with_no_more_candidates_than_pages_skips_the_reranker() -> None:
    calls, read = rounds_reranked(7)  # 7 pages, 3 a round: the third round has one left
    assert calls == 2 and [len(r) for r in read] == [3, 3, 1]
    calls, read = rounds_reranked(3)  # one round reads the whole document
    assert calls == 0 and [len(r) for r in read][0] == 3
