"""The loop over a scope of several documents: beliefs over documents choose where a round reads,
the reader's labels move them, the levers search inside the documents; one document in scope is
exactly the per-document loop."""

from __future__ import annotations

from typing import Any

import pytest
from fakes_docmemo import BagOfWordsEncoder, GoldReasoner, MemoryPageStore

from llama_index_docmemo.config import DocMemoConfig
from llama_index_docmemo.query_engine import DocMemoQueryEngine
from llama_index_docmemo.store.scope import PageFilter
from llama_index_docmemo.types import PageRef

FILLER = "quarterly revenue table with operating income and net sales by segment"


class RecordingStore(MemoryPageStore):
    """The in-memory store, recording the scope of each search."""

    def __init__(self) -> None:
        super().__init__()
        self.scopes: list[tuple[str, ...] | None] = []

    def search(self, query, *, limit, page_filter=None, prefetch_limit=None):  # noqa: ANN001, ANN201
        self.scopes.append(page_filter.doc_ids if page_filter is not None else None)
        return super().search(
            query, limit=limit, page_filter=page_filter, prefetch_limit=prefetch_limit
        )


def _store(n_docs: int = 3) -> RecordingStore:
    store = RecordingStore()
    names = ["ACME_2023_10K.pdf", "GLOBEX_2023_10K.pdf", "INITECH_2023_10K.pdf"][:n_docs]
    for number, name in enumerate(names):
        company = name.split("_")[0].title()
        texts = [f"{company} annual report 2023 cover"] + [
            f"{FILLER} page {p} of {company}" for p in range(2, 41)
        ]
        texts[19 + number] = f"{company} capital expenditure was 120 million {FILLER}"
        store.add(name, texts)
    return store


def _trace(result: Any) -> dict[str, Any]:
    def strip(value: Any) -> Any:
        if isinstance(value, dict):
            return {k: strip(v) for k, v in value.items() if k != "seconds"}
        if isinstance(value, list):
            return [strip(v) for v in value]
        return value

    return strip(result.trace.model_dump(mode="json"))


def _run(
    store: RecordingStore,
    gold: set[PageRef],
    scope: PageFilter | None = None,
    question: str = "What was Acme's capital expenditure in 2023?",
    **settings: Any,
):  # noqa: ANN202
    config = DocMemoConfig(**{"rounds": 3, "pages_per_round": 3, **settings})
    engine = DocMemoQueryEngine.from_defaults(
        store=store,
        encoder=BagOfWordsEncoder(),
        reasoner=GoldReasoner(gold),
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
    n_docs: int, scope: PageFilter | None
) -> None:
    with_beliefs = _run(_store(n_docs), GOLD, scope)
    without = _run(_store(n_docs), GOLD, scope, document_beliefs=False)
    assert _trace(with_beliefs) == _trace(without)
    assert all(not r.documents for r in with_beliefs.trace.rounds)


def test_the_named_document_gets_the_round_and_its_labels_hold_it() -> None:
    store = _store()
    result = _run(store, GOLD)
    rounds = result.trace.rounds
    assert rounds[0].documents[0].doc == "ACME_2023_10K.pdf"
    assert {p.doc for r in rounds for p in r.selected} == {"ACME_2023_10K.pdf"}
    assert PageRef("ACME_2023_10K.pdf", 20) in {PageRef(p.doc, p.page) for p in rounds[0].selected}
    best = rounds[0].documents[0]  # after round 1's update: the prior Beta(5, 1), p20 useful,
    assert (best.alpha, best.beta) == pytest.approx((6.0, 1.06))  # two pages irrelevant
    assert rounds[0].documents[1].alpha < 2.0 and rounds[0].documents[1].pages == 0


def test_without_document_beliefs_the_rounds_scatter_over_the_store() -> None:
    result = _run(_store(), GOLD, document_beliefs=False)
    assert len({p.doc for r in result.trace.rounds for p in r.selected}) > 1


def test_two_documents_close_in_belief_share_a_round_until_one_is_useful() -> None:
    gold = {PageRef("GLOBEX_2023_10K.pdf", 21), PageRef("GLOBEX_2023_10K.pdf", 99)}
    result = _run(
        _store(2),
        gold,
        question="What was the capital expenditure in 2023?",  # names no company
        card_weight=0.0,
        document_prior_strength=1.0,
        pages_per_round=4,
    )
    rounds = result.trace.rounds
    assert {d.doc: d.pages for d in rounds[0].documents} == {
        "ACME_2023_10K.pdf": 2,
        "GLOBEX_2023_10K.pdf": 2,
    }
    assert PageRef("GLOBEX_2023_10K.pdf", 21) in {
        PageRef(p.doc, p.page) for p in rounds[0].selected
    }
    assert {d.doc: d.pages for d in rounds[1].documents} == {  # its useful page lifted it
        "GLOBEX_2023_10K.pdf": 4,
        "ACME_2023_10K.pdf": 0,
    }


def test_the_levers_search_inside_the_documents_never_the_whole_store() -> None:
    store = _store()
    _run(store, GOLD, statement_weight=1.0)
    whole = [s for s in store.scopes if s is None]
    assert len(whole) == 1  # the question's one search over the store (the document stage)
    assert all(s == ("ACME_2023_10K.pdf",) for s in store.scopes if s is not None)
    assert len(store.scopes) > 3  # the document's own search each round plus the statements


async def test_the_async_loop_weighs_documents_as_the_sync_one() -> None:
    config = DocMemoConfig(rounds=3, pages_per_round=3)
    engine = DocMemoQueryEngine.from_defaults(
        store=_store(),
        encoder=BagOfWordsEncoder(),
        reasoner=GoldReasoner(GOLD),
        config=config,
        evidence_images=False,
    )
    question = "What was Acme's capital expenditure in 2023?"
    sync = engine.run(question)
    asynchronous = await engine.arun(question)
    assert _trace(asynchronous) == _trace(sync)
    assert asynchronous.trace.rounds[0].documents[0].doc == "ACME_2023_10K.pdf"
