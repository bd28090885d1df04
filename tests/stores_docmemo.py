"""Real page stores for the engine's tests: Qdrant Edge and qdrant-client's local mode.

The engine's tests run on both backends (the congruence tests' way, ``test_store_backends.py``),
so what a query sees is what the package's stores do: versions, scopes and ``where`` included.
An Edge store's first open creates its payload indexes (seconds on a busy machine): one empty
store is made per session and each test's store is a copy of it.
"""

from __future__ import annotations

import shutil
from collections.abc import Callable, Iterator, Sequence
from pathlib import Path
from typing import Any

import pytest
from fakes_docmemo import BagOfWordsEncoder

from llama_index_docmemo.memory.schema import DocumentSchema
from llama_index_docmemo.store import EdgePageStore, PageStore, QdrantClientPageStore
from llama_index_docmemo.types import PageEmbedding, PageInput, PageRecord

BACKENDS = ("edge", "client")


def client_store() -> QdrantClientPageStore:
    """An empty store in qdrant-client's local mode (in memory: made in milliseconds)."""
    return QdrantClientPageStore(
        location=":memory:", encoder_name=BagOfWordsEncoder.name, dim=BagOfWordsEncoder.dim
    )


class StoreMaker:
    """Opens empty stores of either backend for the word encoder; the caller closes them."""

    def __init__(self, folder: Path) -> None:
        self.folder = folder
        self.template: Path | None = None
        self.made = 0

    def open(self, backend: str) -> PageStore:
        if backend == "client":
            return client_store()
        settings = {"encoder_name": BagOfWordsEncoder.name, "dim": BagOfWordsEncoder.dim}
        if self.template is None:
            self.template = self.folder / "template"
            EdgePageStore(self.template, **settings).close()
        self.made += 1
        path = self.folder / f"edge-{self.made}"
        shutil.copytree(self.template, path)
        return EdgePageStore(path, **settings)

    def with_document(self, doc_id: str, texts: Sequence[str]) -> Iterator[PageStore]:
        """An Edge store holding one document, closed when the generator ends: a module
        fixture's body is ``yield from store_maker.with_document(...)``."""
        store = self.open("edge")
        try:
            add_document(store, doc_id, texts)
            yield store
        finally:
            store.close()


def add_document(
    store: PageStore,
    doc_id: str,
    texts: Sequence[str],
    *,
    version: str = "v1",
    tenant: str | None = None,
    acl: Sequence[str] = (),
    title: str = "",
    embed: Callable[[Sequence[PageRecord]], list[PageEmbedding]] | None = None,
) -> DocumentSchema:
    """Index one document's page texts, embedded by ``embed`` (the word encoder by default; a
    new version replaces the old)."""
    n = len(texts)
    schema = DocumentSchema(
        doc_id=doc_id, doc_version=version, n_pages=n, tenant=tenant, acl=list(acl), title=title
    )
    records = [
        PageRecord(doc_id, version, i + 1, n, t, source="", tenant=tenant, acl=list(acl))
        for i, t in enumerate(texts)
    ]
    store.upsert_document(schema, records, (embed or word_embeddings)(records))
    return schema


def word_embeddings(records: Sequence[PageRecord]) -> list[PageEmbedding]:
    """The word encoder's embeddings of the pages' texts."""
    pages = [PageInput(r.ref, r.text) for r in records]
    return BagOfWordsEncoder().encode_pages(pages)


class StoreCalls:
    """Records a real store's calls of some of its methods, sync or async alike: each call's
    keyword arguments and result, under the sync name (``asearch`` counts as ``search``)."""

    def __init__(self, monkeypatch: pytest.MonkeyPatch, store: PageStore, *names: str) -> None:
        self.calls: dict[str, list[tuple[dict[str, Any], Any]]] = {name: [] for name in names}
        for name in names:
            monkeypatch.setattr(store, name, self._sync(name, getattr(store, name)))
            monkeypatch.setattr(store, f"a{name}", self._async(name, getattr(store, f"a{name}")))

    def _sync(self, name: str, method: Callable[..., Any]) -> Callable[..., Any]:
        def call(*args: Any, **kwargs: Any) -> Any:
            result = method(*args, **kwargs)
            self.calls[name].append((kwargs, result))
            return result

        return call

    def _async(self, name: str, method: Callable[..., Any]) -> Callable[..., Any]:
        async def call(*args: Any, **kwargs: Any) -> Any:
            result = await method(*args, **kwargs)
            self.calls[name].append((kwargs, result))
            return result

        return call

    def count(self, name: str) -> int:
        return len(self.calls[name])

    def clear(self) -> None:
        for calls in self.calls.values():
            calls.clear()
