"""The ``two-stage`` baseline gets the loop's document stage whole: the card match that chooses
the documents, and the card-lead gate that reads a question naming no document apart over the
whole scope."""

from __future__ import annotations

from collections.abc import Iterator

import pytest
from fakes_docmemo import BagOfWordsEncoder
from stores_docmemo import StoreMaker, add_document

from llama_index_docmemo.config import DocMemoConfig
from llama_index_docmemo.evaluation.baselines import TwoStageRanking
from llama_index_docmemo.evaluation.datasets import QAItem
from llama_index_docmemo.store import PageStore

FILLER = "quarterly revenue table with operating income and net sales by segment"
NAMES = ("ACME_2023_10K.pdf", "GLOBEX_2023_10K.pdf", "INITECH_2023_10K.pdf")


@pytest.fixture(scope="module")
def store(store_maker: StoreMaker, backend: str) -> Iterator[PageStore]:
    """Three companies' reports, each with its capital expenditure on its own page."""
    opened = store_maker.open(backend)
    for number, name in enumerate(NAMES):
        company = name.split("_")[0].title()
        texts = [f"{company} annual report 2023 cover"] + [
            f"{FILLER} page {p} of {company}" for p in range(2, 21)
        ]
        texts[9 + number] = f"{company} capital expenditure was 120 million {FILLER}"
        add_document(opened, name, texts)
    yield opened
    opened.close()


def _item(question: str) -> QAItem:
    return QAItem("q", "GLOBEX_2023_10K.pdf", question, "120 million", (11,))


def _two_stage(store: PageStore, **settings: float) -> TwoStageRanking:
    return TwoStageRanking(store, BagOfWordsEncoder(), DocMemoConfig(**settings), "corpus")


def test_a_named_document_is_ranked_first_and_read_alone_first(store) -> None:
    ranking = _two_stage(store)
    item = _item("What was Globex's capital expenditure in 2023?")
    assert ranking.documents(item)[0] == "GLOBEX_2023_10K.pdf"
    first = ranking.records(item, 20)[:19]
    assert {r.doc_id for r in first} == {"GLOBEX_2023_10K.pdf"}


def test_a_question_naming_no_document_apart_is_ranked_over_the_whole_scope(store) -> None:
    item = _item("What was the capital expenditure in 2023?")  # every cover says 2023
    ranking = _two_stage(store)
    assert ranking.documents(item) is None
    flat = [r.ref for r in ranking.records(item, 20)]
    assert flat == [r.ref for r in ranking.ranked(item.question, ranking.filter(item), 20)]
    assert len({ref.doc_id for ref in flat[:6]}) == 3  # the three capex pages lead, one a filing
    gated_off = _two_stage(store, card_lead=0.0)
    assert gated_off.documents(item) is not None
