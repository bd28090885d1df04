"""Page stores on disk: close and reopen, encoder checks, folders that hold something else, URLs."""

from __future__ import annotations

import socket
import time
from pathlib import Path

import numpy as np
import pytest

from llama_index_docmemo.encoders.base import PageEncoder
from llama_index_docmemo.errors import StoreError
from llama_index_docmemo.memory.schema import DocumentSchema
from llama_index_docmemo.store import EdgePageStore, PageStore, QdrantClientPageStore, open_store
from llama_index_docmemo.store.scope import PageFilter
from llama_index_docmemo.types import (
    PageEmbedding,
    PageInput,
    PageRecord,
    PageRef,
    QueryEmbedding,
    SparseVector,
)

DIM = 8


def document(doc_id: str, version: str, n_pages: int, seed: int) -> tuple:
    rng = np.random.default_rng(seed)
    schema = DocumentSchema(doc_id=doc_id, doc_version=version, n_pages=n_pages, tenant="t")
    records = [
        PageRecord(doc_id, version, page, n_pages, f"page {page}", f"/d/{doc_id}", tenant="t")
        for page in range(1, n_pages + 1)
    ]
    embeddings = [
        PageEmbedding(
            rng.normal(size=(3, DIM)).astype(np.float32),
            rng.normal(size=DIM).astype(np.float32),
            SparseVector((page, 50 + seed), tuple(float(w) for w in rng.uniform(0.5, 2, 2))),
        )
        for page in range(1, n_pages + 1)
    ]
    return schema, records, embeddings


QUERY = PageEmbedding(
    np.random.default_rng(7).normal(size=(2, DIM)).astype(np.float32),
    np.random.default_rng(8).normal(size=DIM).astype(np.float32),
    SparseVector((2, 51, 52), (1.0, 1.0, 1.0)),
)


def open_on_disk(backend: str, path: Path, **changes: object) -> PageStore:
    settings: dict[str, object] = {"encoder_name": "enc-a", "dim": DIM, "sparse": True}
    settings.update(changes)
    if backend == "edge":
        return EdgePageStore(path, **settings)  # type: ignore[arg-type]
    return QdrantClientPageStore(path=path, **settings)  # type: ignore[arg-type]


@pytest.mark.parametrize("backend", ["edge", "client"])
def test_store_survives_close_and_reopen(tmp_path: Path, backend: str) -> None:
    path = tmp_path / "store"
    # DBSF scores are continuous: RRF ties could be broken differently after a reload
    with open_on_disk(backend, path, fusion="dbsf") as store:
        store.upsert_document(*document("a.pdf", "v1", 4, seed=1))
        store.upsert_document(*document("b.pdf", "v1", 3, seed=2))
        store.upsert_document(*document("a.pdf", "v2", 2, seed=3))
        before = [(h.ref, h.score, h.record) for h in store.search(QUERY, limit=5)]
    with open_on_disk(backend, path, fusion="dbsf") as store:
        assert store.count_pages() == 5
        assert store.document_version("a.pdf", tenant="t") == "v2"
        assert store.get_schema("b.pdf", tenant="t") == document("b.pdf", "v1", 3, seed=2)[0]
        after = store.search(QUERY, limit=5)
        assert [(h.ref, h.record) for h in after] == [(ref, record) for ref, _, record in before]
        assert [h.score for h in after] == pytest.approx([score for _, score, _ in before])
        assert [r.ref for r in store.get_pages([PageRef("b.pdf", 3), PageRef("a.pdf", 1)])] == [
            PageRef("b.pdf", 3),
            PageRef("a.pdf", 1),
        ]


@pytest.mark.parametrize("backend", ["edge", "client"])
@pytest.mark.parametrize(
    "changes", [{"encoder_name": "enc-b"}, {"dim": DIM * 2}, {"sparse": False}]
)
def test_reopening_with_another_encoder_names_path_and_both(
    tmp_path: Path, backend: str, changes: dict[str, object]
) -> None:
    path = tmp_path / "store"
    open_on_disk(backend, path).close()
    with pytest.raises(StoreError) as caught:
        open_on_disk(backend, path, **changes)
    message = str(caught.value)
    assert str(path) in message and "'enc-a'" in message
    assert f"'{changes.get('encoder_name', 'enc-a')}'" in message
    open_on_disk(backend, path).close()  # the failed open released the folder


def test_edge_refuses_folders_that_hold_something_else(tmp_path: Path) -> None:
    (tmp_path / "notes").mkdir()
    (tmp_path / "notes" / "todo.txt").write_text("x")
    with pytest.raises(StoreError, match="not an empty folder"):
        open_on_disk("edge", tmp_path / "notes")
    open_on_disk("client", tmp_path / "local").close()
    with pytest.raises(StoreError, match="backend='client'"):
        open_on_disk("edge", tmp_path / "local")


def test_edge_store_open_twice_is_a_clear_error(tmp_path: Path) -> None:
    with (
        open_on_disk("edge", tmp_path / "s"),
        pytest.raises(StoreError, match="open in another process"),
    ):
        open_on_disk("edge", tmp_path / "s")


class FakeEncoder(PageEncoder):
    name = "fake-encoder"
    dim = DIM
    sparse = True

    def encode_pages(self, pages: list[PageInput]) -> list[PageEmbedding]:
        raise NotImplementedError

    def encode_queries(self, queries: list[str]) -> list[QueryEmbedding]:
        raise NotImplementedError


def test_open_store_picks_the_backend(tmp_path: Path) -> None:
    with open_store(tmp_path / "e", encoder=FakeEncoder()) as store:
        assert isinstance(store, EdgePageStore)
        assert (store.encoder_name, store.dim, store.sparse) == ("fake-encoder", DIM, True)
    with open_store(
        tmp_path / "c", encoder=FakeEncoder(), backend="client", fusion="dbsf"
    ) as store:
        assert isinstance(store, QdrantClientPageStore) and store.fusion == "dbsf"
        store.upsert_document(*document("a.pdf", "v1", 2, seed=1))
        assert store.count_pages(PageFilter(tenant="t")) == 2
    with pytest.raises(StoreError, match="exactly one of path"):
        open_store(encoder=FakeEncoder())
    with pytest.raises(StoreError, match="shard_number"):
        open_store(tmp_path / "e2", encoder=FakeEncoder(), shard_number=2)


@pytest.mark.filterwarnings("ignore:Failed to obtain server version")
def test_unreachable_server_fails_fast_naming_the_url() -> None:
    with socket.socket() as sock:  # a port nothing listens on
        sock.bind(("127.0.0.1", 0))
        port = sock.getsockname()[1]
    url = f"http://127.0.0.1:{port}"
    started = time.perf_counter()
    with pytest.raises(StoreError, match=rf"{url}.*failed"):
        open_store(url=url, encoder=FakeEncoder(), timeout=1, retries=2)
    assert time.perf_counter() - started < 10


def test_edge_flushes_while_writing_so_its_log_stays_bounded(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Qdrant Edge truncates its write-ahead log only on a flush: a store that never flushed
    until close grew its log by about 470 KB a ColQwen page (17 GB after 40,000 pages)."""
    from llama_index_docmemo.store import edge

    def wal_bytes(path: Path) -> int:
        return sum(f.stat().st_size for f in (path / "wal").rglob("*") if f.is_file())

    rng = np.random.default_rng(0)
    sizes = {}
    for interval in (1e9, 0.0):  # never, and after every document
        monkeypatch.setattr(edge, "FLUSH_INTERVAL_S", interval)
        path = tmp_path / f"flush-{interval:g}"
        store = EdgePageStore(path, encoder_name="colqwen-shaped", dim=128, sparse=False)
        try:
            for d in range(40):  # 400 pages of 768 x 128 float32: 157 MB of vectors
                doc_id, n = f"d{d}.pdf", 10
                vectors = [rng.normal(size=(768, 128)).astype(np.float32) for _ in range(n)]
                store.upsert_document(
                    DocumentSchema(doc_id=doc_id, doc_version="v", n_pages=n),
                    [PageRecord(doc_id, "v", p + 1, n, "", "") for p in range(n)],
                    [PageEmbedding(v, v.mean(axis=0)) for v in vectors],
                )
            sizes[interval] = wal_bytes(path)
        finally:
            store.close()
    assert sizes[1e9] > 2 * sizes[0.0]  # unflushed, the log holds every write
    assert sizes[0.0] <= 128 * 2**20  # flushed, a few preallocated segments
