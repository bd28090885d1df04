"""The levers inside the loop, on both real stores: each changes later rounds only, as switched."""

from __future__ import annotations

from collections.abc import Iterator

import pytest
from fakes_docmemo import BagOfWordsEncoder, GoldReader
from stores_docmemo import StoreCalls, StoreMaker, add_document

from llama_index_docmemo.config import DocMemoConfig
from llama_index_docmemo.evaluation.configs import LEVERS_OFF
from llama_index_docmemo.query_engine import DocMemoQueryEngine
from llama_index_docmemo.store import PageStore
from llama_index_docmemo.store.scope import PageFilter
from llama_index_docmemo.types import PageRef

DOC = "report.pdf"


def pages() -> list[str]:
    texts = [f"page {i} about office plants and weather" for i in range(1, 61)]
    texts[2] = "revenue by region: see Table 7 for the breakdown"
    texts[40] = "Table 7: zebra quokka breakdown by region"
    texts[20] = "zebra quokka numbers continue here"
    texts[10] = "headcount in 2019 was 120 employees"
    texts[50] = "headcount in 2021 was 150"
    texts[30] = "headcount in 2019 by site"
    texts[31] = "headcount in 2019 by function"
    return texts


@pytest.fixture(scope="module")
def store(store_maker: StoreMaker, backend: str) -> Iterator[PageStore]:
    """The report, shared by the tests that only query it."""
    shared = store_maker.open(backend)
    add_document(shared, DOC, pages())
    yield shared
    shared.close()


@pytest.fixture
def calls(store: PageStore, monkeypatch: pytest.MonkeyPatch) -> StoreCalls:
    """The shared store's searches, depth asks and schema look-ups during the test."""
    return StoreCalls(monkeypatch, store, "search", "search_depth", "get_schema")


def engine_for(store, gold, **cfg) -> DocMemoQueryEngine:
    settings = {**LEVERS_OFF, "pages_per_round": 3, "candidates": 5, "rounds": 3, **cfg}
    config = DocMemoConfig(**settings)
    return DocMemoQueryEngine.from_defaults(
        store=store,
        encoder=BagOfWordsEncoder(),
        reader=GoldReader(set(gold)),
        config=config,
        page_filter=PageFilter(doc_ids=(DOC,)),
        evidence_images=False,
    )


def run(store, gold, question, **cfg):
    trace = engine_for(store, gold, **cfg).run(question).trace
    return [
        [PageRef(p.doc_id, p.page) for p in trace.pages_read if p.round == r] for r in (1, 2, 3)
    ]


def test_reference_propagation_reads_the_cited_table(store: PageStore) -> None:
    gold = {PageRef(DOC, 3), PageRef(DOC, 41)}
    question = "what revenue"
    off = run(store, gold, question)
    on = run(store, gold, question, reference_weight=2.0)
    assert off[0] == on[0] and PageRef(DOC, 3) in on[0]
    assert PageRef(DOC, 41) in on[1]
    assert PageRef(DOC, 41) not in off[0] + off[1]


def test_levers_off_search_only_the_question_and_build_no_graphs(store, calls) -> None:
    """Switched off, no lever searches or fetches: one store search a round, no reference
    graph (a lever that ignored its switch would add searches or schema look-ups)."""
    question = "revenue by region and headcount in 2019 and 2021"  # names a statement's metric
    gold = {PageRef(DOC, 59)}  # never found: every round runs
    run(store, gold, question)
    assert calls.count("search") == 3 and calls.count("get_schema") == 0
    calls.clear()
    run(store, gold, question, statement_weight=0.7, reference_weight=2.0)
    assert calls.count("search") == 4  # the income statement's search, once, from round 2 on


def test_pages_the_question_names_are_read_from_round_two(open_store) -> None:
    store = open_store()
    texts = pages()
    texts[13] = "Figure 9: a chart of zebra counts"
    add_document(store, DOC, texts)
    question = "In Figure 9 and on the last page, how many office plants?"
    unseen = {PageRef(DOC, 59)}  # never found: the loop runs every round
    off = run(store, unseen, question)
    on = run(store, unseen, question, question_reference_weight=3.0)
    assert on[0] == off[0]
    assert {PageRef(DOC, 14), PageRef(DOC, 60)} <= set(on[1])
    assert not {PageRef(DOC, 14), PageRef(DOC, 60)} & set(off[0] + off[1] + off[2])


QUESTION_WITH_STATEMENT = "revenue by region and headcount in 2019 and 2021"


@pytest.mark.parametrize("driver", ["sync", "async"])
async def test_a_query_sizes_its_searches_once(store, calls, driver: str) -> None:
    """Every search of a query, the statement's too, goes as deep as one ask of the store
    says (on a server each ask is a request: one a search would add a round trip each)."""
    engine = engine_for(store, {PageRef(DOC, 59)}, statement_weight=0.7)  # every round runs
    if driver == "sync":
        engine.run(QUESTION_WITH_STATEMENT)
    else:
        await engine.arun(QUESTION_WITH_STATEMENT)
    ((_, depth),) = calls.calls["search_depth"]
    prefetches = [kwargs["prefetch_limit"] for kwargs, _ in calls.calls["search"]]
    assert prefetches == [depth] * 4  # 3 rounds and the statement's search


def test_a_set_prefetch_asks_the_store_nothing(store, calls) -> None:
    run(store, {PageRef(DOC, 59)}, QUESTION_WITH_STATEMENT, statement_weight=0.7, prefetch=50)
    prefetches = [kwargs["prefetch_limit"] for kwargs, _ in calls.calls["search"]]
    assert calls.count("search_depth") == 0 and prefetches == [50] * 4
