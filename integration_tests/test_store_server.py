"""The server path of QdrantClientPageStore over real HTTP, sync and async.

No Qdrant server can be installed here, so a small REST stand-in on 127.0.0.1 parses each
request with qdrant-client's own models and answers it from qdrant-client's local mode. The
store therefore sends exactly the HTTP requests it would send a server (collection settings,
payload indexes, nested prefetch queries, IDF corpus, write ordering), with timeouts and
retries exercised by injected failures.
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import numpy as np
import pytest
from qdrant_client import models
from qdrant_standin import FakeQdrant, serve_standin

from llama_index_docmemo.errors import StoreError
from llama_index_docmemo.memory.schema import DocumentSchema
from llama_index_docmemo.store import QdrantClientPageStore
from llama_index_docmemo.types import PageEmbedding, PageFilter, PageRecord, PageRef, SparseVector

DIM = 8


@pytest.fixture
def fake() -> Iterator[tuple[FakeQdrant, str]]:
    with serve_standin() as served:
        yield served


def document(doc_id: str, version: str, tenant: str, seed: int) -> tuple:
    rng = np.random.default_rng(seed)
    schema = DocumentSchema(doc_id=doc_id, doc_version=version, n_pages=3, tenant=tenant)
    records = [
        PageRecord(doc_id, version, page, 3, f"page {page}", f"/d/{doc_id}", tenant=tenant)
        for page in (1, 2, 3)
    ]
    embeddings = [
        PageEmbedding(
            rng.normal(size=(3, DIM)).astype(np.float32),
            rng.normal(size=DIM).astype(np.float32),
            SparseVector((page, 10 + seed), tuple(rng.uniform(0.5, 2, 2).tolist())),
        )
        for page in (1, 2, 3)
    ]
    return schema, records, embeddings


QUERY = PageEmbedding(
    np.random.default_rng(5).normal(size=(2, DIM)).astype(np.float32),
    np.random.default_rng(6).normal(size=DIM).astype(np.float32),
    SparseVector((2, 11), (1.0, 1.0)),
)


def open_remote(url: str, **options: Any) -> QdrantClientPageStore:
    settings: dict[str, Any] = {
        "encoder_name": "enc",
        "dim": DIM,
        "sparse": True,
        "fusion": "dbsf",
        "timeout": 2,
    }
    settings.update(options)
    return QdrantClientPageStore(url=url, **settings)


@pytest.mark.filterwarnings("ignore::UserWarning")
async def test_server_store_matches_local_mode(fake: tuple[FakeQdrant, str]) -> None:
    backend, url = fake
    remote = open_remote(
        url,
        shard_number=2,
        replication_factor=2,
        quantization_config=models.ScalarQuantization(
            scalar=models.ScalarQuantizationConfig(type=models.ScalarType.INT8)
        ),
    )
    local = QdrantClientPageStore(
        location=":memory:", encoder_name="enc", dim=DIM, sparse=True, fusion="dbsf"
    )
    for store in (remote, local):
        store.upsert_document(*document("a.pdf", "v1", "t1", seed=1))
        store.upsert_document(*document("b.pdf", "v1", "t2", seed=2))
        store.upsert_document(*document("a.pdf", "v2", "t1", seed=3))
    for page_filter in (None, PageFilter(tenant="t1")):
        expected = local.search(QUERY, limit=4, page_filter=page_filter)
        for got in (
            remote.search(QUERY, limit=4, page_filter=page_filter),
            await remote.asearch(QUERY, limit=4, page_filter=page_filter),
        ):
            assert [h.record for h in got] == [h.record for h in expected]
            assert [h.score for h in got] == pytest.approx([h.score for h in expected])
    assert remote.document_version("a.pdf", tenant="t1") == "v2" and remote.count_pages() == 6
    assert remote.get_pages([PageRef("b.pdf", 2)]) == local.get_pages([PageRef("b.pdf", 2)])
    assert remote.list_documents() == local.list_documents()

    create = next(
        body
        for method, path, body in backend.requests
        if (method, path.split("?")[0]) == ("PUT", "/collections/docmemo_pages")
    )
    assert create["shard_number"] == 2 and create["replication_factor"] == 2
    assert create["quantization_config"]["scalar"]["type"] == "int8"
    assert create["vectors"]["multi"]["hnsw_config"]["m"] == 0
    assert create["vectors"]["multi"]["multivector_config"]["comparator"] == "max_sim"
    assert create["sparse_vectors"]["lexical"]["modifier"] == "idf"
    indexed = {body["field_name"] for method, path, body in backend.requests if "/index" in path}
    assert indexed == {
        "doc_id",
        "doc_version",
        "tenant",
        "acl",
        "kind",
        "page",
        "tenant_key",
        "access",
        "doc_key",
        "revision",
    }
    writes = [path for method, path, _ in backend.requests if method == "PUT" and "/points" in path]
    assert writes and all("ordering=strong" in p and "wait=true" in p for p in writes)
    assert all("timeout=2" in p for p in writes)
    await remote.aclose()
    local.close()


@pytest.mark.filterwarnings("ignore::UserWarning")
async def test_transient_failures_are_retried_and_then_reported(
    fake: tuple[FakeQdrant, str],
) -> None:
    backend, url = fake
    store = open_remote(url, retries=3)
    store.upsert_document(*document("a.pdf", "v1", "t1", seed=1))
    backend.fail_next = [503, 502]
    assert len(store.search(QUERY, limit=2)) == 2
    backend.fail_next = [503, 429]
    assert len(await store.asearch(QUERY, limit=2)) == 2
    backend.fail_next = [503, 503, 503]
    with pytest.raises(StoreError, match=rf"search on .*{url}.*503"):
        store.search(QUERY, limit=2)
    backend.fail_next = [400]
    with pytest.raises(StoreError, match="count on"):
        store.count_pages()
    assert backend.fail_next == []  # a client error is not retried
    await store.aclose()


@pytest.mark.filterwarnings("ignore::UserWarning")
def test_server_collection_of_another_encoder_is_refused(fake: tuple[FakeQdrant, str]) -> None:
    _, url = fake
    open_remote(url).close()
    with pytest.raises(StoreError, match=rf"'docmemo_pages' at {url}.*'enc'.*'other'"):
        open_remote(url, encoder_name="other")
