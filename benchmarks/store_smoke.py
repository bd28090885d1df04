"""Upsert time and query latency of the page store backends on synthetic pages.

Usage: python benchmarks/store_smoke.py [--pages 2000] [--vectors 32] [--dim 64] [--sparse]
       [--backends edge client] [--queries 50]

Random unit vectors (seeded), one document per 100 pages; queries are two-stage (pooled
prefetch of 200, MaxSim rerank), fused with the lexical branch when --sparse is given.
"""

from __future__ import annotations

import argparse
import statistics
import tempfile
import time
from pathlib import Path

import numpy as np

from llama_index_docmemo.memory.schema import DocumentSchema
from llama_index_docmemo.store import EdgePageStore, PageStore, QdrantClientPageStore
from llama_index_docmemo.types import PageEmbedding, PageFilter, PageRecord, SparseVector

PAGES_PER_DOC = 100


def embedding(rng: np.random.Generator, rows: int, dim: int, sparse: bool) -> PageEmbedding:
    terms = rng.choice(5000, size=40, replace=False)
    return PageEmbedding(
        rng.normal(size=(rows, dim)).astype(np.float32),
        rng.normal(size=dim).astype(np.float32),
        SparseVector(tuple(int(t) for t in terms), tuple(rng.uniform(0.2, 2.0, 40).tolist()))
        if sparse
        else None,
    )


def documents(args: argparse.Namespace) -> list[tuple]:
    rng = np.random.default_rng(0)
    docs = []
    for start in range(0, args.pages, PAGES_PER_DOC):
        n = min(PAGES_PER_DOC, args.pages - start)
        doc_id = f"doc{start // PAGES_PER_DOC:03d}.pdf"
        schema = DocumentSchema(doc_id=doc_id, doc_version="v1", n_pages=n)
        records = [
            PageRecord(doc_id, "v1", p, n, f"text of page {p}", f"/d/{doc_id}")
            for p in range(1, n + 1)
        ]
        embeddings = [embedding(rng, args.vectors, args.dim, args.sparse) for _ in records]
        docs.append((schema, records, embeddings))
    return docs


def open_backend(name: str, folder: Path, args: argparse.Namespace) -> PageStore:
    settings = {"encoder_name": "synthetic", "dim": args.dim, "sparse": args.sparse}
    if name == "edge":
        return EdgePageStore(folder / "edge", **settings)
    return QdrantClientPageStore(path=folder / "client", **settings)


def measure(name: str, args: argparse.Namespace, docs: list[tuple]) -> dict[str, float]:
    rng = np.random.default_rng(1)
    queries = [embedding(rng, 12, args.dim, args.sparse) for _ in range(args.queries)]
    with tempfile.TemporaryDirectory() as tmp:
        started = time.perf_counter()
        store = open_backend(name, Path(tmp), args)
        opened = time.perf_counter() - started
        started = time.perf_counter()
        for doc in docs:
            store.upsert_document(*doc)
        upsert = time.perf_counter() - started
        latencies = {}
        for label, page_filter in (("all", None), ("one doc", PageFilter(doc_ids=("doc003.pdf",)))):
            times = []
            for query in queries:
                started = time.perf_counter()
                store.search(query, limit=10, page_filter=page_filter, prefetch_limit=200)
                times.append(time.perf_counter() - started)
            latencies[label] = statistics.median(times) * 1000
        started = time.perf_counter()
        store.close()
        closed = time.perf_counter() - started
    return {
        "open_s": opened,
        "upsert_s": upsert,
        "query_ms_all": latencies["all"],
        "query_ms_one_doc": latencies["one doc"],
        "close_s": closed,
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--pages", type=int, default=2000)
    parser.add_argument("--vectors", type=int, default=32)
    parser.add_argument("--dim", type=int, default=64)
    parser.add_argument("--queries", type=int, default=50)
    parser.add_argument("--sparse", action="store_true")
    parser.add_argument("--backends", nargs="+", default=["edge", "client"])
    args = parser.parse_args()
    docs = documents(args)
    print(
        f"{args.pages} pages x {args.vectors} vectors x dim {args.dim}, sparse={args.sparse}, "
        f"median of {args.queries} queries (limit 10, prefetch 200)"
    )
    print("| backend | open s | upsert s | query ms (all) | query ms (one doc) | close s |")
    print("|---|---|---|---|---|---|")
    for name in args.backends:
        r = measure(name, args, docs)
        print(
            f"| {name} | {r['open_s']:.2f} | {r['upsert_s']:.2f} | {r['query_ms_all']:.1f} | "
            f"{r['query_ms_one_doc']:.1f} | {r['close_s']:.2f} |"
        )


if __name__ == "__main__":
    main()
