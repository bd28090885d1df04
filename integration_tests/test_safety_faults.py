"""Faults with clear errors and nothing lost: disk full, read-only, locked store, oversized pages,
special and unreadable files.

Real faults where this machine allows them (a small tmpfs mounted by root for a full or read-only
disk; skipped with the reason otherwise), and the same failures injected at a named write step
by a fault hook the test installs (see :mod:`llama_index_docmemo.faults`).
"""

from __future__ import annotations

import logging
import os
import subprocess
import sys
import threading
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

import pymupdf
import pytest
from safety_worker import DIM, HashEncoder, fault_hook, write_pdf

from llama_index_docmemo.errors import IngestError, StoreError
from llama_index_docmemo.faults import set_fault_hook
from llama_index_docmemo.indexing import DocumentIndexer, IndexReport
from llama_index_docmemo.ingest.pdf import file_sha256
from llama_index_docmemo.step_runtime import run
from llama_index_docmemo.store import EdgePageStore
from llama_index_docmemo.store import operations as op
from llama_index_docmemo.store.scope import PageFilter, journal_filter

WORKER = Path(__file__).with_name("safety_worker.py")
ENCODER = HashEncoder()
OLD = [f"Old edition page {n}: the obsolete walrus tariff applies." for n in range(1, 5)]
NEW = [f"New edition page {n}: the current heron tariff applies." for n in range(1, 8)]
ACME = PageFilter(tenant="acme")


def open_store(path: Path) -> EdgePageStore:
    return EdgePageStore(path, encoder_name=ENCODER.name, dim=DIM, sparse=True)


def index(store: EdgePageStore, *paths: Path) -> IndexReport:
    return DocumentIndexer(store, ENCODER, ocr=False).index_paths(list(paths), tenant="acme")


def run_worker(store: Path, *paths: Path, env: dict[str, str] | None = None):
    full_env = {**os.environ, "PYTHONPATH": os.pathsep.join(sys.path), **(env or {})}
    command = [sys.executable, str(WORKER), str(store), *map(str, paths), "--tenant", "acme"]
    return subprocess.run(command, env=full_env, capture_output=True, text=True, timeout=300)


@contextmanager
def tmpfs(path: Path, size_mb: int) -> Iterator[Path]:
    """A small RAM file system at ``path`` (root only), unmounted afterwards."""
    path.mkdir(parents=True, exist_ok=True)
    if os.geteuid() != 0:
        pytest.skip(
            "a real full/read-only disk needs root to mount a tmpfs; injected faults cover it"
        )
    mounted = subprocess.run(
        ["mount", "-t", "tmpfs", "-o", f"size={size_mb}m", "tmpfs", str(path)],
        capture_output=True,
        text=True,
    )
    if mounted.returncode != 0:
        pytest.skip(
            f"cannot mount a tmpfs here ({mounted.stderr.strip()}); injected faults cover it"
        )
    try:
        yield path
    finally:
        subprocess.run(["umount", "-l", str(path)], check=False)


def assert_old_version_intact(store: EdgePageStore, old_version: str) -> None:
    assert store.document_version("book.pdf", tenant="acme") == old_version
    assert store.count_pages() == 4
    hits = store.search(ENCODER.encode_query("walrus tariff"), limit=10, page_filter=ACME)
    assert len(hits) == 4 and {h.record.doc_version for h in hits} == {old_version}
    assert not run(op.scroll_all(store._send, journal_filter()))


# ------------------------------------------------------------------ disk full


@pytest.mark.slow
def test_real_full_disk_fails_with_a_message_and_loses_nothing(tmp_path: Path) -> None:
    docs = tmp_path / "docs"
    book = write_pdf(docs / "book.pdf", OLD)
    with tmpfs(tmp_path / "disk", 480) as disk:
        store_path = disk / "store"
        first = run_worker(store_path, book)
        assert first.returncode == 0, first.stdout + first.stderr
        with open_store(store_path) as store:
            old_version = store.document_version("book.pdf", tenant="acme")
        assert old_version is not None
        free = os.statvfs(disk).f_bavail * os.statvfs(disk).f_frsize
        ballast = disk / "ballast"
        with ballast.open("wb") as fh:  # leave ~150 MiB: below the store's safety margin
            os.posix_fallocate(fh.fileno(), 0, max(1, free - (150 << 20)))
        write_pdf(book, NEW)
        write_pdf(docs / "more.pdf", NEW)
        full = run_worker(store_path, docs)
        assert full.returncode == 1, f"exit {full.returncode} (135 = SIGBUS): {full.stderr[-2000:]}"
        assert "the disk is full" in full.stdout and "not attempted" in full.stdout
        with open_store(store_path) as store:
            assert_old_version_intact(store, old_version)
        ballast.unlink()
        again = run_worker(store_path, docs)
        assert again.returncode == 0, again.stdout + again.stderr
        with open_store(store_path) as store:
            assert store.document_version("book.pdf", tenant="acme") != old_version
            assert store.count_pages() == 14


@pytest.fixture
def stored_book(tmp_path: Path) -> tuple[Path, Path, str]:
    book = write_pdf(tmp_path / "docs" / "book.pdf", OLD)
    store_path = tmp_path / "store"
    with open_store(store_path) as store:
        assert index(store, book).ok
        version = store.document_version("book.pdf", tenant="acme")
    assert version is not None
    return store_path, book, version


@pytest.mark.parametrize(
    ("fault", "words"),
    [
        ("pages-partial:enospc", "the disk is full"),
        ("journal-written:enospc", "the disk is full"),
        ("pages-written:erofs", "the file system is read-only"),
    ],
)
def test_injected_write_failures_keep_the_old_version(
    stored_book: tuple[Path, Path, str], fault: str, words: str
) -> None:
    store_path, book, old_version = stored_book
    write_pdf(book, NEW)
    write_pdf(book.with_name("more.pdf"), NEW)
    with open_store(store_path) as store:
        store.max_batch_points = 2
        set_fault_hook(fault_hook(fault))
        try:
            report = index(store, book.parent)
        finally:
            set_fault_hook(None)
        reasons = dict(report.failed)
        assert words in reasons[str(book)] and "previous version" in reasons[str(book)]
        assert "not attempted" in reasons[str(book.with_name("more.pdf"))]
        assert_old_version_intact(store, old_version)
        assert index(store, book.parent).ok
        assert store.count_pages() == 14


# ------------------------------------------------------------------ read-only, locked


@pytest.mark.slow
def test_read_only_disk_is_named_when_opening_and_creating(tmp_path: Path) -> None:
    book = write_pdf(tmp_path / "docs" / "book.pdf", OLD)
    with tmpfs(tmp_path / "disk", 480) as disk:
        assert run_worker(disk / "store", book).returncode == 0
        subprocess.run(["mount", "-o", "remount,ro", str(disk)], check=True)
        with pytest.raises(StoreError, match=r"not writable.*Read-only file system"):
            open_store(disk / "store")
        with pytest.raises(StoreError, match=r"cannot create page store .*new.*Read-only"):
            open_store(disk / "new")
        subprocess.run(["mount", "-o", "remount,rw", str(disk)], check=True)
        with open_store(disk / "store") as store:
            assert store.count_pages() == 4


@pytest.mark.slow
def test_store_open_in_another_process_is_named(stored_book: tuple[Path, Path, str]) -> None:
    store_path, _, _ = stored_book
    holder = subprocess.Popen(
        [
            sys.executable,
            "-c",
            "import sys; from test_safety_faults import open_store; from pathlib import Path\n"
            f"s = open_store(Path({str(store_path)!r})); print('ready', flush=True); sys.stdin.read()",
        ],
        env={**os.environ, "PYTHONPATH": os.pathsep.join(sys.path)},
        cwd=Path(__file__).parent,
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        text=True,
    )
    try:
        assert holder.stdout is not None and holder.stdout.readline().strip() == "ready"
        with pytest.raises(StoreError, match="open in another process") as caught:
            open_store(store_path)
        assert f"cp -r {store_path}" in str(caught.value)
    finally:
        holder.communicate("", timeout=120)
    with open_store(store_path) as store:  # released: usable again, nothing lost
        assert store.count_pages() == 4


# ------------------------------------------------------------------ oversized pages


def write_oversized(path: Path) -> Path:
    """Page 1 is 20,000 x 20,000 pt with a drawn table (MuPDF's layout model refuses it)."""
    doc = pymupdf.open()
    page = doc.new_page(width=20000, height=20000)
    page.insert_text((400, 400), "Revenue table of the giant poster", fontsize=300)
    for row in range(4):
        for col in range(3):
            cell = pymupdf.Rect(
                400 + col * 4000, 1000 + row * 1500, 4400 + col * 4000, 2500 + row * 1500
            )
            page.draw_rect(cell)
            page.insert_text(
                (cell.x0 + 200, cell.y0 + 800), f"revenue {row}{col} 12.5", fontsize=250
            )
    small = doc.new_page()
    small.insert_text((72, 72), "A normal page about revenue growth.")
    path.parent.mkdir(parents=True, exist_ok=True)
    doc.save(path)
    return path


def test_an_oversized_page_is_skipped_with_a_warning_and_the_query_goes_on(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    from llama_index_docmemo.config import DocMemoConfig
    from llama_index_docmemo.postprocessors.crops import CropPostprocessor
    from llama_index_docmemo.query_engine import DocMemoQueryEngine

    poster = write_oversized(tmp_path / "docs" / "poster.pdf")
    with open_store(tmp_path / "store") as store:
        assert DocumentIndexer(store, ENCODER, ocr=False).index_paths([poster]).ok
        engine = DocMemoQueryEngine.from_defaults(
            store=store,
            encoder=ENCODER,
            config=DocMemoConfig(rounds=1, pages_per_round=2),
            crop_postprocessor=CropPostprocessor(cache_dir=str(tmp_path / "cache")),
        )
        with caplog.at_level(logging.WARNING):
            result = engine.run("What is in the revenue table?")
    assert {p.page for p in result.trace.pages_read} == {1, 2}
    assert any("no crops for poster.pdf page 1" in r.getMessage() for r in caplog.records)


def test_a_page_that_cannot_be_rendered_keeps_its_text_everywhere(
    tmp_path: Path, caplog: pytest.LogCaptureFixture, monkeypatch: pytest.MonkeyPatch
) -> None:
    """MuPDF refusing every pixmap (as it does for some huge images): crops, page images and
    evidence images are dropped with warnings, and the answer still comes from the text."""
    from llama_index_docmemo.config import DocMemoConfig
    from llama_index_docmemo.postprocessors.crops import CropPostprocessor
    from llama_index_docmemo.query_engine import DocMemoQueryEngine

    poster = write_oversized(tmp_path / "docs" / "poster.pdf")

    def refuse(*args: object, **kwargs: object) -> None:
        raise pymupdf.mupdf.FzErrorLimit("Overly large image")

    with open_store(tmp_path / "store") as store:
        assert DocumentIndexer(store, ENCODER, ocr=False).index_paths([poster]).ok
        monkeypatch.setattr(pymupdf.Page, "get_pixmap", refuse)
        engine = DocMemoQueryEngine.from_defaults(
            store=store,
            encoder=ENCODER,
            config=DocMemoConfig(rounds=1, pages_per_round=2),
            crop_postprocessor=CropPostprocessor(cache_dir=str(tmp_path / "cache")),
            cache_dir=tmp_path / "cache",
        )
        with caplog.at_level(logging.WARNING):
            response = engine.query("What is the revenue growth on the normal page?")
    assert response.source_nodes and all(
        n.node.image_resource is None for n in response.source_nodes
    )
    messages = " ".join(r.getMessage() for r in caplog.records)
    assert "no image of" in messages and "cannot render the page" in messages


def test_index_layout_goes_on_past_an_oversized_page(
    tmp_path: Path, capsys, monkeypatch: pytest.MonkeyPatch
) -> None:
    from llama_index_docmemo.cli.document_commands import index_layouts

    poster = write_oversized(tmp_path / "docs" / "poster.pdf")
    normal = write_pdf(tmp_path / "docs" / "normal.pdf", ["Revenue table: 4,200 units."])
    monkeypatch.setenv("DOCMEMO_CACHE_DIR", str(tmp_path / "cache"))
    warnings = index_layouts([str(poster), str(normal)], "pymupdf")
    out = capsys.readouterr().out
    assert f"layout (pymupdf): {poster}: " in out and f"layout (pymupdf): {normal}: " in out
    assert warnings == []  # the page is skipped inside the file, the file still gets a layout


# ------------------------------------------------------------------ special and unreadable files


def run_with_deadline(fn, seconds: float = 120.0):
    """``fn()`` in a thread; fails the test instead of hanging when it does not return."""
    box: dict[str, object] = {}

    def target() -> None:
        try:
            box["value"] = fn()
        except Exception as exc:  # re-raised in the test's thread
            box["error"] = exc

    thread = threading.Thread(target=target, daemon=True)
    thread.start()
    thread.join(seconds)
    assert not thread.is_alive(), "indexing hung (a FIFO or device was read?)"
    if "error" in box:
        raise box["error"]  # type: ignore[misc]
    return box["value"]


def test_fifos_devices_symlinks_and_unreadable_files_are_named_never_read(tmp_path: Path) -> None:
    folder = tmp_path / "docs"
    good = write_pdf(folder / "good.pdf", OLD)
    os.mkfifo(folder / "pipe.pdf")
    (folder / "link.pdf").symlink_to(good)
    (folder / "dangling.pdf").symlink_to(folder / "gone.pdf")
    (tmp_path / "elsewhere").mkdir()
    write_pdf(tmp_path / "elsewhere" / "secret.pdf", NEW)
    (folder / "linked-folder").symlink_to(tmp_path / "elsewhere")
    unreadable = write_pdf(folder / "private.pdf", NEW)
    unreadable.chmod(0)
    loose_fifo = tmp_path / "loose.pdf"
    os.mkfifo(loose_fifo)
    with open_store(tmp_path / "store") as store:
        report = run_with_deadline(
            lambda: DocumentIndexer(store, ENCODER, ocr=False).index_paths(
                [folder, loose_fifo, Path("/dev/null")]
            )
        )
        assert [s.doc_id for s in store.list_documents(PageFilter())] == sorted(
            ["good.pdf"] + (["private.pdf"] if os.geteuid() == 0 else [])
        )
    failed = dict(report.failed)
    assert "FIFO" in failed[str(folder / "pipe.pdf")]
    assert "FIFO" in failed[str(loose_fifo)]
    assert "character device" in failed["/dev/null"]
    if os.geteuid() != 0:  # root reads every file
        assert "permission denied" in failed[str(unreadable)]
    skipped = dict(report.skipped)
    assert set(skipped) == {
        str(folder / "link.pdf"),
        str(folder / "dangling.pdf"),
        str(folder / "linked-folder"),
    }
    summary = report.summary()
    assert f"skipped {folder / 'link.pdf'}: symlink" in summary
    assert f"FAILED {folder / 'pipe.pdf'}: not a regular file: a FIFO" in summary


def test_hashing_refuses_a_fifo_instead_of_blocking(tmp_path: Path) -> None:
    os.mkfifo(tmp_path / "pipe")
    with pytest.raises(IngestError, match="not a regular file"):
        run_with_deadline(lambda: file_sha256(tmp_path / "pipe"), 30)
