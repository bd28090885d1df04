"""The loop over a scope of several documents: beliefs over documents choose where a round reads,
the reader's labels move them, the levers search inside the documents; one document in scope is
exactly the per-document loop."""

from __future__ import annotations

from collections.abc import Callable, Iterator
from typing import Any

import pytest
from fakes_docmemo import BagOfWordsEncoder, GoldReader
from stores_docmemo import StoreCalls, StoreMaker, add_document

from llama_index_docmemo.config import DocMemoConfig
from llama_index_docmemo.query_engine import DocMemoQueryEngine
from llama_index_docmemo.store import PageStore
from llama_index_docmemo.store.scope import PageFilter
from llama_index_docmemo.types import PageRef

FILLER = "quarterly revenue table with operating income and net sales by segment"


@pytest.fixture(scope="module")
def stores(store_maker: StoreMaker, backend: str) -> Iterator[Callable[[int], PageStore]]:
    """The first ``n`` of three companies' reports, one store a count, made once a module."""
    made: dict[int, PageStore] = {}

    def store(n_docs: int = 3) -> PageStore:
        if n_docs not in made:
            made[n_docs] = store_maker.open(backend)
            names = ["ACME_2023_10K.pdf", "GLOBEX_2023_10K.pdf", "INITECH_2023_10K.pdf"]
            for number, name in enumerate(names[:n_docs]):
                company = name.split("_")[0].title()
                texts = [f"{company} annual report 2023 cover"] + [
                    f"{FILLER} page {p} of {company}" for p in range(2, 41)
                ]
                texts[19 + number] = f"{company} capital expenditure was 120 million {FILLER}"
                add_document(made[n_docs], name, texts)
        return made[n_docs]

    yield store
    for opened in made.values():
        opened.close()


def _trace(result: Any) -> dict[str, Any]:
    """The trace without timings, its scores to float32's precision (a store's searches of
    different depths may sum a page's MaxSim in another order)."""

    def strip(value: Any) -> Any:
        if isinstance(value, dict):
            return {k: strip(v) for k, v in value.items() if k != "seconds"}
        if isinstance(value, list):
            return [strip(v) for v in value]
        if isinstance(value, float):
            return round(value, 6)
        return value

    return strip(result.trace.model_dump(mode="json"))


def _run(
    store: PageStore,
    gold: set[PageRef],
    scope: PageFilter | None = None,
    question: str = "What was Acme's capital expenditure in 2023?",
    **settings: Any,
):  # noqa: ANN202
    config = DocMemoConfig(**{"rounds": 3, "pages_per_round": 3, **settings})
    engine = DocMemoQueryEngine.from_defaults(
        store=store,
        encoder=BagOfWordsEncoder(),
        reader=GoldReader(gold),
        config=config,
        evidence_images=False,
    )
    return engine.run(question, page_filter=scope)


GOLD = {PageRef("ACME_2023_10K.pdf", 20), PageRef("ACME_2023_10K.pdf", 99)}  # never answered


@pytest.mark.parametrize(
    ("n_docs", "scope"),
    [(3, PageFilter(doc_ids=("ACME_2023_10K.pdf",))), (1, None)],
    ids=["one-document-scope", "one-document-store"],
)
def test_one_document_in_scope_is_the_per_document_loop(
    stores, n_docs: int, scope: PageFilter | None
) -> None:
    with_beliefs = _run(stores(n_docs), GOLD, scope)
    without = _run(stores(n_docs), GOLD, scope, document_beliefs=False)
    assert _trace(with_beliefs) == _trace(without)
    assert all(not r.documents for r in with_beliefs.trace.rounds)


def test_the_named_document_gets_the_round_and_its_labels_hold_it(stores) -> None:
    result = _run(stores(), GOLD)
    rounds = result.trace.rounds
    assert rounds[0].documents[0].doc_id == "ACME_2023_10K.pdf"
    assert {p.doc_id for r in rounds for p in r.selected} == {"ACME_2023_10K.pdf"}
    assert PageRef("ACME_2023_10K.pdf", 20) in {
        PageRef(p.doc_id, p.page) for p in rounds[0].selected
    }
    best = rounds[0].documents[0]  # after round 1's update: the prior Beta(5, 1), p20 useful,
    assert (best.alpha, best.beta) == pytest.approx((6.0, 1.06))  # two pages irrelevant
    assert rounds[0].documents[1].alpha < 2.0 and rounds[0].documents[1].pages == 0


def test_without_document_beliefs_the_rounds_scatter_over_the_store(stores) -> None:
    result = _run(stores(), GOLD, document_beliefs=False)
    assert len({p.doc_id for r in result.trace.rounds for p in r.selected}) > 1


def test_two_documents_close_in_belief_share_a_round_until_one_is_useful(stores) -> None:
    gold = {PageRef("GLOBEX_2023_10K.pdf", 21), PageRef("GLOBEX_2023_10K.pdf", 99)}
    result = _run(
        stores(2),
        gold,
        question="What was the capital expenditure in 2023?",  # names no company
        card_weight=0.0,
        card_lead=0.0,  # the beliefs choose even though the cards stand level
        document_prior_strength=1.0,
        pages_per_round=4,
    )
    rounds = result.trace.rounds
    assert {d.doc_id: d.pages for d in rounds[0].documents} == {
        "ACME_2023_10K.pdf": 2,
        "GLOBEX_2023_10K.pdf": 2,
    }
    assert PageRef("GLOBEX_2023_10K.pdf", 21) in {
        PageRef(p.doc_id, p.page) for p in rounds[0].selected
    }
    assert {d.doc_id: d.pages for d in rounds[1].documents} == {  # its useful page lifted it
        "GLOBEX_2023_10K.pdf": 4,
        "ACME_2023_10K.pdf": 0,
    }


def test_a_question_naming_no_document_apart_is_read_over_the_whole_store(stores) -> None:
    question = "What was the capital expenditure in 2023?"  # every report's cover says 2023
    gold = {PageRef("GLOBEX_2023_10K.pdf", 21), PageRef("GLOBEX_2023_10K.pdf", 99)}
    level = _run(stores(), gold, question=question)
    assert all(not r.documents for r in level.trace.rounds)
    assert _trace(level) == _trace(_run(stores(), gold, question=question, document_beliefs=False))
    named = _run(stores(), gold, question="What was Globex's capital expenditure in 2023?")
    assert named.trace.rounds[0].documents[0].doc_id == "GLOBEX_2023_10K.pdf"


def test_the_levers_search_inside_the_documents_never_the_whole_store(stores, monkeypatch) -> None:
    store = stores()
    calls = StoreCalls(monkeypatch, store, "search")
    _run(store, GOLD, statement_weight=1.0)
    scopes = [kwargs["page_filter"].doc_ids for kwargs, _ in calls.calls["search"]]
    whole = [s for s in scopes if s is None]
    assert len(whole) == 1  # the question's one search over the store (the document stage)
    assert all(s == ("ACME_2023_10K.pdf",) for s in scopes if s is not None)
    assert len(scopes) > 3  # the document's own search each round plus the statements


async def test_the_async_loop_weighs_documents_as_the_sync_one(stores) -> None:
    config = DocMemoConfig(rounds=3, pages_per_round=3)
    engine = DocMemoQueryEngine.from_defaults(
        store=stores(),
        encoder=BagOfWordsEncoder(),
        reader=GoldReader(GOLD),
        config=config,
        evidence_images=False,
    )
    question = "What was Acme's capital expenditure in 2023?"
    sync = engine.run(question)
    asynchronous = await engine.arun(question)
    assert _trace(asynchronous) == _trace(sync)
    assert asynchronous.trace.rounds[0].documents[0].doc_id == "ACME_2023_10K.pdf"


def test_the_document_stage_reads_schemas_and_cards_in_one_request(stores, monkeypatch) -> None:
    """The cards are the store's (written with each document at ingest): round 1 reads the
    candidates' schemas and cards together, one request, and no first pages."""
    store = stores()
    calls = StoreCalls(monkeypatch, store, "list_cards", "list_documents", "get_pages")
    result = _run(store, GOLD, rounds=1)
    assert result.trace.rounds[0].documents[0].doc_id == "ACME_2023_10K.pdf"
    ((kwargs, stored),) = calls.calls["list_cards"]
    assert sorted(s.schema.doc_id for s in stored) == [
        "ACME_2023_10K.pdf",
        "GLOBEX_2023_10K.pdf",
        "INITECH_2023_10K.pdf",
    ]
    assert calls.count("list_documents") == 0
    read = {r.ref for _, records in calls.calls["get_pages"] for r in records}
    assert not read & {PageRef("GLOBEX_2023_10K.pdf", 1), PageRef("INITECH_2023_10K.pdf", 1)}
