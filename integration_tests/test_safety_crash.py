"""Crash safety: the indexer is killed (SIGKILL) at each step of a write, in a subprocess.

The worker installs a fault hook for the step it is given (``--fault``, see
:func:`safety_worker.fault_hook`), so each kill lands exactly where it is meant to, never by
timing. After each kill the store is reopened and
must hold exactly one complete version of every document (the old one before the commit point,
the new one after), search must never return a page of another version, and indexing again must
finish the job.
"""

from __future__ import annotations

import os
import signal
import subprocess
import sys
from pathlib import Path

import pytest
from safety_worker import DIM, HashEncoder, write_pdf

from llama_index_docmemo.faults import STEPS
from llama_index_docmemo.indexing import DocumentIndexer
from llama_index_docmemo.step_runtime import run
from llama_index_docmemo.store import EdgePageStore
from llama_index_docmemo.store import operations as op
from llama_index_docmemo.store.points import STORE_POINT_ID, journal_point_id
from llama_index_docmemo.store.scope import PageFilter, journal_filter

WORKER = Path(__file__).with_name("safety_worker.py")
OLD = [f"Old edition page {n}: the obsolete walrus tariff applies." for n in range(1, 5)]
NEW = [f"New edition page {n}: the current heron tariff applies." for n in range(1, 8)]
ENCODER = HashEncoder()
ALL = PageFilter(tenant="acme")


def open_store(path: Path) -> EdgePageStore:
    return EdgePageStore(path, encoder_name=ENCODER.name, dim=DIM, sparse=True)


def run_worker(store: Path, *paths: Path, fault: str | None) -> subprocess.CompletedProcess:
    env = {**os.environ, "PYTHONPATH": os.pathsep.join(sys.path)}
    command = [sys.executable, str(WORKER), str(store), *map(str, paths), "--tenant", "acme"]
    if fault is not None:
        command += ["--fault", fault]
    return subprocess.run(command, env=env, capture_output=True, text=True, timeout=300)


def words_found(store: EdgePageStore, query: str) -> set[str]:
    hits = store.search(ENCODER.encode_query(query), limit=50, page_filter=ALL)
    return {h.record.doc_version for h in hits}


def assert_one_complete_version(store: EdgePageStore, doc_id: str, n_pages: int) -> str:
    """The document has one version, all its pages, and nothing else of it is stored."""
    version = store.document_version(doc_id, tenant="acme")
    assert version is not None
    scope = PageFilter(doc_ids=(doc_id,), tenant="acme")
    assert store.count_pages(scope) == n_pages
    hits = store.search(ENCODER.encode_query("edition tariff page"), limit=50, page_filter=scope)
    assert len(hits) == n_pages and {h.record.doc_version for h in hits} == {version}
    assert not run(op.scroll_all(store._send, journal_filter())), "a journal note survived the open"
    return version


@pytest.fixture
def indexed_old(tmp_path: Path) -> tuple[Path, Path, str]:
    """A store holding the old edition of book.pdf (tenant acme), and the file path."""
    pdf = write_pdf(tmp_path / "docs" / "book.pdf", OLD)
    store_path = tmp_path / "store"
    with open_store(store_path) as store:
        report = DocumentIndexer(store, ENCODER, ocr=False).index_paths([pdf], tenant="acme")
        assert report.ok
        old_version = store.document_version("book.pdf", tenant="acme")
    assert old_version is not None
    return store_path, pdf, old_version


BEFORE_COMMIT = ("batch-encoded", "journal-written", "pages-partial", "pages-written")
AFTER_COMMIT = ("record-written", "stale-deleted", "document-indexed")


@pytest.mark.slow
@pytest.mark.parametrize("step", BEFORE_COMMIT + AFTER_COMMIT)
def test_kill_while_replacing_a_version_leaves_one_complete_version(
    indexed_old: tuple[Path, Path, str], step: str
) -> None:
    store_path, pdf, old_version = indexed_old
    write_pdf(pdf, NEW)
    killed = run_worker(store_path, pdf, fault=f"{step}:kill")
    assert killed.returncode == -signal.SIGKILL, killed.stderr[-2000:]

    with open_store(store_path) as store:
        committed = step in AFTER_COMMIT
        version = assert_one_complete_version(store, "book.pdf", 7 if committed else 4)
        assert (version != old_version) is committed
        assert store.count_pages() == (7 if committed else 4), "stale or partial pages remain"
        stale = "heron" if not committed else "walrus"
        assert words_found(store, f"{stale} tariff") <= {version}
        again = DocumentIndexer(store, ENCODER, ocr=False).index_paths([pdf], tenant="acme")
        assert again.ok and (again.unchanged == [str(pdf)]) is committed
        new_version = assert_one_complete_version(store, "book.pdf", 7)
        assert new_version != old_version and store.count_pages() == 7


@pytest.mark.slow
@pytest.mark.parametrize("step", ["pages-partial"])
def test_kill_before_a_first_version_commits_leaves_no_trace(tmp_path: Path, step: str) -> None:
    pdf = write_pdf(tmp_path / "docs" / "first.pdf", NEW)
    store_path = tmp_path / "store"
    open_store(store_path).close()
    killed = run_worker(store_path, pdf, fault=f"{step}:kill")
    assert killed.returncode == -signal.SIGKILL
    with open_store(store_path) as store:
        assert store.list_documents(ALL) == [] and store.count_pages() == 0
        assert store.document_version("first.pdf", tenant="acme") is None


@pytest.mark.slow
def test_kill_between_documents_of_a_batch_keeps_the_finished_ones(tmp_path: Path) -> None:
    docs = tmp_path / "docs"
    write_pdf(docs / "a.pdf", OLD)
    write_pdf(docs / "b.pdf", NEW)
    store_path = tmp_path / "store"
    killed = run_worker(store_path, docs, fault="document-indexed:kill")
    assert killed.returncode == -signal.SIGKILL
    with open_store(store_path) as store:
        assert [s.doc_id for s in store.list_documents(ALL)] == ["a.pdf"]
        assert_one_complete_version(store, "a.pdf", 4)
        report = DocumentIndexer(store, ENCODER, ocr=False).index_paths([docs], tenant="acme")
        assert report.unchanged == [str(docs / "a.pdf")] and len(report.indexed) == 1
        assert_one_complete_version(store, "b.pdf", 7)


@pytest.mark.slow
def test_kill_while_creating_a_store_leaves_no_half_made_folder(tmp_path: Path) -> None:
    pdf = write_pdf(tmp_path / "docs" / "a.pdf", OLD)
    store_path = tmp_path / "store"
    killed = run_worker(store_path, pdf, fault="store-created:kill")
    assert killed.returncode == -signal.SIGKILL
    assert not store_path.exists()
    leftovers = list(tmp_path.glob(".store.creating-*"))
    assert leftovers, "the kill happened inside the sibling build folder"
    done = run_worker(store_path, pdf, fault=None)
    assert done.returncode == 0, done.stdout + done.stderr
    assert not list(tmp_path.glob(".store.creating-*")), "the dead build folder was removed"
    with open_store(store_path) as store:
        assert_one_complete_version(store, "a.pdf", 4)


def test_a_store_folder_without_a_store_record_is_completed_or_explained(tmp_path: Path) -> None:
    """0.1.0 created stores in place: a kill right after creation left a shard with no record."""
    import qdrant_edge as qe

    from llama_index_docmemo.errors import StoreError
    from llama_index_docmemo.store.edge import _config

    empty = tmp_path / "empty"
    qe.EdgeShard.create(str(empty), _config(DIM, True)).close()
    with open_store(empty) as store:  # nothing in it: creation is completed
        assert store.count_pages() == 0
    with open_store(empty) as store:
        assert store.list_documents() == []

    broken = tmp_path / "broken"
    shard = qe.EdgeShard.create(str(broken), _config(DIM, True))
    shard.update(qe.UpdateOperation.upsert_points([qe.Point(STORE_POINT_ID, {}, {"x": 1})]))
    shard.update(qe.UpdateOperation.delete_points([STORE_POINT_ID]))
    shard.update(
        qe.UpdateOperation.upsert_points([qe.Point(journal_point_id("k"), {}, {"kind": "journal"})])
    )
    shard.flush()
    shard.close()
    with pytest.raises(StoreError) as caught:
        open_store(broken)
    message = str(caught.value)
    assert "incomplete page store" in message
    assert f"mv {broken} {broken}.broken && docmemo index" in message


def test_every_fault_step_is_exercised() -> None:
    exercised = set(BEFORE_COMMIT + AFTER_COMMIT) | {"store-created"}
    assert exercised == set(STEPS)
