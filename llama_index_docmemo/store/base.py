"""The page store contract: one Qdrant point per page, two backends (Qdrant Edge, qdrant-client)."""

from __future__ import annotations

from abc import ABC, abstractmethod
from collections.abc import Callable, Iterator, Sequence
from contextlib import contextmanager
from typing import Any, TypeVar

from llama_index_docmemo.memory.schema import DocumentSchema
from llama_index_docmemo.step_runtime import to_cpu_thread, to_thread
from llama_index_docmemo.store.layouts import MultivectorLayout
from llama_index_docmemo.store.operations import prefetch_for
from llama_index_docmemo.store.points import StoredCard, built_card
from llama_index_docmemo.store.scope import PageFilter
from llama_index_docmemo.types import PageEmbedding, PageHit, PageRecord, PageRef, QueryEmbedding

T = TypeVar("T")


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

    holds_gil: bool = False
    """Its calls hold the GIL throughout (an in-process engine: Qdrant Edge): the async reads
    run them on the process's CPU thread, not the blocking pool (see
    :mod:`llama_index_docmemo.step_runtime`: threads would not run them in parallel, and several
    queued for the GIL starve the event loop)."""

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

    def list_cards(self, page_filter: PageFilter | None = None) -> list[StoredCard]:
        """The document cards (:mod:`.points`) of the documents visible through ``page_filter``,
        with the schema of the version each is of, by document id. The Qdrant stores keep a
        card on each document's record and read them in one request; this default makes them
        from the schemas and the first pages."""
        schemas = self.list_documents(page_filter)
        refs = [PageRef(s.doc_id, 1) for s in schemas]
        firsts = {r.doc_id: r for r in self.get_pages(refs, page_filter)} if refs else {}
        return [
            built_card(
                s, [p] if (p := firsts.get(s.doc_id)) and p.doc_version == s.doc_version else []
            )
            for s in schemas
        ]

    async def alist_cards(self, page_filter: PageFilter | None = None) -> list[StoredCard]:
        """Async :meth:`list_cards`."""
        return await self._aread("list_cards", page_filter)

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
        (:func:`~llama_index_docmemo.store.operations.prefetch_for`: 200 up to about 36,000 pages)."""

    async def asearch(
        self,
        query: QueryEmbedding,
        *,
        limit: int,
        page_filter: PageFilter | None = None,
        prefetch_limit: int | None = None,
    ) -> list[PageHit]:
        """Async :meth:`search`."""
        return await self._aread(
            "search",
            query,
            limit=limit,
            page_filter=page_filter,
            prefetch_limit=prefetch_limit,
        )

    def search_depth(self, page_filter: PageFilter | None = None) -> int:
        """First-stage candidates a search of ``page_filter`` takes without ``prefetch_limit``
        (:func:`~llama_index_docmemo.store.operations.prefetch_for` of the pages in scope). A query
        asks once and passes it to each of its searches, so the scope is counted once a query.
        Backends with a cheaper estimate than :meth:`count_pages` override this."""
        return prefetch_for(self.count_pages(page_filter))

    async def asearch_depth(self, page_filter: PageFilter | None = None) -> int:
        """Async :meth:`search_depth`."""
        return await self._aread("search_depth", page_filter)

    @abstractmethod
    def get_pages(
        self, refs: Sequence[PageRef], page_filter: PageFilter | None = None
    ) -> list[PageRecord]:
        """Records of the given pages that exist and pass ``page_filter`` (order of ``refs``)."""

    @abstractmethod
    def count_pages(self, page_filter: PageFilter | None = None) -> int:
        """Number of pages visible through ``page_filter``."""

    # -- async reads of the query path -------------------------------------------------------
    async def _off_loop(self, fn: Callable[..., T], *args: Any, **kwargs: Any) -> T:
        """``fn(*args, **kwargs)`` off the event loop, on the thread :attr:`holds_gil` says."""
        if self.holds_gil:
            return await to_cpu_thread(fn, *args, **kwargs)
        return await to_thread(fn, *args, **kwargs)

    async def _aread(self, method: str, *args: Any, **kwargs: Any) -> Any:
        """The async form of the read ``method`` (the name of a sync method above): by default
        the sync method off the event loop; a backend with native async reads overrides this
        one hook, never the async methods, so the async API is declared once."""
        return await self._off_loop(getattr(self, method), *args, **kwargs)

    async def aget_pages(
        self, refs: Sequence[PageRef], page_filter: PageFilter | None = None
    ) -> list[PageRecord]:
        """Async :meth:`get_pages`."""
        return await self._aread("get_pages", refs, page_filter)

    async def acount_pages(self, page_filter: PageFilter | None = None) -> int:
        """Async :meth:`count_pages`."""
        return await self._aread("count_pages", page_filter)

    async def alist_documents(self, page_filter: PageFilter | None = None) -> list[DocumentSchema]:
        """Async :meth:`list_documents`."""
        return await self._aread("list_documents", page_filter)

    async def aget_schema(self, doc_id: str, *, tenant: str | None = None) -> DocumentSchema | None:
        """Async :meth:`get_schema`."""
        return await self._aread("get_schema", doc_id, tenant=tenant)

    @abstractmethod
    def close(self) -> None:
        """Flush and release the storage."""

    def __enter__(self) -> PageStore:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()
