"""Document cards kept on the document records (``store/points.py``), on both backends.

Each document's card is written with its version, read and searched under the same scope as
its pages (tenant, ACL, ``where``), replaced by a new version, deleted with the document, kept
by recovery; page reads never return it. Stores have lexical vectors (BM25 of the page and card
texts, as the default encoder writes them) beside the word encoder's dense ones.
"""

from __future__ import annotations

from collections.abc import Iterator, Sequence
from dataclasses import replace
from pathlib import Path
from typing import Any

import pytest
from fakes_docmemo import BagOfWordsEncoder
from stores_docmemo import add_document, word_embeddings

from llama_index_docmemo.encoders.base import Bm25Lexical
from llama_index_docmemo.evaluation.caching import MemoStore
from llama_index_docmemo.levers.document_stage import naming_keys
from llama_index_docmemo.memory.schema import DocumentSchema
from llama_index_docmemo.store import EdgePageStore, PageStore, QdrantClientPageStore
from llama_index_docmemo.store import operations as op
from llama_index_docmemo.store.points import (
    StoredCard,
    document_point_id,
    journal_point,
    tenant_key,
)
from llama_index_docmemo.store.scope import PageFilter
from llama_index_docmemo.types import (
    FieldGroup,
    FieldMatch,
    PageEmbedding,
    PageRecord,
    QueryEmbedding,
)

BACKENDS = ("edge", "client")
ENCODER = BagOfWordsEncoder()
LEXICAL = Bm25Lexical()

COVERS = {
    "PEPSICO_2022_10K.pdf": ["PepsiCo Inc. Form 10-K annual report fiscal 2022", "Net revenue"],
    "PEPSICO_2021_10K.pdf": ["PepsiCo Inc. Form 10-K annual report fiscal 2021", "Net revenue"],
    "3M_2018_10K.pdf": ["3M Company Form 10-K annual report fiscal 2018", "Capital spending"],
    "a1b2c3d4.pdf": ["Boeing Company quarterly report 10-Q 2023", "Deliveries"],
}


def open_sparse(backend: str, folder: Path) -> PageStore:
    settings = {"encoder_name": ENCODER.name, "dim": ENCODER.dim, "sparse": True}
    if backend == "edge":
        return EdgePageStore(folder / "edge", **settings)  # type: ignore[arg-type]
    return QdrantClientPageStore(location=":memory:", **settings)  # type: ignore[arg-type]


def sparse_embeddings(records: Sequence[PageRecord]) -> list[PageEmbedding]:
    """The word encoder's embeddings with each page's BM25 vector (a sparse store's pages)."""
    return [
        replace(e, sparse=LEXICAL.embed_page(r.text))
        for e, r in zip(word_embeddings(records), records, strict=True)
    ]


def add(store: PageStore, doc_id: str, texts: Sequence[str], **fields: Any) -> DocumentSchema:
    return add_document(store, doc_id, texts, embed=sparse_embeddings, **fields)


def query(text: str) -> QueryEmbedding:
    return replace(ENCODER.encode_query(text), sparse=LEXICAL.embed_query(text))


@pytest.fixture(params=BACKENDS)
def store(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[PageStore]:
    opened = open_sparse(request.param, tmp_path)
    try:
        for doc_id, texts in COVERS.items():
            add(opened, doc_id, texts)
        yield opened
    finally:
        opened.close()


def keys(*words: str) -> set[str]:
    """The match keys a card stores for ``words``."""
    return set().union(*(naming_keys(w) for w in words))


def found(cards: Sequence[tuple[StoredCard, float]]) -> list[str]:
    return [card.schema.doc_id for card, _ in cards]


def test_each_document_has_its_card_with_head_and_body_keys(store: PageStore) -> None:
    cards = {c.schema.doc_id: c.card for c in store.list_cards(PageFilter())}
    assert sorted(cards) == sorted(COVERS)
    pepsi = cards["PEPSICO_2022_10K.pdf"]
    assert keys("PepsiCo", "2022", "Annual") <= pepsi.head  # the file name, "10K" as its form
    assert keys("Company", "Boeing") <= cards["a1b2c3d4.pdf"].body  # the cover only
    assert not keys("Boeing") & cards["a1b2c3d4.pdf"].head
    assert not keys("revenue") & pepsi.keys  # page 2 is not on the card


def test_card_search_finds_the_named_document_by_its_words(store: PageStore) -> None:
    best = store.search_cards(query("3M capital 2018"), limit=2, page_filter=PageFilter())
    assert found(best)[0] == "3M_2018_10K.pdf"
    boeing = store.search_cards(query("Boeing deliveries"), limit=1, page_filter=PageFilter())
    assert found(boeing) == ["a1b2c3d4.pdf"]  # the hashed name: its cover names it


def test_card_search_is_the_same_on_both_backends(tmp_path: Path) -> None:
    rankings = []
    for backend in BACKENDS:
        with open_sparse(backend, tmp_path / backend) as opened:
            for doc_id, texts in COVERS.items():
                add(opened, doc_id, texts)
            for text in ("PepsiCo 2021 annual report", "3M 2018", "quarterly Boeing"):
                hits = opened.search_cards(query(text), limit=4, page_filter=PageFilter())
                rankings.append(
                    [
                        (d, round(s, 4))
                        for d, s in zip(found(hits), [s for _, s in hits], strict=True)
                    ]
                )
    half = len(rankings) // 2
    assert rankings[:half] == rankings[half:]
    assert all(len(r) == 4 for r in rankings)


def test_page_reads_never_return_a_card(store: PageStore) -> None:
    hits = store.search(query("PepsiCo 10-K 2022 annual"), limit=50, page_filter=PageFilter())
    assert len(hits) == sum(len(t) for t in COVERS.values())  # every page, no record
    assert all(h.record.page >= 1 for h in hits)
    assert store.count_pages(PageFilter()) == len(hits)
    assert {d.doc_id for d in store.list_documents(PageFilter())} == set(COVERS)


def test_cards_respect_tenant_and_acl(tmp_path: Path) -> None:
    for backend in BACKENDS:
        with open_sparse(backend, tmp_path / backend) as opened:
            add(opened, "report.pdf", ["Acme Corp annual report 2023"], tenant="acme")
            add(opened, "report.pdf", ["Globex annual report 2023"], tenant="globex")
            add(opened, "board.pdf", ["Acme board minutes 2023"], tenant="acme", acl=["board"])
            acme = PageFilter(tenant="acme")
            text = query("Globex Acme annual report board minutes 2023")
            hits = opened.search_cards(text, limit=10, page_filter=acme)
            assert [(c.schema.doc_id, c.schema.tenant) for c, _ in hits] == [("report.pdf", "acme")]
            assert not keys("Globex") & hits[0][0].card.keys
            board = PageFilter(tenant="acme", acl_groups=("board",))
            assert sorted(found(opened.search_cards(text, limit=10, page_filter=board))) == [
                "board.pdf",
                "report.pdf",
            ]
            listed = opened.list_cards(PageFilter(tenant="globex"))
            assert [(c.schema.doc_id, keys("Globex") <= c.card.keys) for c in listed] == [
                ("report.pdf", True)
            ]
            assert opened.list_cards(None) and len(opened.list_cards(None)) == 3  # the owner
            assert opened.search_cards(text, limit=5, page_filter=PageFilter(doc_ids=())) == []
            where = FieldGroup("and", (FieldMatch("doc_id", "eq", "board.pdf"),))
            scoped = replace(board, where=where)
            assert found(opened.search_cards(text, limit=5, page_filter=scoped)) == ["board.pdf"]


def test_a_new_version_replaces_the_card_and_deleting_removes_it(store: PageStore) -> None:
    add(store, "3M_2018_10K.pdf", ["Minnesota Mining restated report", "x"], version="v2")
    (card,) = [c for c in store.list_cards(PageFilter()) if c.schema.doc_id == "3M_2018_10K.pdf"]
    assert card.schema.doc_version == "v2"
    assert keys("Minnesota") <= card.card.keys and not keys("Company") & card.card.keys
    hits = store.search_cards(query("Minnesota Mining"), limit=1, page_filter=PageFilter())
    assert [(c.schema.doc_id, c.schema.doc_version) for c, _ in hits] == [("3M_2018_10K.pdf", "v2")]
    assert store.delete_document("3M_2018_10K.pdf")
    assert "3M_2018_10K.pdf" not in {c.schema.doc_id for c in store.list_cards(PageFilter())}
    hits = store.search_cards(query("3M Minnesota 2018"), limit=5, page_filter=PageFilter())
    assert "3M_2018_10K.pdf" not in found(hits)


def test_recovery_keeps_the_cards_vectors(store: PageStore) -> None:
    doc_key = document_point_id(None, "a1b2c3d4.pdf")
    record = store._execute(op.Retrieve(doc_key, tenant_key(None)))  # type: ignore[attr-defined]
    # a crash after the commit point, before the journal note was removed
    store._execute(op.Upsert([journal_point(doc_key, record["revision"], tenant_key(None))]))  # type: ignore[attr-defined]
    assert store.recover() == 1
    dense_only = replace(query("Boeing deliveries quarterly"), sparse=None)
    best = store.search_cards(dense_only, limit=1, page_filter=PageFilter())
    assert found(best) == ["a1b2c3d4.pdf"]
    assert keys("Boeing") <= best[0][0].card.keys


class _NoCards(MemoStore):
    """A store that keeps no cards: the ``PageStore`` default makes them when asked."""

    list_cards = PageStore.list_cards


def test_a_store_without_cards_makes_the_same_cards_from_schemas_and_first_pages(
    store: PageStore,
) -> None:
    scope = PageFilter()
    assert _NoCards(store).list_cards(scope) == store.list_cards(scope)
    assert _NoCards(store).list_cards(PageFilter(doc_ids=())) == []
