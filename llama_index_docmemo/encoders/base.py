"""The encoder contract: pages and queries -> multi-vectors (+ pooled vector, + optional lexical
vector), and the lexical vector itself (:class:`Bm25Lexical`, which text encoders and the
document cards write).

**The lexical vector**: BM25 term weights for Qdrant's sparse "lexical" vector, without IDF.

Qdrant applies IDF itself (``Modifier.IDF`` on the sparse vector), over the pages a query may
see, so documents carry only tf-saturated BM25 weights and queries carry 1.0 per term. The
tokenizer, English stopwords, Snowball stemmer and term hashing are Qdrant's own
(``qdrant_edge.Bm25``), so vectors written here match what a Qdrant server's built-in BM25
inference would produce for the same text.
"""

from __future__ import annotations

from abc import ABC, abstractmethod
from collections.abc import Sequence
from typing import Any, Literal

from qdrant_edge import Bm25, Bm25Config

from llama_index_docmemo.types import PageEmbedding, PageInput, QueryEmbedding, SparseVector


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


class Bm25Lexical:
    """Sparse BM25 vectors of page and query text.

    Args:
        k: term-frequency saturation.
        b: page-length normalisation (0: none, 1: full).
        avg_len: expected page length in tokens (after stopwords), the BM25 length pivot.
        language: stopword list and stemmer.
    """

    def __init__(
        self, k: float = 1.2, b: float = 0.75, avg_len: float = 256.0, language: str = "english"
    ) -> None:
        self._model = Bm25(Bm25Config(k=k, b=b, avg_len=avg_len, language=language))

    def embed_page(self, text: str) -> SparseVector:
        """tf-saturated BM25 weights of each distinct term of ``text``."""
        vector = self._model.embed_document(text)
        return _sorted(vector.indices, vector.values)

    def embed_query(self, text: str) -> SparseVector:
        """Weight 1.0 for each distinct term of ``text``: Qdrant multiplies in the IDF."""
        vector = self._model.embed_query(text)
        return _sorted(vector.indices, vector.values)


def _sorted(indices: list[int], values: list[float]) -> SparseVector:
    """Indices ascending, with their weights; zero weights dropped (an empty text gives ())."""
    pairs = sorted((int(i), float(v)) for i, v in zip(indices, values, strict=True) if v > 0)
    return SparseVector(tuple(i for i, _ in pairs), tuple(v for _, v in pairs))
