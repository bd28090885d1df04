"""Helpers of the safety tests: a tiny hashing encoder, sample PDFs, fault hooks, an indexer process.

Run as a script it indexes PDFs into an embedded store (``python safety_worker.py STORE PATH...
[--tenant T] [--fault STEP[:ACTION]]``); with ``--fault`` it installs a fault hook in itself
first (:func:`fault_hook`), so a crash test can kill it at exactly that write step.
"""

from __future__ import annotations

import argparse
import errno
import hashlib
import os
import re
import signal
import sys
from collections.abc import Sequence
from pathlib import Path

import numpy as np
import pymupdf

from llama_index_docmemo.encoders.base import PageEncoder
from llama_index_docmemo.faults import STEPS, FaultHook, set_fault_hook
from llama_index_docmemo.store.base import PageStore
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


_ERRORS = {
    "enospc": (errno.ENOSPC, "No space left on device"),
    "erofs": (errno.EROFS, "Read-only file system"),
    "eio": (errno.EIO, "Input/output error"),
}


def fault_hook(spec: str) -> FaultHook:
    """``STEP[:ACTION]`` as a hook: at STEP, SIGKILL this process (``kill``, the default: no
    cleanup, as a power cut or the OOM killer would) or fail with an OS error (``enospc``: disk
    full, ``erofs``: read-only file system, ``eio``)."""
    step, _, action = spec.partition(":")
    if step not in STEPS or action not in ("", "kill", *_ERRORS):
        raise ValueError(f"unknown fault {spec!r}: STEP[:kill|enospc|erofs|eio], STEP in {STEPS}")

    def hook(reached: str) -> None:
        if reached != step:
            return
        if action in ("", "kill"):
            os.kill(os.getpid(), signal.SIGKILL)
        code, message = _ERRORS[action]
        raise OSError(code, f"{message} (injected at {step})")

    return hook


def open_hash_store(backend: str, path: Path) -> PageStore:
    """A store for :class:`HashEncoder` on disk: Qdrant Edge, or qdrant-client's local mode."""
    from llama_index_docmemo.store import EdgePageStore, QdrantClientPageStore

    settings = {"encoder_name": HashEncoder.name, "dim": DIM, "sparse": True}
    if backend == "edge":
        return EdgePageStore(path, **settings)  # type: ignore[arg-type]
    return QdrantClientPageStore(path=path, **settings)  # type: ignore[arg-type]


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
    parser.add_argument("--fault", default=None, help="STEP[:ACTION] (see fault_hook)")
    args = parser.parse_args(argv)
    if args.fault:
        set_fault_hook(fault_hook(args.fault))
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
