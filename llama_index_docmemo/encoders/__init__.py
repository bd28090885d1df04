"""Page and query encoders: the contract, the default CPU encoder, lookup by stored name, and the
encoder as a LlamaIndex embedding model (``EncoderEmbedding``)."""

from llama_index_docmemo.encoders.base import Bm25Lexical, PageEncoder
from llama_index_docmemo.encoders.embedding import EncoderEmbedding
from llama_index_docmemo.encoders.factory import DEFAULT_ENCODER, default_encoder, load_encoder
from llama_index_docmemo.encoders.wordllama import WordLlamaEncoder

__all__ = [
    "DEFAULT_ENCODER",
    "Bm25Lexical",
    "EncoderEmbedding",
    "PageEncoder",
    "WordLlamaEncoder",
    "default_encoder",
    "load_encoder",
]
