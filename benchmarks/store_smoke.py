"""Upsert time and query latency of the page store backends, on synthetic pages or dev PDFs.

Usage: python benchmarks/store_smoke.py [--pages 2000] [--vectors 32] [--dim 64] [--sparse]
       [--backends edge client] [--queries 50]
       python benchmarks/store_smoke.py --pdfs DIR [--limit 10]

Synthetic: random unit vectors (seeded), one document per 100 pages; queries are two-stage
(pooled prefetch of 200, MaxSim rerank), fused with the lexical branch when --sparse is given.

``--pdfs``: the first ``--limit`` PDFs of DIR are parsed and encoded once (default encoder, no
OCR), then written into a fresh Qdrant Edge store twice, page by page as ``upsert_document``
writes them, without and inside ``bulk_load()``: store seconds writing and indexing, and the
search p50 afterwards (the documents' first lines as queries).
"""

from __future__ import annotations

import argparse
import contextlib
import statistics
import tempfile
import time
from pathlib import Path

import numpy as np

from llama_index_docmemo.memory.schema import DocumentSchema
from llama_index_docmemo.store import EdgePageStore, PageStore, QdrantClientPageStore
from llama_index_docmemo.store.scope import PageFilter
from llama_index_docmemo.types import PageEmbedding, PageRecord, SparseVector

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


def bulk_load_on_pdfs(folder: Path, limit: int) -> None:
    """Store writes of real documents without and inside ``bulk_load()`` (encoding done once)."""
    from llama_index_docmemo.encoders import default_encoder
    from llama_index_docmemo.indexing import page_records
    from llama_index_docmemo.ingest.pdf import read_pdf
    from llama_index_docmemo.ingest.structure import build_schema
    from llama_index_docmemo.types import PageInput

    encoder = default_encoder()
    documents = []
    for pdf in sorted(folder.glob("*.pdf"))[:limit]:
        parsed = read_pdf(pdf.resolve(), doc_id=pdf.name, ocr=None)
        schema = build_schema(parsed)
        records = page_records(parsed, schema)
        embeddings = encoder.encode_pages([PageInput(r.ref, r.text) for r in records])
        documents.append((schema, records, embeddings))
    pages = sum(len(r) for _, r, _ in documents)
    queries = [
        encoder.encode_query(" ".join(records[0].text.split()[:12]) or "report")
        for _, records, _ in documents
    ]
    print(f"{len(documents)} PDFs, {pages} pages of {folder} (encoder {encoder.name})")
    print("| writes | store write s | index s | pages/s | search p50 ms |")
    print("|---|---:|---:|---:|---:|")
    for bulk in (False, True):
        with tempfile.TemporaryDirectory() as tmp:
            store = EdgePageStore(
                Path(tmp) / "s", encoder_name=encoder.name, dim=encoder.dim, sparse=encoder.sparse
            )
            started = time.perf_counter()
            with store.bulk_load() if bulk else contextlib.nullcontext():
                for document in documents:
                    store.upsert_document(*document)
                written = time.perf_counter()
            indexed = time.perf_counter()
            times = []
            for query in queries * 5:
                begin = time.perf_counter()
                store.search(query, limit=10)
                times.append((time.perf_counter() - begin) * 1000)
            store.close()
        label = "inside bulk_load()" if bulk else "one by one"
        print(
            f"| {label} | {written - started:.2f} | {indexed - written:.2f} "
            f"| {pages / (indexed - started):,.0f} | {statistics.median(times):.1f} |"
        )


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--pdfs", type=Path, help="measure bulk_load() on these PDFs instead")
    parser.add_argument("--limit", type=int, default=10, help="PDFs used with --pdfs")
    parser.add_argument("--pages", type=int, default=2000)
    parser.add_argument("--vectors", type=int, default=32)
    parser.add_argument("--dim", type=int, default=64)
    parser.add_argument("--queries", type=int, default=50)
    parser.add_argument("--sparse", action="store_true")
    parser.add_argument("--backends", nargs="+", default=["edge", "client"])
    args = parser.parse_args()
    if args.pdfs is not None:
        bulk_load_on_pdfs(args.pdfs, args.limit)
        return
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
