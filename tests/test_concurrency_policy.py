"""The concurrency policy (``llama_index_docmemo/step_runtime.py``): two pools a process, no other.

Engines, retrievers and stores borrow the process's pools instead of starting their own, so
building many (an engine per request, per tenant) starts no thread, and nothing is left to
shut down; a forked child starts pools of its own.
"""

from __future__ import annotations

import ast
import asyncio
import os
import threading
import warnings
from pathlib import Path

import pytest
from fakes_docmemo import BagOfWordsEncoder

import llama_index_docmemo
from llama_index_docmemo.retriever import DocMemoRetriever
from llama_index_docmemo.step_runtime import blocking_pool, cpu_pool
from llama_index_docmemo.store import EdgePageStore, PageStore, QdrantClientPageStore
from llama_index_docmemo.store._qdrant import QdrantLayoutStore
from llama_index_docmemo.store.scope import PageFilter
from tests.test_store_backends import DIM, make_document

PACKAGE = Path(llama_index_docmemo.__file__).parent
POOLS = {"ThreadPoolExecutor", "ProcessPoolExecutor"}


def pool_constructions() -> list[str]:
    """``file:line`` of every ThreadPoolExecutor / ProcessPoolExecutor the package constructs."""
    found = []
    for path in sorted(PACKAGE.rglob("*.py")):
        for node in ast.walk(ast.parse(path.read_text(), str(path))):
            if isinstance(node, ast.Call):
                name = getattr(node.func, "id", None) or getattr(node.func, "attr", None)
                if name in POOLS:
                    found.append(f"{path.relative_to(PACKAGE)}:{node.lineno}")
    return found


def test_the_package_constructs_pools_in_one_module_only() -> None:
    assert [site.split(":")[0] for site in pool_constructions()] == ["step_runtime.py"]


def test_retrievers_borrow_the_process_pools(tmp_path: Path) -> None:
    encoder = BagOfWordsEncoder()
    with EdgePageStore(tmp_path / "s", encoder_name=encoder.name, dim=encoder.dim) as store:
        first, second = DocMemoRetriever(store, encoder), DocMemoRetriever(store, encoder)
        runners = [first.runner, second.runner]
    assert all(r.calls is blocking_pool() for r in runners)  # the sync driver's deadline calls
    assert all(r.cpu is None for r in runners)  # None: the process's CPU thread


def test_embedded_stores_share_the_one_cpu_thread(tmp_path: Path) -> None:
    """Qdrant Edge holds the GIL through a call: its async reads queue on the process's CPU
    thread, however many stores are open (no thread per store)."""
    threads: set[str] = set()
    stores = [EdgePageStore(tmp_path / name, encoder_name="t", dim=DIM) for name in "ab"]
    schema, records, embeddings = make_document("a.pdf", "v1", 2, seed=1, sparse=False)
    for store in stores:
        store.upsert_document(schema, records, embeddings)
        execute = store._execute

        def recorded(operation, execute=execute):
            threads.add(threading.current_thread().name)
            return execute(operation)

        store._execute = recorded  # type: ignore[method-assign]

    async def searches() -> list[int]:
        return [
            len(await s.asearch(embeddings[0], limit=2, page_filter=PageFilter())) for s in stores
        ]

    try:
        assert asyncio.run(searches()) == [2, 2]
    finally:
        for store in stores:
            store.close()
    assert threads == {cpu_pool()._thread_name_prefix + "_0"}


def test_the_async_store_api_is_declared_once() -> None:
    """Every backend's async reads are ``PageStore``'s; a backend overrides one hook."""
    reads = {
        name
        for name, value in vars(PageStore).items()
        if asyncio.iscoroutinefunction(value) and not name.startswith("_")
    }
    assert {"asearch", "aget_pages", "acount_pages", "alist_documents", "aget_schema"} <= reads
    for backend in (QdrantLayoutStore, EdgePageStore, QdrantClientPageStore):
        assert not reads & set(vars(backend)), backend.__name__


@pytest.mark.skipif(not hasattr(os, "fork"), reason="fork is POSIX only")
def test_a_forked_child_starts_pools_of_its_own() -> None:
    """A child has none of its parent's threads: a pool inherited with an idle thread would take
    the work and never run it."""
    assert blocking_pool().submit(lambda: 1).result() == 1  # the parent's pool has an idle thread
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", DeprecationWarning)  # fork of a threaded process
        pid = os.fork()
    if pid == 0:  # the child: exit 0 only if its pools run work
        try:
            ok = blocking_pool().submit(lambda: 2).result(timeout=10) == 2
            ok = ok and cpu_pool().submit(lambda: 3).result(timeout=10) == 3
        except BaseException:
            ok = False
        os._exit(0 if ok else 1)
    _, status = os.waitpid(pid, 0)
    assert os.waitstatus_to_exitcode(status) == 0
