"""The encoder contract: pages and queries -> multi-vectors (+ pooled vector, + optional lexical vector)."""

from __future__ import annotations

from abc import ABC, abstractmethod
from collections.abc import Sequence
from typing import Any, Literal

from llama_index_docmemo.types import PageEmbedding, PageInput, QueryEmbedding


class PageEncoder(ABC):
    """Embeds pages and queries into one multi-vector space scored by MaxSim.

    Attributes:
        name: stable identifier stored with the collection, so a store is never queried
            with an encoder other than the one that filled it.
        dim: dimension of each vector (multivector rows and pooled vector).
        modality: what the encoder reads of a page: "text" or "image".
        sparse: whether embeddings carry a lexical sparse vector.
    """

    name: str
    dim: int
    modality: Literal["text", "image"] = "text"
    sparse: bool = False

    @abstractmethod
    def encode_pages(self, pages: Sequence[PageInput]) -> list[PageEmbedding]:
        """Embed a batch of pages."""

    @abstractmethod
    def encode_queries(self, queries: Sequence[str]) -> list[QueryEmbedding]:
        """Embed a batch of queries."""

    def encode_query(self, query: str) -> QueryEmbedding:
        return self.encode_queries([query])[0]

    def settings(self) -> dict[str, Any]:
        """What rebuilds this encoder beside its name (JSON values, stored in the page store's
        record, so that ``open_store(path)`` needs no encoder): see
        :func:`~llama_index_docmemo.encoders.load_encoder`."""
        return {}
