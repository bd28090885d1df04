"""Cards of real PDFs written by ``DocumentIndexer``, and a store written before cards (layout 3)
migrated in place when opened, on both backends."""

from __future__ import annotations

from dataclasses import replace
from pathlib import Path

import pytest
from safety_worker import HashEncoder, open_hash_store, write_pdf

from llama_index_docmemo.encoders.base import Bm25Lexical
from llama_index_docmemo.indexing import DocumentIndexer
from llama_index_docmemo.levers.document_stage import naming_keys
from llama_index_docmemo.store import operations as op
from llama_index_docmemo.store.points import (
    CARD,
    LAYOUT_VERSION,
    STORE_POINT_ID,
    PointData,
    document_payload,
    document_point_id,
)
from llama_index_docmemo.store.scope import PageFilter

ENCODER = HashEncoder()
TENANT = "acme"
SCOPE = PageFilter(tenant=TENANT)


@pytest.fixture
def filings(tmp_path: Path) -> Path:
    root = tmp_path / "filings"
    write_pdf(root / "f1.pdf", ["Initech Corporation Form 10-K 2019", "Revenue was 10 million."])
    write_pdf(root / "f2.pdf", ["Globex Corporation Form 10-Q 2021", "Revenue was 12 million."])
    return root


def cards_of(store: object) -> dict[str, frozenset[str]]:
    return {c.schema.doc_id: c.card.keys for c in store.list_cards(SCOPE)}  # type: ignore[attr-defined]


@pytest.mark.parametrize("backend", ["edge", "client"])
def test_a_layout_3_store_gets_cards_on_open(
    filings: Path, tmp_path: Path, backend: str, caplog: pytest.LogCaptureFixture
) -> None:
    path = tmp_path / "old"
    with open_hash_store(backend, path) as store:
        DocumentIndexer(store, ENCODER, ocr=False).index_paths([filings], tenant=TENANT)
        written = cards_of(store)
        assert naming_keys("Initech") <= written["f1.pdf"]
        assert not naming_keys("Globex") & written["f1.pdf"]
        # as layout 3 wrote it: records without a card or vectors, the store record says 3
        store._execute(  # type: ignore[attr-defined]
            op.Upsert([PointData(STORE_POINT_ID, payload=store._meta.payload(3))])  # type: ignore[attr-defined]
        )
        for schema in store.list_documents(SCOPE):
            old = document_payload(schema)
            store._execute(op.Upsert([PointData(old["doc_key"], payload=old)]))  # type: ignore[attr-defined]
        with pytest.raises(Exception, match="has no card: the store was not migrated"):
            store.list_cards(SCOPE)
    with open_hash_store(backend, path) as store:
        assert "from store layout 3 to 4" in caplog.text
        assert cards_of(store) == written  # the same card a write makes
        # a migrated card has its BM25 vector (Qdrant's, whatever the encoder), not the dense
        query = replace(ENCODER.encode_query("x"), sparse=Bm25Lexical().embed_query("Globex"))
        hits = store.search_cards(query, limit=1, page_filter=SCOPE)  # type: ignore[attr-defined]
        assert [c.schema.doc_id for c, _ in hits] == ["f2.pdf"]  # by its words (BM25)
        meta = store._execute(op.Retrieve(STORE_POINT_ID))  # type: ignore[attr-defined]
        assert meta["layout"] == LAYOUT_VERSION
        record = store._execute(op.Retrieve(document_point_id(TENANT, "f1.pdf"), TENANT))  # type: ignore[attr-defined]
        assert set(record[CARD]) == {"head", "body"}
