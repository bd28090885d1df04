"""Read-only memo of the encoder and page store during an evaluation.

An evaluation asks the same questions of the same store many times (every engine, every seed, every
cell of the reader map). Searches are deterministic (the store breaks score ties by document and
page), so remembering a search's answer changes no result, only the time a run takes. The store is
read-only while engines run; writing through this wrapper is refused.
"""

from __future__ import annotations

import hashlib
from collections.abc import Sequence

import numpy as np

from llama_index_docmemo.encoders.base import PageEncoder
from llama_index_docmemo.errors import StoreError
from llama_index_docmemo.memory.schema import DocumentSchema
from llama_index_docmemo.store.base import PageStore
from llama_index_docmemo.store.points import StoredCard
from llama_index_docmemo.store.scope import PageFilter
from llama_index_docmemo.types import (
    PageEmbedding,
    PageHit,
    PageInput,
    PageRecord,
    PageRef,
    QueryEmbedding,
)


class MemoEncoder(PageEncoder):
    """Delegates to ``inner``, remembering each query's embedding by its text."""

    def __init__(self, inner: PageEncoder) -> None:
        self.inner = inner
        self.name = inner.name
        self.dim = inner.dim
        self.modality = inner.modality
        self.sparse = inner.sparse
        self._queries: dict[str, QueryEmbedding] = {}

    def encode_pages(self, pages: Sequence[PageInput]) -> list[PageEmbedding]:
        return self.inner.encode_pages(pages)

    def encode_queries(self, queries: Sequence[str]) -> list[QueryEmbedding]:
        missing = [q for q in dict.fromkeys(queries) if q not in self._queries]
        if missing:
            for text, embedding in zip(missing, self.inner.encode_queries(missing), strict=True):
                self._queries[text] = embedding
        return [self._queries[q] for q in queries]


def embedding_key(query: QueryEmbedding) -> str:
    """A digest of every vector of a query (equal digests: the same search)."""
    digest = hashlib.blake2b(digest_size=16)
    digest.update(np.ascontiguousarray(query.multivector, dtype=np.float32).tobytes())
    digest.update(np.ascontiguousarray(query.pooled, dtype=np.float32).tobytes())
    if query.sparse is not None:
        digest.update(repr((tuple(query.sparse.indices), tuple(query.sparse.values))).encode())
    return digest.hexdigest()


class MemoStore(PageStore):
    """Delegates reads to ``inner`` and remembers searches, schemas and page records."""

    def __init__(self, inner: PageStore) -> None:
        self.inner = inner
        self.encoder_name = inner.encoder_name
        self.dim = inner.dim
        self._searches: dict[tuple[object, ...], list[PageHit]] = {}
        self._by_identity: dict[tuple[object, ...], tuple[QueryEmbedding, list[PageHit]]] = {}
        self._schemas: dict[tuple[str | None, str], DocumentSchema | None] = {}
        self._listings: dict[PageFilter | None, list[DocumentSchema]] = {}
        self._depths: dict[PageFilter | None, int] = {}
        self._cards: dict[PageFilter | None, list[StoredCard]] = {}

    def upsert_document(
        self,
        schema: DocumentSchema,
        pages: Sequence[PageRecord],
        embeddings: Sequence[PageEmbedding],
    ) -> None:
        raise StoreError("the evaluation's store view is read-only")

    def delete_document(self, doc_id: str, *, tenant: str | None = None) -> bool:
        raise StoreError("the evaluation's store view is read-only")

    def document_version(self, doc_id: str, *, tenant: str | None = None) -> str | None:
        schema = self.get_schema(doc_id, tenant=tenant)
        return None if schema is None else schema.doc_version

    def get_schema(self, doc_id: str, *, tenant: str | None = None) -> DocumentSchema | None:
        key = (tenant, doc_id)
        if key not in self._schemas:
            self._schemas[key] = self.inner.get_schema(doc_id, tenant=tenant)
        return self._schemas[key]

    def list_documents(self, page_filter: PageFilter | None = None) -> list[DocumentSchema]:
        if page_filter not in self._listings:
            self._listings[page_filter] = self.inner.list_documents(page_filter)
        return list(self._listings[page_filter])

    def list_cards(self, page_filter: PageFilter | None = None) -> list[StoredCard]:
        if page_filter not in self._cards:
            self._cards[page_filter] = self.inner.list_cards(page_filter)
        return list(self._cards[page_filter])

    def search(
        self,
        query: QueryEmbedding,
        *,
        limit: int,
        page_filter: PageFilter | None = None,
        prefetch_limit: int | None = None,
    ) -> list[PageHit]:
        fast = (id(query), limit, page_filter, prefetch_limit)
        known = self._by_identity.get(fast)
        if known is not None and known[0] is query:  # the MemoEncoder's own embedding object
            return list(known[1])
        key = (embedding_key(query), limit, page_filter, prefetch_limit)
        if key not in self._searches:
            self._searches[key] = self.inner.search(
                query, limit=limit, page_filter=page_filter, prefetch_limit=prefetch_limit
            )
        self._by_identity[fast] = (query, self._searches[key])
        return list(self._searches[key])

    def get_pages(
        self, refs: Sequence[PageRef], page_filter: PageFilter | None = None
    ) -> list[PageRecord]:
        return self.inner.get_pages(refs, page_filter)

    def count_pages(self, page_filter: PageFilter | None = None) -> int:
        return self.inner.count_pages(page_filter)

    def search_depth(self, page_filter: PageFilter | None = None) -> int:
        if page_filter not in self._depths:
            self._depths[page_filter] = self.inner.search_depth(page_filter)
        return self._depths[page_filter]

    def close(self) -> None:
        self.inner.close()

    def __repr__(self) -> str:
        return f"MemoStore({self.inner!r})"
