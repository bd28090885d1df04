"""A page encoder as a LlamaIndex embedding model: pooled vectors, usable by a VectorStoreIndex."""

from __future__ import annotations

import asyncio

import numpy as np
from fakes_docmemo import BagOfWordsEncoder
from llama_index.core import VectorStoreIndex
from llama_index.core.schema import TextNode

from llama_index_docmemo.encoders import EncoderEmbedding


def test_vectors_are_the_encoders_pooled_vectors() -> None:
    encoder = BagOfWordsEncoder()
    embedding = EncoderEmbedding(encoder)
    assert embedding.model_name == "bow-test"
    expected = encoder.encode_query("retail margin").pooled
    assert np.allclose(embedding.get_query_embedding("retail margin"), expected)
    assert np.allclose(embedding.get_text_embedding("retail margin"), expected)
    batch = embedding.get_text_embedding_batch(["retail margin", "office plants"])
    assert len(batch) == 2 and np.allclose(batch[1], encoder.encode_query("office plants").pooled)
    assert np.allclose(asyncio.run(embedding.aget_query_embedding("retail margin")), expected)


def test_a_vector_store_index_retrieves_with_it() -> None:
    nodes = [
        TextNode(text="notes on office plants and the weather", id_="plants"),
        TextNode(text="the retail segment margin rose in 2023", id_="margin"),
        TextNode(text="parking rules for visitors", id_="parking"),
    ]
    index = VectorStoreIndex(nodes, embed_model=EncoderEmbedding(BagOfWordsEncoder()))
    (best,) = index.as_retriever(similarity_top_k=1).retrieve("retail segment margin")
    assert best.node.node_id == "margin" and best.score > 0
