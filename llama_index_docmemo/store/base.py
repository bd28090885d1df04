"""The page store contract: one Qdrant point per page, two backends (Qdrant Edge, qdrant-client)."""

from __future__ import annotations

import threading
import weakref
from abc import ABC, abstractmethod
from collections.abc import Callable, Iterator, Sequence
from concurrent.futures import ThreadPoolExecutor
from contextlib import contextmanager
from typing import Any, TypeVar

from llama_index_docmemo.blocking import in_executor, to_thread
from llama_index_docmemo.memory.schema import DocumentSchema
from llama_index_docmemo.store.layouts import MultivectorLayout
from llama_index_docmemo.store.plans import prefetch_for
from llama_index_docmemo.store.scope import PageFilter
from llama_index_docmemo.types import PageEmbedding, PageHit, PageRecord, PageRef, QueryEmbedding

T = TypeVar("T")

_EXECUTOR_LOCK = threading.Lock()


class PageStore(ABC):
    """Pages of documents with multi-vectors, searchable by prefetch + MaxSim rerank.

    A document is identified by (tenant, doc_id): two tenants' ``report.pdf`` are two documents.
    ``page_filter`` follows :mod:`llama_index_docmemo.store.scope` (deny by default); ``None``
    is the owner's unrestricted view, for maintenance. Every backend behaves the same
    (congruence tests run the same cases on each).
    """

    encoder_name: str
    dim: int

    @property
    def layout(self) -> MultivectorLayout | None:
        """The layout pages are written in, for indexing workers to lay pages out in beside
        their encoder (``validation.lay_out``); None: the store computes its vectors itself."""
        return None

    @property
    def encoder_settings(self) -> dict[str, Any]:
        """What rebuilds the store's encoder with its name (see ``load_encoder``)."""
        return {}

    off_loop_threads: int | None = None
    """Threads running the async twins' blocking calls (None: the package's blocking pool). An
    in-process engine that holds the GIL through a call (Qdrant Edge) gets 1: threads would
    not run its calls in parallel, and several of them queued for the GIL starve the event
    loop (measured: 8 threads of searches stalled a loop 224-348 ms, one thread 35 ms)."""

    @abstractmethod
    def upsert_document(
        self,
        schema: DocumentSchema,
        pages: Sequence[PageRecord],
        embeddings: Sequence[PageEmbedding],
    ) -> None:
        """Store a new version of the document ``(schema.tenant, schema.doc_id)``.

        The new version becomes visible only when complete (the document record is the commit
        point), then the pages of the old one are removed; a crash or failed write at any step
        leaves the old version intact.
        """

    @abstractmethod
    def document_version(self, doc_id: str, *, tenant: str | None = None) -> str | None:
        """The stored version (content hash) of a document, or None if absent."""

    @abstractmethod
    def get_schema(self, doc_id: str, *, tenant: str | None = None) -> DocumentSchema | None:
        """The document's schema memory as stored at ingest."""

    @abstractmethod
    def list_documents(self, page_filter: PageFilter | None = None) -> list[DocumentSchema]:
        """Schemas of the documents visible through ``page_filter``."""

    @abstractmethod
    def delete_document(self, doc_id: str, *, tenant: str | None = None) -> bool:
        """Remove a document and all its pages; False when there was no such document."""

    @contextmanager
    def bulk_load(self) -> Iterator[None]:
        """Many documents are about to be written: a backend may defer index building (HNSW)
        until the block ends. Searches stay correct meanwhile, only slower. The default does
        nothing."""
        yield

    def recover(self) -> int:
        """Clean up writes a crash interrupted; returns how many documents needed it.

        A store whose writes are atomic has nothing to recover (the default)."""
        return 0

    @abstractmethod
    def search(
        self,
        query: QueryEmbedding,
        *,
        limit: int,
        page_filter: PageFilter | None = None,
        prefetch_limit: int | None = None,
    ) -> list[PageHit]:
        """Top ``limit`` pages: prefetch on the pooled (and sparse) vectors, rerank by MaxSim.

        ``prefetch_limit``: first-stage candidates; None sizes them to the pages in scope
        (:func:`~llama_index_docmemo.store.plans.prefetch_for`: 200 up to about 36,000 pages)."""

    async def asearch(
        self,
        query: QueryEmbedding,
        *,
        limit: int,
        page_filter: PageFilter | None = None,
        prefetch_limit: int | None = None,
    ) -> list[PageHit]:
        """Async :meth:`search`; backends with a native async client override this."""
        return await self._off_loop(
            self.search,
            query,
            limit=limit,
            page_filter=page_filter,
            prefetch_limit=prefetch_limit,
        )

    def search_depth(self, page_filter: PageFilter | None = None) -> int:
        """First-stage candidates a search of ``page_filter`` takes without ``prefetch_limit``
        (:func:`~llama_index_docmemo.store.plans.prefetch_for` of the pages in scope). A query
        asks once and passes it to each of its searches, so the scope is counted once a query.
        Backends with a cheaper estimate than :meth:`count_pages` override this."""
        return prefetch_for(self.count_pages(page_filter))

    async def asearch_depth(self, page_filter: PageFilter | None = None) -> int:
        """Async :meth:`search_depth`."""
        return await self._off_loop(self.search_depth, page_filter)

    @abstractmethod
    def get_pages(
        self, refs: Sequence[PageRef], page_filter: PageFilter | None = None
    ) -> list[PageRecord]:
        """Records of the given pages that exist and pass ``page_filter`` (order of ``refs``)."""

    @abstractmethod
    def count_pages(self, page_filter: PageFilter | None = None) -> int:
        """Number of pages visible through ``page_filter``."""

    # -- async reads of the query path: off the event loop by default ------------------------
    async def _off_loop(self, fn: Callable[..., T], *args: Any, **kwargs: Any) -> T:
        """``fn(*args, **kwargs)`` in a worker thread (this store's own, when it has one)."""
        if self.off_loop_threads is None:
            return await to_thread(fn, *args, **kwargs)
        with _EXECUTOR_LOCK:
            executor = self.__dict__.get("_off_loop_executor")
            if executor is None:
                executor = ThreadPoolExecutor(self.off_loop_threads, thread_name_prefix="store")
                self.__dict__["_off_loop_executor"] = executor
                weakref.finalize(self, executor.shutdown, wait=False)
        return await in_executor(executor, fn, *args, **kwargs)

    async def aget_pages(
        self, refs: Sequence[PageRef], page_filter: PageFilter | None = None
    ) -> list[PageRecord]:
        """Async :meth:`get_pages`."""
        return await self._off_loop(self.get_pages, refs, page_filter)

    async def acount_pages(self, page_filter: PageFilter | None = None) -> int:
        """Async :meth:`count_pages`."""
        return await self._off_loop(self.count_pages, page_filter)

    async def alist_documents(self, page_filter: PageFilter | None = None) -> list[DocumentSchema]:
        """Async :meth:`list_documents`."""
        return await self._off_loop(self.list_documents, page_filter)

    async def aget_schema(self, doc_id: str, *, tenant: str | None = None) -> DocumentSchema | None:
        """Async :meth:`get_schema`."""
        return await self._off_loop(self.get_schema, doc_id, tenant=tenant)

    @abstractmethod
    def close(self) -> None:
        """Flush and release the storage."""

    def __enter__(self) -> PageStore:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()
