"""Indexing on a local Ray cluster (``ray.init(num_cpus=2)``), writing from Ray's worker
processes to the Qdrant REST stand-in (real HTTP) or through one writer to an embedded store.

Faults: a worker killed in the middle of a document (a test hook installed in every worker,
see :mod:`ray_hooks`), a document that kills its worker every time, a corrupt PDF in the batch,
the store refusing writes for seconds. After each run every document is committed exactly once
(one version, all its pages, nothing else of it) or named as failed, and a search sees no
uncommitted page. The same files indexed without Ray leave the same points.

One cluster for the module (about 5 s to start); each run starts its actors (about 3 s).
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import numpy as np
import pytest
from qdrant_standin import FakeQdrant, serve_standin
from ray_hooks import PLAN_ENV, TrackingHashEncoder, marker
from safety_worker import HashEncoder, write_pdf

from llama_index_docmemo.indexing import DocumentIndexer, IndexReport
from llama_index_docmemo.ingest.pdf import file_sha256
from llama_index_docmemo.step_runtime import run
from llama_index_docmemo.store import open_store
from llama_index_docmemo.store import operations as op
from llama_index_docmemo.store.base import PageStore
from llama_index_docmemo.store.client import QdrantClientPageStore
from llama_index_docmemo.store.points import document_point_id
from llama_index_docmemo.store.scope import PageFilter, journal_filter

ray = pytest.importorskip("ray")
from llama_index_docmemo.distributed import RayExecutor  # noqa: E402

pytestmark = pytest.mark.slow

ENCODER = HashEncoder()
TENANT = "acme"
COLLECTION = "docmemo_pages"
BATCH = QdrantClientPageStore.max_batch_points  # pages a worker writes in one request
PAGES = BATCH + 6  # so a document is written in two requests: a kill can fall between them


@pytest.fixture(scope="module")
def cluster(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Path]:
    """A local 2-CPU cluster whose workers follow the fault plan file this yields."""
    plan = tmp_path_factory.mktemp("ray-faults") / "plan.json"
    ray.init(
        num_cpus=2,
        include_dashboard=False,
        runtime_env={
            "env_vars": {"PYTHONPATH": os.pathsep.join(sys.path), PLAN_ENV: str(plan)},
            "worker_process_setup_hook": "ray_hooks.install",
        },
    )
    yield plan
    ray.shutdown()


@pytest.fixture
def plan(cluster: Path) -> Iterator[Path]:
    """The plan file, empty before the test and removed (with its markers) after it."""
    yield cluster
    for path in cluster.parent.glob(f"{cluster.name}*"):
        path.unlink()


def write_plan(plan: Path, **spec: Any) -> None:
    plan.write_text(json.dumps(spec))


def make_docs(folder: Path, n: int, pages: int = PAGES) -> dict[str, Path]:
    """``n`` PDFs of ``pages`` pages (by default more than one server write batch)."""
    return {
        f"d{i}.pdf": write_pdf(
            folder / f"d{i}.pdf",
            [f"Doc {i} page {p}: the heron tariff {i * p}" for p in range(pages)],
        )
        for i in range(n)
    }


def points(backend: FakeQdrant) -> dict[str, tuple[dict, dict]]:
    """Every point the stand-in holds: id -> (payload, vectors)."""
    found: dict[str, tuple[dict, dict]] = {}
    offset = None
    while True:
        batch, offset = backend.local.scroll(
            COLLECTION, limit=256, offset=offset, with_payload=True, with_vectors=True
        )
        found.update({str(r.id): (r.payload or {}, r.vector) for r in batch})  # type: ignore[misc]
        if offset is None:
            return found


def journals(store: PageStore) -> set[str]:
    """Documents with an interrupted write (a journal note) in the store."""
    return {str(note["doc_key"]) for note in run(op.scroll_all(store._send, journal_filter()))}


def assert_committed(store: PageStore, docs: dict[str, Path], n_pages: int | None = None) -> None:
    """Each document stored once, at its file's version, with exactly its pages; no journal left;
    a search sees committed pages only."""
    committed = set()
    for doc_id, path in docs.items():
        version = file_sha256(path)
        assert store.document_version(doc_id, tenant=TENANT) == version, doc_id
        expected = (
            n_pages if n_pages is not None else store.get_schema(doc_id, tenant=TENANT).n_pages
        )
        scope = PageFilter(doc_ids=(doc_id,), tenant=TENANT)
        assert store.count_pages(scope) == expected, f"{doc_id}: stale or partial pages left"
        committed.add((doc_id, version))
        assert document_point_id(TENANT, doc_id) not in journals(store), f"{doc_id}: journal left"
    hits = store.search(
        ENCODER.encode_query("heron tariff page"), limit=500, page_filter=PageFilter(tenant=TENANT)
    )
    assert {(h.record.doc_id, h.record.doc_version) for h in hits} <= committed


def assert_same_points(serial: dict, distributed: dict, atol: float = 0.0) -> None:
    """Same ids and payloads; vectors equal within ``atol``."""
    assert serial.keys() == distributed.keys()
    for point_id, (payload, vectors) in serial.items():
        other_payload, other_vectors = distributed[point_id]
        assert payload == other_payload, point_id
        assert vectors.keys() == other_vectors.keys()
        for name, vector in vectors.items():
            other = other_vectors[name]
            if isinstance(vector, list):
                np.testing.assert_allclose(np.array(other), np.array(vector), atol=atol, rtol=0)
            else:
                assert vector == other, (point_id, name)


def index(store: PageStore, folder: Path, executor: RayExecutor | None) -> IndexReport:
    return DocumentIndexer(store, ENCODER, ocr=False).index_paths(
        [folder], tenant=TENANT, executor=executor
    )


def serial_points(folder: Path) -> dict[str, tuple[dict, dict]]:
    with serve_standin() as (backend, url), open_store(url=url, encoder=ENCODER) as store:
        assert index(store, folder, None).ok
        return points(backend)


def test_workers_killed_mid_document_leave_every_document_committed_once(
    plan: Path, tmp_path: Path
) -> None:
    folder = tmp_path / "docs"
    docs = make_docs(folder, 4)
    with serve_standin() as (backend, url), open_store(url=url, encoder=ENCODER) as store:
        old = write_pdf(tmp_path / "old" / "d0.pdf", ["An old edition: the walrus tariff."] * 3)
        assert index(store, old.parent, None).ok  # d0.pdf has an old version to replace
        write_plan(plan, kill_once=["batch-encoded", "pages-partial"])
        report = index(store, folder, RayExecutor(workers=2, encoder=TrackingHashEncoder))
        assert marker(plan, "batch-encoded").exists(), "no encoder actor was killed"
        assert marker(plan, "pages-partial").exists(), "no write was killed half-way"
        assert report.ok, report.summary()
        assert report.indexed == [str(path) for path in docs.values()]
        assert report.pages == 4 * PAGES
        assert_committed(store, docs, n_pages=PAGES)
        assert len(store.list_documents(PageFilter(tenant=TENANT))) == 4
        assert any("replaced the document" in w for w in report.warnings)
        after_faults = points(backend)
    # A write the kill interrupted is written again over the same ids; qdrant-client's local mode
    # (behind the stand-in) renormalises an overwritten cosine vector in float32: 1-ulp changes.
    assert_same_points(serial_points(folder), after_faults, atol=1e-6)


def test_a_document_that_always_kills_its_worker_fails_alone_and_stays_invisible(
    plan: Path, tmp_path: Path
) -> None:
    folder = tmp_path / "docs"
    docs = make_docs(folder, 3)
    poison = write_pdf(
        folder / "poison.pdf", [f"Poison page {p}: the heron tariff" for p in range(PAGES)]
    )
    write_plan(plan, poison="poison.pdf", poison_step="pages-partial")
    executor = RayExecutor(workers=2, encoder=TrackingHashEncoder, max_retries=1)
    with serve_standin() as (backend, url), open_store(url=url, encoder=ENCODER) as store:
        report = index(store, folder, executor)
        assert report.indexed == [str(path) for path in docs.values()]
        assert [source for source, _ in report.failed] == [str(poison)]
        assert "the Ray worker died 2 times on it" in report.failed[0][1]
        left = [p for p, _ in points(backend).values() if p.get("doc_id") == "poison.pdf"]
        assert len(left) == BATCH, "the dead writes left their first batch (uncommitted)"
        assert_committed(store, docs, n_pages=PAGES)
        everything = PageFilter(tenant=TENANT)
        hits = store.search(ENCODER.encode_query("poison heron"), limit=100, page_filter=everything)
        assert "poison.pdf" not in {h.record.doc_id for h in hits}
        assert "poison.pdf" not in {s.doc_id for s in store.list_documents(everything)}
        assert journals(store) == {document_point_id(TENANT, "poison.pdf")}
        write_plan(plan)
        again = index(store, folder, executor)
        assert again.indexed == [str(poison)] and len(again.unchanged) == 3
        assert_committed(store, {**docs, "poison.pdf": poison}, n_pages=PAGES)
        assert not journals(store)


def test_a_corrupt_pdf_in_the_batch_is_named_on_an_embedded_store(
    plan: Path, tmp_path: Path
) -> None:
    folder = tmp_path / "docs"
    docs = make_docs(folder, 3, pages=4)
    (folder / "corrupt.pdf").write_bytes(b"%PDF-1.7\n" + os.urandom(2000))
    truncated = docs["d1.pdf"].read_bytes()
    (folder / "truncated.pdf").write_bytes(truncated[: len(truncated) // 2])
    with open_store(tmp_path / "serial", encoder=ENCODER) as store:
        serial = index(store, folder, None)
    with open_store(tmp_path / "ray", encoder=ENCODER) as store:
        report = index(store, folder, RayExecutor(workers=2, encoder=HashEncoder))
        assert report.indexed == serial.indexed == [str(path) for path in docs.values()]
        assert report.failed == serial.failed and len(report.failed) == 2
        assert "corrupt PDF" in dict(report.failed)[str(folder / "corrupt.pdf")]
        assert_committed(store, docs, n_pages=4)


def refusing_writes(backend: FakeQdrant, seconds: float) -> list[float]:
    """From the first page write on, the stand-in answers 503 to writes for ``seconds``;
    returns the times it refused."""
    serve = backend.handle
    window: list[float] = []
    refused: list[float] = []

    def handle(method: str, path: str, body: dict) -> tuple[int, Any]:
        writes = (method, path.split("?")[0]) in {
            ("PUT", f"/collections/{COLLECTION}/points"),
            ("POST", f"/collections/{COLLECTION}/points/delete"),
        }
        if writes and len(body.get("points", ())) > 1 and not window:
            window.append(time.monotonic() + seconds)
        if writes and window and time.monotonic() < window[0]:
            refused.append(time.monotonic())
            return 503, {"status": {"error": "injected: service unavailable"}}
        return serve(method, path, body)

    backend.handle = handle  # type: ignore[method-assign]
    return refused


def test_a_store_refusing_writes_for_seconds_loses_and_duplicates_nothing(
    plan: Path, tmp_path: Path
) -> None:
    folder = tmp_path / "docs"
    docs = make_docs(folder, 4)
    with serve_standin() as (backend, url), open_store(url=url, encoder=ENCODER) as store:
        refused = refusing_writes(backend, seconds=4.0)
        report = index(store, folder, RayExecutor(workers=2, encoder=HashEncoder))
        assert len(refused) > 3, "the store's own retries would have hidden a shorter refusal"
        assert report.ok and report.indexed == [str(path) for path in docs.values()]
        assert_committed(store, docs, n_pages=PAGES)
        ray_points = points(backend)
    assert_same_points(serial_points(folder), ray_points, atol=1e-6)  # see the first test


# ------------------------------------------------------------------ the dev PDFs, like serial


def dev_pdfs(data_root: Path, n: int = 10) -> list[Path]:
    """The ``n`` MMLongBench-Doc PDFs with the fewest pages (ties by name)."""
    import pymupdf

    folder = data_root / "mmlongbench-doc" / "pdfs"
    if not folder.is_dir():
        pytest.skip(f"{folder} absent")
    sized = []
    for path in sorted(folder.glob("*.pdf")):
        with pymupdf.open(path) as doc:
            sized.append((doc.page_count, path.name, path))
    return [path for _, _, path in sorted(sized)[:n]]


def top_pages(store: PageStore, encoder: Any, queries: list[str]) -> list[list[tuple]]:
    return [
        [(h.record.doc_id, h.record.page) for h in store.search(encoder.encode_query(q), limit=10)]
        for q in queries
    ]


QUERIES = ["revenue growth in 2015", "survey of seniors and technology", "model architecture"]


def test_docmemo_index_with_ray_matches_serial_point_for_point(
    plan: Path, data_root: Path, tmp_path: Path
) -> None:
    """The command itself, in a process of its own that starts its own local Ray cluster."""
    from llama_index_docmemo.cli import main
    from llama_index_docmemo.encoders import default_encoder

    pdfs = [str(p) for p in dev_pdfs(data_root)]
    encoder = default_encoder()
    with serve_standin() as (serial_backend, serial_url), serve_standin() as (ray_backend, ray_url):
        assert main(["index", *pdfs, "--url", serial_url, "--quiet"]) == 0
        command = ["index", *pdfs, "--url", ray_url, "--ray", "auto", "--workers", "2"]
        done = subprocess.run(
            [sys.executable, "-m", "llama_index_docmemo.cli", *command, "--quiet"],
            env={**os.environ, "PYTHONPATH": os.pathsep.join(sys.path)},
            capture_output=True,
            text=True,
            timeout=900,
            check=False,
        )
        assert done.returncode == 0, done.stdout + done.stderr[-3000:]
        assert done.stdout.startswith("indexed 10 documents"), done.stdout
        assert_same_points(points(serial_backend), points(ray_backend))
        with (
            open_store(url=serial_url, encoder=encoder) as one,
            open_store(url=ray_url, encoder=encoder) as other,
        ):
            assert top_pages(one, encoder, QUERIES) == top_pages(other, encoder, QUERIES)


def test_tiny_colqwen_on_ray_matches_serial(plan: Path, data_root: Path, tmp_path: Path) -> None:
    pytest.importorskip("colpali_engine")
    from ray_hooks import tiny_colqwen

    pdfs = dev_pdfs(data_root)
    encoder = tiny_colqwen()
    stores = {}
    with serve_standin() as (serial_backend, serial_url), serve_standin() as (ray_backend, ray_url):
        for url, executor in (
            (serial_url, None),
            (ray_url, RayExecutor(workers=2, encoder=tiny_colqwen)),
        ):
            with open_store(url=url, encoder=encoder) as store:
                indexer = DocumentIndexer(store, encoder, ocr=False, image_long_side=224)
                report = indexer.index_paths(pdfs, executor=executor)
                assert report.ok and len(report.indexed) == 10, report.summary()
                stores[url] = top_pages(store, encoder, QUERIES)
        assert_same_points(points(serial_backend), points(ray_backend))
    assert stores[serial_url] == stores[ray_url]
