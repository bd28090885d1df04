"""The server path of QdrantClientPageStore over real HTTP, sync and async.

No Qdrant server can be installed here, so a small REST stand-in on 127.0.0.1 parses each
request with qdrant-client's own models and answers it from qdrant-client's local mode. The
store therefore sends exactly the HTTP requests it would send a server (collection settings,
payload indexes, nested prefetch queries, IDF corpus, write ordering), with timeouts and
retries exercised by injected failures.
"""

from __future__ import annotations

import json
import re
import threading
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

import numpy as np
import pytest
from qdrant_client import QdrantClient, models

from llama_index_docmemo.errors import StoreError
from llama_index_docmemo.memory.schema import DocumentSchema
from llama_index_docmemo.store import QdrantClientPageStore
from llama_index_docmemo.types import PageEmbedding, PageFilter, PageRecord, PageRef, SparseVector

DIM = 8


class FakeQdrant:
    """Answers the REST calls the page store makes, from an in-memory local-mode client."""

    def __init__(self) -> None:
        self.local = QdrantClient(location=":memory:")
        self.lock = threading.Lock()
        self.requests: list[tuple[str, str, dict[str, Any]]] = []
        self.fail_next: list[int] = []  # statuses to answer before serving normally

    def handle(self, method: str, path: str, body: dict[str, Any]) -> tuple[int, Any]:
        self.requests.append((method, path, body))
        if self.fail_next:
            return self.fail_next.pop(0), {"status": {"error": "injected"}}
        route = path.split("?")[0]
        if route == "/":
            return 200, {"title": "qdrant - vector search engine", "version": "1.20.0"}
        match = re.fullmatch(r"/collections/([^/]+)(/.*)?", route)
        if match is None:
            return 404, {"status": {"error": f"no route {route}"}}
        name, rest = match.group(1), match.group(2) or ""
        try:
            with self.lock:
                result = self.dispatch(method, name, rest, body)
        except (ValueError, AttributeError, TypeError) as exc:  # answered, so tests see why
            return 400, {"status": {"error": f"{type(exc).__name__}: {exc}"}}
        return 200, {"result": result, "status": "ok", "time": 0.0}

    def dispatch(self, method: str, name: str, rest: str, body: dict[str, Any]) -> Any:
        local = self.local
        if (method, rest) == ("GET", "/exists"):
            return {"exists": local.collection_exists(name)}
        if (method, rest) == ("PUT", ""):
            create = models.CreateCollection(**body)
            local.create_collection(
                name,
                vectors_config=create.vectors,
                sparse_vectors_config=create.sparse_vectors,
            )
            return True
        if (method, rest) == ("PUT", "/index"):
            index = models.CreateFieldIndex(**body)
            local.create_payload_index(name, index.field_name, field_schema=index.field_schema)
            return {"operation_id": 0, "status": "completed"}
        if (method, rest) == ("PUT", "/points"):
            local.upsert(name, points=models.PointsList(**body).points)
            return {"operation_id": 0, "status": "completed"}
        if (method, rest) == ("POST", "/points/delete"):
            local.delete(name, points_selector=models.FilterSelector(**body))
            return {"operation_id": 0, "status": "completed"}
        if (method, rest) == ("POST", "/points"):
            request = models.PointRequest(**body)
            records = local.retrieve(name, ids=request.ids, with_payload=request.with_payload)
            return [r.model_dump(mode="json") for r in records]
        if (method, rest) == ("POST", "/points/scroll"):
            request = models.ScrollRequest(**body)
            records, offset = local.scroll(
                name,
                scroll_filter=request.filter,
                limit=request.limit or 10,
                offset=request.offset,
                with_payload=request.with_payload,
            )
            return {
                "points": [r.model_dump(mode="json") for r in records],
                "next_page_offset": offset,
            }
        if (method, rest) == ("POST", "/points/count"):
            request = models.CountRequest(**body)
            return {"count": local.count(name, count_filter=request.filter).count}
        if (method, rest) == ("POST", "/points/query"):
            request = models.QueryRequest(**body)
            response = local.query_points(
                name,
                query=request.query,
                using=request.using,
                prefetch=request.prefetch,
                query_filter=request.filter,
                search_params=request.params,
                limit=request.limit or 10,
                with_payload=request.with_payload,
            )
            return {"points": [p.model_dump(mode="json") for p in response.points]}
        raise ValueError(f"unexpected {method} {rest}")


@pytest.fixture
def fake() -> Iterator[tuple[FakeQdrant, str]]:
    backend = FakeQdrant()

    class Handler(BaseHTTPRequestHandler):
        def _serve(self) -> None:
            length = int(self.headers.get("Content-Length") or 0)
            body = json.loads(self.rfile.read(length) or b"{}") if length else {}
            status, payload = backend.handle(self.command, self.path, body)
            data = json.dumps(payload).encode()
            self.send_response(status)
            self.send_header("Content-Type", "application/json")
            self.send_header("Content-Length", str(len(data)))
            self.end_headers()
            self.wfile.write(data)

        do_GET = do_PUT = do_POST = _serve

        def log_message(self, *args: object) -> None:
            pass

    server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    yield backend, f"http://127.0.0.1:{server.server_address[1]}"
    server.shutdown()
    server.server_close()
    backend.local.close()


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
