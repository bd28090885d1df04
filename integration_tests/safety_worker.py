"""Helpers of the safety tests: a tiny hashing encoder, sample PDFs, and an indexer process.

Run as a script it indexes PDFs into an embedded store (``python safety_worker.py STORE PATH...
[--tenant T]``), so fault tests can kill it at a step named by ``$DOCMEMO_FAULT``.
"""

from __future__ import annotations

import argparse
import hashlib
import re
import sys
from collections.abc import Sequence
from pathlib import Path

import numpy as np
import pymupdf

from llama_index_docmemo.encoders.base import PageEncoder
from llama_index_docmemo.types import PageEmbedding, PageInput, QueryEmbedding, SparseVector

DIM = 32
_WORD = re.compile(r"[a-z0-9]+")


class HashEncoder(PageEncoder):
    """Words hashed into DIM buckets (dense) and into term ids (lexical): fast and deterministic."""

    name = "safety-hash"
    dim = DIM
    sparse = True

    def _embed(self, text: str) -> PageEmbedding:
        words = _WORD.findall(text.lower()) or ["empty"]
        rows = np.zeros((min(len(words), 64), DIM), dtype=np.float32)
        terms: dict[int, float] = {}
        for i, word in enumerate(words):
            digest = int(hashlib.md5(word.encode()).hexdigest(), 16)
            rows[i % len(rows), digest % DIM] += 1.0
            terms[digest % 100_000] = terms.get(digest % 100_000, 0.0) + 1.0
        rows += 1e-3
        return PageEmbedding(
            rows, rows.mean(axis=0), SparseVector(tuple(terms), tuple(terms.values()))
        )

    def encode_pages(self, pages: Sequence[PageInput]) -> list[PageEmbedding]:
        return [self._embed(page.text) for page in pages]

    def encode_queries(self, queries: Sequence[str]) -> list[QueryEmbedding]:
        return [self._embed(query) for query in queries]


def write_pdf(path: Path, pages: Sequence[str], *, size: tuple[float, float] = (595, 842)) -> Path:
    """A PDF whose pages hold the given texts (one paragraph each)."""
    path.parent.mkdir(parents=True, exist_ok=True)
    doc = pymupdf.open()
    for text in pages:
        page = doc.new_page(width=size[0], height=size[1])
        page.insert_textbox(pymupdf.Rect(60, 60, size[0] - 60, size[1] - 60), text, fontsize=11)
    doc.save(path)
    doc.close()
    return path


def main(argv: Sequence[str] | None = None) -> int:
    from llama_index_docmemo.indexing import DocumentIndexer
    from llama_index_docmemo.store import EdgePageStore

    parser = argparse.ArgumentParser()
    parser.add_argument("store", type=Path)
    parser.add_argument("paths", nargs="+", type=Path)
    parser.add_argument("--tenant", default=None)
    parser.add_argument("--write-batch", type=int, default=2)
    args = parser.parse_args(argv)
    encoder = HashEncoder()
    with EdgePageStore(args.store, encoder_name=encoder.name, dim=DIM, sparse=True) as store:
        store.max_batch_points = args.write_batch  # several batches per document: a partial write exists
        report = DocumentIndexer(store, encoder, ocr=False).index_paths(
            args.paths, tenant=args.tenant
        )
    print(report.summary())
    return 1 if report.failed else 0


if __name__ == "__main__":
    sys.exit(main())
