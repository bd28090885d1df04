"""A :class:`PageEncoder` as a LlamaIndex embedding model, for stock pipelines over the same encoder.

``VectorStoreIndex(nodes, embed_model=EncoderEmbedding(default_encoder()))`` embeds chunks and
queries with the encoder's pooled vector (one vector per text), so a stock LlamaIndex engine and
DocMemo search with the same encoder. The pooled vector is the encoder's first-stage vector: the
CPU default is built for multi-vector MaxSim plus BM25, and one pooled vector per chunk finds
fewer pages than the package's own search (docs/evaluation.md).
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from llama_index.core.base.embeddings.base import BaseEmbedding
from pydantic import PrivateAttr

from llama_index_docmemo.step_runtime import to_thread

if TYPE_CHECKING:
    from llama_index_docmemo.encoders.base import PageEncoder


class EncoderEmbedding(BaseEmbedding):
    """Texts and queries -> the encoder's pooled query vector.

    Args:
        encoder: the page encoder (default: the package's CPU encoder).
    """

    _encoder: PageEncoder = PrivateAttr()

    def __init__(self, encoder: PageEncoder | None = None, **kwargs: Any) -> None:
        if encoder is None:
            from llama_index_docmemo.encoders.factory import default_encoder

            encoder = default_encoder()
        super().__init__(model_name=encoder.name, **kwargs)
        self._encoder = encoder

    @classmethod
    def class_name(cls) -> str:
        return "EncoderEmbedding"

    def _vectors(self, texts: list[str]) -> list[list[float]]:
        return [[float(v) for v in e.pooled] for e in self._encoder.encode_queries(texts)]

    def _get_query_embedding(self, query: str) -> list[float]:
        return self._vectors([query])[0]

    def _get_text_embedding(self, text: str) -> list[float]:
        return self._vectors([text])[0]

    def _get_text_embeddings(self, texts: list[str]) -> list[list[float]]:
        return self._vectors(texts)

    async def _aget_query_embedding(self, query: str) -> list[float]:
        return await to_thread(self._get_query_embedding, query)

    async def _aget_text_embedding(self, text: str) -> list[float]:
        return await to_thread(self._get_text_embedding, text)
