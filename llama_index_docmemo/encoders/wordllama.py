"""The default CPU encoder: WordLlama static word vectors pooled over word windows, plus BM25.

WordLlama's wheel ships its weights (Llama-2 token embeddings distilled to 256 dims, truncatable
to 128 or 64) and tokenizer, so nothing is downloaded. A page becomes the L2-normalised mean
token vector of each window of ``window`` words (stride ``window / 2``); a query is one such
vector; MaxSim then scores a page by its best-matching window. Windows, not raw token vectors,
because on MMLongBench-Doc they retrieve better (recall@5 0.531 against 0.508) with about 25x
fewer vectors per page. The lexical BM25 vector (:mod:`.lexical`) carries most of the ranking
quality; see ``benchmarks/retrieval_recall.py``.
"""

from __future__ import annotations

import logging
import math
from collections.abc import Sequence
from functools import lru_cache
from pathlib import Path
from typing import Any

import numpy as np
from tokenizers import Tokenizer

from llama_index_docmemo.encoders.base import Bm25Lexical, PageEncoder
from llama_index_docmemo.types import PageEmbedding, PageInput, QueryEmbedding

DIMS = (64, 128, 256)
_SHIPPED_DIM = 256


def _import_wordllama() -> tuple[Any, Any]:
    """Import wordllama without letting its import-time ``logging.basicConfig(level=INFO)``
    reconfigure the host application's root logger (basicConfig is a no-op while the root
    logger has a handler, so one is lent for the duration of the import)."""
    root = logging.getLogger()
    guard = logging.NullHandler()
    lent = not root.handlers
    if lent:
        root.addHandler(guard)
    try:
        import wordllama
        from wordllama import WordLlama
    finally:
        if lent:
            root.removeHandler(guard)
    return wordllama, WordLlama


@lru_cache(maxsize=len(DIMS))
def load_wordllama(dim: int = _SHIPPED_DIM) -> tuple[np.ndarray, Tokenizer]:
    """Token embedding matrix (vocab, dim) and tokenizer from the installed wheel, never a hub.

    ``WordLlama.load()`` looks for the tokenizer under ``<package>/tokenizer/`` while the wheel
    ships it under ``<package>/tokenizers/``; pointing ``cache_dir`` at the package folder finds
    both files, and ``disable_download`` turns a missing file into an error instead of a fetch.
    """
    if dim not in DIMS:
        raise ValueError(f"WordLlama dim must be one of {DIMS}, got {dim}")
    wordllama, WordLlama = _import_wordllama()

    package = Path(wordllama.__file__).parent
    model = WordLlama.load(
        config="l2_supercat",
        dim=_SHIPPED_DIM,
        trunc_dim=dim if dim != _SHIPPED_DIM else None,
        cache_dir=package,
        disable_download=True,
    )
    embedding = np.ascontiguousarray(model.embedding, dtype=np.float32)
    embedding.setflags(write=False)
    return embedding, model.tokenizer


class WordLlamaEncoder(PageEncoder):
    """Word-window WordLlama multivectors, their mean as the pooled vector, and BM25 terms.

    Args:
        dim: 256 (shipped), or 128 / 64 (Matryoshka truncations of the same weights).
        window: words per window; windows overlap by half (stride ``window // 2``).
        max_windows: cap on vectors per page; longer pages get proportionally wider windows.
        lexical: add the BM25 sparse vector (Qdrant fuses it with the dense ranking).
        batch_size: pages tokenized and embedded together (bounds memory on long pages).
    """

    modality = "text"

    def __init__(
        self,
        dim: int = 256,
        window: int = 24,
        max_windows: int = 128,
        lexical: bool = True,
        batch_size: int = 64,
    ) -> None:
        if window < 2 or window % 2:
            raise ValueError(f"window must be an even number of words >= 2, got {window}")
        if max_windows < 1 or batch_size < 1:
            raise ValueError("max_windows and batch_size must be positive")
        self.dim = dim
        self.window = window
        self.max_windows = max_windows
        self.batch_size = batch_size
        self.sparse = lexical
        self.name = f"wordllama-l2-{dim}-w{window}" + ("+bm25" if lexical else "")
        self._embedding, tokenizer = load_wordllama(dim)
        self._tokenizer = Tokenizer.from_str(tokenizer.to_str())
        self._tokenizer.no_padding()
        self._tokenizer.no_truncation()
        self._lexical = Bm25Lexical() if lexical else None

    def settings(self) -> dict[str, Any]:
        return {
            "dim": self.dim,
            "window": self.window,
            "max_windows": self.max_windows,
            "lexical": self.sparse,
        }

    def encode_pages(self, pages: Sequence[PageInput]) -> list[PageEmbedding]:
        out: list[PageEmbedding] = []
        for start in range(0, len(pages), self.batch_size):
            batch = pages[start : start + self.batch_size]
            for page, windows in zip(batch, self._windows([p.text for p in batch]), strict=True):
                pooled = _normalise(windows.mean(axis=0, keepdims=True))[0]
                sparse = self._lexical.embed_page(page.text) if self._lexical else None
                out.append(PageEmbedding(windows, pooled, sparse))
        return out

    def encode_queries(self, queries: Sequence[str]) -> list[QueryEmbedding]:
        encodings = self._tokenizer.encode_batch(list(queries), add_special_tokens=False)
        out: list[QueryEmbedding] = []
        for query, encoding in zip(queries, encodings, strict=True):
            ids = np.asarray(encoding.ids, dtype=np.int64)
            mean = self._embedding[ids].mean(axis=0) if ids.size else np.zeros(self.dim)
            vector = _normalise(mean[None, :].astype(np.float32))
            sparse = self._lexical.embed_query(query) if self._lexical else None
            out.append(QueryEmbedding(vector, vector[0].copy(), sparse))
        return out

    def _windows(self, texts: Sequence[str]) -> list[np.ndarray]:
        """(n_windows, dim) normalised window vectors of each text; one zero row if it has none.

        Each text is cut into chunks of half a window; window j is chunks j and j+1 together,
        so every chunk is tokenized and summed once.
        """
        chunked = [self._chunks(text.split()) for text in texts]
        flat = [chunk for chunks in chunked for chunk in chunks]
        encodings = self._tokenizer.encode_batch(flat, add_special_tokens=False) if flat else []
        sums = np.zeros((len(flat), self.dim), dtype=np.float32)
        counts = np.zeros(len(flat), dtype=np.float32)
        for row, encoding in enumerate(encodings):
            if encoding.ids:
                sums[row] = self._embedding[np.asarray(encoding.ids, dtype=np.int64)].sum(axis=0)
                counts[row] = len(encoding.ids)
        result: list[np.ndarray] = []
        offset = 0
        for chunks in chunked:
            n = len(chunks)
            s, c = sums[offset : offset + n], counts[offset : offset + n]
            offset += n
            if n > 1:
                s, c = s[:-1] + s[1:], c[:-1] + c[1:]
            keep = c > 0
            if not keep.any():
                result.append(np.zeros((1, self.dim), dtype=np.float32))
                continue
            result.append(_normalise(s[keep] / c[keep, None]))
        return result

    def _chunks(self, words: list[str]) -> list[str]:
        """Half-window chunks of ``words``, widened so that a page has at most max_windows."""
        size = max(self.window // 2, math.ceil(len(words) / (self.max_windows + 1)))
        return [" ".join(words[i : i + size]) for i in range(0, len(words), size)]


def _normalise(vectors: np.ndarray) -> np.ndarray:
    """Rows scaled to unit length (zero rows stay zero), as float32."""
    norms = np.linalg.norm(vectors, axis=1, keepdims=True)
    return (vectors / np.where(norms > 0, norms, 1.0)).astype(np.float32)
