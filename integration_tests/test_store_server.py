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
from llama_index_docmemo.store.scope import PageFilter
from llama_index_docmemo.types import PageEmbedding, PageRecord, PageRef, SparseVector

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
    indexes = {
        body["field_name"]: body for method, path, body in backend.requests if "/index" in path
    }
    assert set(indexes) == {
        "doc_id",
        "doc_version",
        "tenant",
        "acl",
        "kind",
        "page",
        "file_name",
        "source",
        "write_state",
        "tenant_key",
        "access",
        "doc_key",
        "revision",
    }
    assert indexes["tenant_key"]["field_schema"] == {"type": "keyword", "is_tenant": True}
    assert [k for k, b in indexes.items() if isinstance(b["field_schema"], dict)] == ["tenant_key"]
    writes = [
        path
        for method, path, _ in backend.requests
        if (method, path.split("?")[0].split("/", 3)[-1])
        in {("PUT", "points"), ("POST", "points/batch")}
    ]
    assert any("/points/batch" in p for p in writes)  # each commit is one request
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
    assert len(store.search(QUERY, limit=2)) == 2  # the scope's estimate is retried
    backend.fail_next = [503, 429]
    assert len(await store.asearch(QUERY, limit=2, prefetch_limit=50)) == 2
    backend.fail_next = [503, 503, 503]
    with pytest.raises(StoreError, match=rf"search on .*{url}.*503"):
        store.search(QUERY, limit=2, prefetch_limit=50)
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


@pytest.mark.filterwarnings("ignore::UserWarning")
async def test_one_request_per_search(fake: tuple[FakeQdrant, str]) -> None:
    """Dense and lexical branches in one query_batch_points, after an estimated count of the
    scope (it sizes the prefetch; none with ``prefetch_limit``); the committed-revision condition
    is inside the filter, so nothing else is asked (no journal scroll, no record look-up)."""
    backend, url = fake
    store = open_remote(url)
    store.upsert_document(*document("a.pdf", "v1", "t1", seed=1))
    store.upsert_document(*document("a.pdf", "v2", "t1", seed=3))  # a replaced version too
    scope = PageFilter(tenant="t1")
    for run in ("sync", "async"):
        backend.requests.clear()
        if run == "sync":
            hits = store.search(QUERY, limit=3, page_filter=scope)
        else:
            hits = await store.asearch(QUERY, limit=3, page_filter=scope)
        assert len(hits) == 3 and {h.record.doc_version for h in hits} == {"v2"}
        assert [(m, p.split("?")[0]) for m, p, _ in backend.requests] == [
            ("POST", "/collections/docmemo_pages/points/count"),
            ("POST", "/collections/docmemo_pages/points/query/batch"),
        ], run
        (_, _, count), (_, _, body) = backend.requests
        assert count["exact"] is False  # Qdrant's estimate from its payload indexes: no scan
        backend.requests.clear()
        await store.asearch(QUERY, limit=3, page_filter=scope, prefetch_limit=50)
        assert [p.split("?")[0] for _, p, _ in backend.requests] == [
            "/collections/docmemo_pages/points/query/batch"
        ], run
        branches = body["searches"]
        assert [b["using"] for b in branches] == ["multi", "lexical"]
        must_not = [c for b in branches for c in b["filter"]["must"] if "must_not" in c]
        assert must_not and all(
            c["must_not"] == [{"key": "write_state", "match": {"value": "pending"}}]
            for c in must_not
        )
    # a query sizes its searches once: the depth alone is the same estimated count
    backend.requests.clear()
    assert store.search_depth(scope) == await store.asearch_depth(scope) == 200
    assert [(p.split("?")[0], body["exact"]) for _, p, body in backend.requests] == [
        ("/collections/docmemo_pages/points/count", False)
    ] * 2
    # the async reads of the query path go through the native async client too
    backend.requests.clear()
    assert await store.acount_pages(scope) == 3
    assert [p.ref for p in await store.aget_pages([PageRef("a.pdf", 2)], scope)] == [
        PageRef("a.pdf", 2)
    ]
    assert [s.doc_id for s in await store.alist_documents(scope)] == ["a.pdf"]
    assert (await store.aget_schema("a.pdf", tenant="t1")).doc_version == "v2"  # type: ignore[union-attr]
    assert [p.split("?")[0].rsplit("/", 2)[-2:] for _, p, _ in backend.requests] == [
        ["points", "count"],
        ["points", "scroll"],
        ["points", "scroll"],
        ["docmemo_pages", "points"],
    ]
    await store.aclose()


@pytest.mark.filterwarnings("ignore::UserWarning")
def test_cluster_settings_and_tenant_shard_keys(fake: tuple[FakeQdrant, str]) -> None:
    """shard_number, replication_factor and write_consistency_factor reach the collection; a
    large tenant's reads and writes name its own shard key, the other tenants share one."""
    backend, url = fake
    store = open_remote(
        url,
        shard_number=3,
        replication_factor=2,
        write_consistency_factor=2,
        tenant_shard_keys=["bigco"],
    )
    create = backend.created["docmemo_pages"]
    assert (create["shard_number"], create["replication_factor"]) == (3, 2)
    assert create["write_consistency_factor"] == 2 and create["sharding_method"] == "custom"
    assert backend.shard_keys["docmemo_pages"] == ["docmemo-shared", "bigco"]
    shards = [
        b
        for m, p, b in backend.requests
        if (m, p.split("?")[0].endswith("/shards")) == ("PUT", True)
    ]
    assert [(b["shard_key"], b["shards_number"], b["replication_factor"]) for b in shards] == [
        ("docmemo-shared", 3, 2),
        ("bigco", 3, 2),
    ]
    store.upsert_document(*document("a.pdf", "v1", "bigco", seed=1))
    store.upsert_document(*document("b.pdf", "v1", "small", seed=2))
    backend.requests.clear()
    assert {
        h.ref.doc_id for h in store.search(QUERY, limit=5, page_filter=PageFilter(tenant="bigco"))
    } == {"a.pdf"}
    assert store.count_pages(PageFilter(tenant="small")) == 3
    assert store.document_version("a.pdf", tenant="bigco") == "v1"
    estimate, search, count, retrieve = (body for _, _, body in backend.requests)
    assert estimate["shard_key"] == "bigco" and estimate["exact"] is False  # sizes the prefetch
    assert {b["shard_key"] for b in search["searches"]} == {"bigco"}
    assert count["shard_key"] == "docmemo-shared" and retrieve["shard_key"] == "bigco"
    backend.requests.clear()
    store.upsert_document(*document("a.pdf", "v2", "bigco", seed=3))
    keys = set()
    for _, path, body in backend.requests:
        if path.split("?")[0].endswith("/points/batch"):
            keys |= {next(iter(op.values())).get("shard_key") for op in body["operations"]}
        elif "shard_key" in body:
            keys.add(body["shard_key"])
    assert keys == {"bigco"}  # every read and write of the document names its tenant's key
    assert store.count_pages() == 6  # the owner's view reads every shard
    store.close()
    with pytest.raises(StoreError, match=r"shard keys for tenants \['bigco'\], not \['other'\]"):
        open_remote(url, tenant_shard_keys=["other"])
    reopened = open_remote(url)  # None: the stored keys
    assert reopened.document_version("a.pdf", tenant="bigco") == "v2"
    reopened.close()


@pytest.mark.filterwarnings("ignore::UserWarning")
def test_bulk_load_defers_hnsw_and_restores_it(fake: tuple[FakeQdrant, str]) -> None:
    backend, url = fake
    store = open_remote(url)
    assert backend.created["docmemo_pages"]["optimizers_config"] == {"indexing_threshold": 20000}
    with store.bulk_load():
        with store.bulk_load():  # nested: one deferral, restored once at the outer end
            store.upsert_document(*document("a.pdf", "v1", "t1", seed=1))
        assert backend.optimizer_updates == [{"indexing_threshold": 0}]
        store.upsert_document(*document("b.pdf", "v1", "t1", seed=2))
        assert store.count_pages(PageFilter(tenant="t1")) == 6  # searchable during the load
    assert backend.optimizer_updates == [{"indexing_threshold": 0}, {"indexing_threshold": 20000}]
    with pytest.raises(RuntimeError), store.bulk_load():
        raise RuntimeError("the indexer failed")
    assert backend.optimizer_updates[-1] == {"indexing_threshold": 20000}
    store.close()
