"""``file_name`` filters over real nested folders, indexed by DocumentIndexer, on both backends.

``reports/2023/10k.pdf`` and ``reports/2024/10k.pdf`` share a file name: a LlamaIndex filter on
``file_name`` (what page nodes show) finds both, one on ``doc_id`` / ``ref_doc_id`` (the path
relative to the indexed folder) or ``file_path`` (the absolute path) finds one. A store written
before ``file_name`` was stored (layout 2) is migrated in place when opened.
"""

from __future__ import annotations

from dataclasses import replace
from pathlib import Path

import pytest
from llama_index.core.vector_stores.types import MetadataFilter, MetadataFilters
from safety_worker import HashEncoder, open_hash_store, write_pdf

from llama_index_docmemo.indexing import DocumentIndexer
from llama_index_docmemo.nodes import page_node
from llama_index_docmemo.store import operations as op
from llama_index_docmemo.store.points import (
    FILE_NAME,
    LAYOUT_VERSION,
    STORE_POINT_ID,
    PointData,
    document_payload,
)
from llama_index_docmemo.store.scope import PageFilter, kind_filter, to_page_filter

ENCODER = HashEncoder()
TENANT = "acme"


@pytest.fixture
def reports(tmp_path: Path) -> Path:
    root = tmp_path / "reports"
    write_pdf(root / "2023" / "10k.pdf", ["Revenue 2023 was 10 million.", "Risks in 2023."])
    write_pdf(root / "2024" / "10k.pdf", ["Revenue 2024 was 12 million.", "Risks in 2024."])
    write_pdf(root / "2024" / "board" / "minutes.pdf", ["The board met twice."])
    return root


def scope(key: str, value: str) -> PageFilter:
    filters = MetadataFilters(filters=[MetadataFilter(key=key, value=value)])
    return replace(to_page_filter(filters), tenant=TENANT)


@pytest.mark.parametrize("backend", ["edge", "client"])
def test_file_name_filters_match_what_nodes_show(
    reports: Path, tmp_path: Path, backend: str
) -> None:
    with open_hash_store(backend, tmp_path / "store") as store:
        report = DocumentIndexer(store, ENCODER, ocr=False).index_paths([reports], tenant=TENANT)
        assert report.ok and sorted(report.doc_ids.values()) == [
            "2023/10k.pdf",
            "2024/10k.pdf",
            "2024/board/minutes.pdf",
        ]
        query = ENCODER.encode_query("revenue risks board")
        hits = store.search(query, limit=10, page_filter=scope("file_name", "10k.pdf"))
        assert sorted({h.record.doc_id for h in hits}) == ["2023/10k.pdf", "2024/10k.pdf"]
        assert len(hits) == 4
        assert {page_node(h.record).metadata["file_name"] for h in hits} == {"10k.pdf"}
        assert store.count_pages(scope("file_name", "minutes.pdf")) == 1
        for key in ("doc_id", "ref_doc_id"):
            one = store.search(query, limit=10, page_filter=scope(key, "2024/10k.pdf"))
            assert {h.record.doc_id for h in one} == {"2024/10k.pdf"}, key
        absolute = str((reports / "2023" / "10k.pdf").resolve())
        by_path = store.search(query, limit=10, page_filter=scope("file_path", absolute))
        assert {h.record.doc_id for h in by_path} == {"2023/10k.pdf"}
        assert {page_node(h.record).metadata["file_path"] for h in by_path} == {absolute}


@pytest.mark.parametrize("backend", ["edge", "client"])
def test_a_layout_2_store_gets_file_names_on_open(
    reports: Path, tmp_path: Path, backend: str, caplog: pytest.LogCaptureFixture
) -> None:
    path = tmp_path / "old"
    with open_hash_store(backend, path) as store:
        DocumentIndexer(store, ENCODER, ocr=False).index_paths([reports], tenant=TENANT)
        # as layout 2 wrote it: no file_name anywhere, no source on records, record says 2
        store._execute(  # type: ignore[attr-defined]
            op.Upsert([PointData(STORE_POINT_ID, payload=store._meta.payload(2))])  # type: ignore[attr-defined]
        )
        for schema in store.list_documents():
            old = document_payload(schema)
            del old[FILE_NAME], old["source"]
            store._execute(op.Upsert([PointData(old["doc_key"], payload=old)]))  # type: ignore[attr-defined]
        store._execute(op.SetPayload(kind_filter("page"), {FILE_NAME: "unset"}))  # type: ignore[attr-defined]
        assert store.count_pages(scope("file_name", "10k.pdf")) == 0
    with open_hash_store(backend, path) as store:
        assert f"from store layout 2 to {LAYOUT_VERSION}" in caplog.text
        assert store.count_pages(scope("file_name", "10k.pdf")) == 4
        assert [s.doc_id for s in store.list_documents(scope("file_name", "10k.pdf"))] == [
            "2023/10k.pdf",
            "2024/10k.pdf",
        ]
        meta = store._execute(op.Retrieve(STORE_POINT_ID))  # type: ignore[attr-defined]
        assert meta["layout"] == LAYOUT_VERSION
