"""``max_llm_calls`` holds with every stage that asks the LLM: each reranking and each reading is
charged before it is made (a reranking never takes the call a reading needs)."""

from __future__ import annotations

import asyncio
from collections.abc import Iterator

import pytest
from fakes_docmemo import BagOfWordsEncoder, NativeScriptedLLM
from stores_docmemo import StoreMaker

from llama_index_docmemo.config import DocMemoConfig
from llama_index_docmemo.query_engine import DocMemoQueryEngine
from llama_index_docmemo.store import PageStore
from llama_index_docmemo.store.scope import PageFilter

DOC = "report.pdf"


@pytest.fixture(scope="module")
def store(store_maker: StoreMaker) -> Iterator[PageStore]:
    """Forty pages alike (on Edge: what is read here is not the store's concern, so one backend)."""
    yield from store_maker.with_document(
        DOC, [f"page {i} about revenue and costs" for i in range(1, 41)]
    )


def engine(store: PageStore, llm: NativeScriptedLLM, cap: int) -> DocMemoQueryEngine:
    return DocMemoQueryEngine.from_defaults(
        store=store,
        encoder=BagOfWordsEncoder(),
        llm=llm,
        config=DocMemoConfig(
            rounds=6,
            pages_per_round=2,
            candidates=20,
            llm_rerank=True,
            max_llm_calls=cap,
            adaptive_granularity=False,
        ),
        page_filter=PageFilter(doc_ids=(DOC,)),
        evidence_images=False,
    )


@pytest.mark.parametrize("cap", [1, 2, 3, 4, 5, 6, 7])
def test_reranking_and_reading_stay_within_the_cap(store: PageStore, cap: int) -> None:
    llm = NativeScriptedLLM(default="{}")  # every reply: no labels, the query goes on
    trace = engine(store, llm, cap).run("revenue and costs").trace
    assert len(llm.calls) == trace.llm_calls <= cap
    kinds = ["reader" if k["schema_of"] == "FeedbackReply" else "reranker" for _, k in llm.calls]
    assert kinds[-1] == "reader"  # a reranking never spends the call its round's reading needs
    assert kinds.count("reader") == (cap + 1) // 2  # rerank + read a round, the last: read


def test_the_async_path_keeps_the_same_cap(store: PageStore) -> None:
    llm = NativeScriptedLLM(default="{}")
    trace = asyncio.run(engine(store, llm, 5).arun("revenue and costs")).trace
    assert len(llm.calls) == trace.llm_calls == 5
