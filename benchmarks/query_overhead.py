"""Per-query overhead of the DocMemo loop at corpus scale: does a query's state grow with the corpus?

Builds (or reopens) a Qdrant Edge store of synthetic pages in one tenant (``--pages`` pages,
50 per document, tiny synthetic vectors: the store's search cost is not what is measured
here), then times a query's start and one round's selection and update (the rules of
:mod:`llama_index_docmemo.loop.state` and the round's search), with the whole tenant in scope and with one
document in scope. Store calls (count, search, schema and page fetches) are timed separately
by a wrapper around the store, so "loop" is the loop's own work. Memory is the tracemalloc
peak over start + selection + update (store results included).

    python benchmarks/query_overhead.py --pages 500000
    python benchmarks/query_overhead.py --pages 500000 --store /tmp/overhead-500k  # reuse

The store is written inside ``PageStore.bulk_load()`` (HNSW built once, at the end) unless
``--no-bulk-load`` is given (segments then stay unindexed, as 0.1.0 left them). The store's own
search time is reported apart ("search ms").

Targets: start + selection + update <= 20 ms and <= 5 MB at 500,000 pages in scope (issue 11);
the store's search <= 50 ms p50 over a 500,000-page tenant after a bulk load (issue 19).

Measured 2026-11-30 on the shared 2-core machine (load average ~12), 30 queries per scope:
500,000 pages in scope: loop 1.96 ms p50 / 10.5 ms p95, peak 0.19 MB, 9 beliefs, 30 schemas;
1 document: 2.1 ms / 13.6 ms, 0.06 MB. Store time (reported apart): 520 ms p50 per query at
500,000 pages over unindexed segments (``--optimize`` was stopped after 32 minutes on the loaded
machine), 13 ms over one document. The 0.1.0 loop started a query by loading all
10,000 schemas (3.6 s on this store) and allocating beliefs over all 500,000 pages (8.6 MB).
"""

from __future__ import annotations

import argparse
import contextlib
import json
import statistics
import tempfile
import time
import tracemalloc
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

import numpy as np

from llama_index_docmemo.config import DocMemoConfig
from llama_index_docmemo.encoders.base import PageEncoder
from llama_index_docmemo.events import LLMCallTally
from llama_index_docmemo.loop import DocMemoRunner
from llama_index_docmemo.loop.query import select
from llama_index_docmemo.loop.state import Reading, apply, start
from llama_index_docmemo.memory.schema import DocumentSchema, Section
from llama_index_docmemo.step_runtime import run
from llama_index_docmemo.store.edge import EdgePageStore
from llama_index_docmemo.store.scope import PageFilter
from llama_index_docmemo.types import Feedback, PageEmbedding, PageInput, PageRecord, QueryEmbedding

DIM = 16
VECTORS_PER_PAGE = 2
PAGES_PER_DOC = 50
TENANT = "acme"
TARGET_MS, TARGET_MB = 20.0, 5.0
TARGET_SEARCH_MS = 50.0


class SyntheticEncoder(PageEncoder):
    """Random unit vectors (seeded by the text), so queries hit arbitrary pages."""

    name = "synthetic-overhead"
    dim = DIM

    def _embed(self, text: str) -> PageEmbedding:
        rng = np.random.default_rng(abs(hash(text)) % 2**32)
        multi = rng.normal(size=(VECTORS_PER_PAGE, DIM)).astype(np.float32)
        multi /= np.linalg.norm(multi, axis=1, keepdims=True)
        return PageEmbedding(multivector=multi, pooled=multi.mean(axis=0))

    def encode_pages(self, pages: Sequence[PageInput]) -> list[PageEmbedding]:
        return [self._embed(p.text) for p in pages]

    def encode_queries(self, queries: Sequence[str]) -> list[QueryEmbedding]:
        return [self._embed(q) for q in queries]


class TimedStore:
    """Delegates to a store, adding the seconds spent in each call to ``seconds`` (and those in
    ``search`` to ``search_seconds``)."""

    def __init__(self, store: EdgePageStore) -> None:
        self._store = store
        self.seconds = 0.0
        self.search_seconds = 0.0
        self.encoder_name = store.encoder_name

    def __getattr__(self, name: str) -> Any:
        target = getattr(self._store, name)
        if not callable(target):
            return target

        def timed(*args: Any, **kwargs: Any) -> Any:
            started = time.perf_counter()
            try:
                return target(*args, **kwargs)
            finally:
                spent = time.perf_counter() - started
                self.seconds += spent
                if name == "search":
                    self.search_seconds += spent

        return timed


def doc_name(i: int) -> str:
    return f"doc{i:05d}.pdf"


def build(path: Path, n_docs: int, *, bulk: bool, batch_docs: int = 200) -> tuple[float, float]:
    """Fill the store with ``n_docs`` documents of 50 pages, inside ``bulk_load()`` when ``bulk``
    (the vector index is then built once at the end); returns (seconds writing, seconds
    building the index)."""
    store = EdgePageStore(path, encoder_name=SyntheticEncoder.name, dim=DIM)
    rng = np.random.default_rng(0)
    started = time.perf_counter()
    try:
        with store.bulk_load() if bulk else contextlib.nullcontext():
            for first in range(0, n_docs, batch_docs):
                for i in range(first, min(n_docs, first + batch_docs)):
                    doc = doc_name(i)
                    schema = DocumentSchema(
                        doc_id=doc,
                        doc_version=f"v{i}",
                        source=f"/data/{doc}",
                        n_pages=PAGES_PER_DOC,
                        tenant=TENANT,
                        sections=[Section(title="Part I", start_page=1, end_page=PAGES_PER_DOC)],
                        page_sections={p: "Part I" for p in range(1, PAGES_PER_DOC + 1)},
                    )
                    records = [
                        PageRecord(
                            doc,
                            f"v{i}",
                            p,
                            PAGES_PER_DOC,
                            f"page {p} of {doc}",
                            "",
                            section="Part I",
                            tenant=TENANT,
                        )
                        for p in range(1, PAGES_PER_DOC + 1)
                    ]
                    multi = rng.normal(size=(PAGES_PER_DOC, VECTORS_PER_PAGE, DIM)).astype(
                        np.float32
                    )
                    multi /= np.linalg.norm(multi, axis=2, keepdims=True)
                    embeddings = [
                        PageEmbedding(multivector=m, pooled=m.mean(axis=0)) for m in multi
                    ]
                    store.upsert_document(schema, records, embeddings)
                done = min(n_docs, first + batch_docs)
                rate = done * PAGES_PER_DOC / (time.perf_counter() - started)
                print(
                    f"  {done * PAGES_PER_DOC:>7} pages written ({rate:,.0f} pages/s)", flush=True
                )
            written = time.perf_counter()
    finally:
        store.close()
    return written - started, time.perf_counter() - written


def one_query(
    runner: DocMemoRunner, store: TimedStore, scope: PageFilter, question: str, memory: bool
) -> dict[str, float]:
    """Start + one round's selection + update: times (``memory`` False) or the tracemalloc
    peak (``memory`` True; tracing slows Python down several times, so never both)."""
    store.seconds = 0.0
    store.search_seconds = 0.0
    if memory:
        tracemalloc.start()
    started = time.perf_counter()
    state = start(question, scope, runner.config)
    after_start = time.perf_counter()
    state, selection = run(select(runner, state))
    after_select = time.perf_counter()
    shown = [r.ref for r in selection.pages]
    feedback = Feedback(useful_pages=shown[:1], irrelevant_pages=shown[1:], llm_calls=1)
    state, _ = apply(state, Reading(selection, feedback, LLMCallTally()), runner.config)
    ended = time.perf_counter()
    peak = 0
    if memory:
        _, peak = tracemalloc.get_traced_memory()
        tracemalloc.stop()
    total = ended - started
    return {
        "start_ms": (after_start - started) * 1000,
        "select_ms": (after_select - after_start) * 1000,
        "update_ms": (ended - after_select) * 1000,
        "store_ms": store.seconds * 1000,
        "search_ms": store.search_seconds * 1000,
        "loop_ms": (total - store.seconds) * 1000,
        "total_ms": total * 1000,
        "peak_mb": peak / 2**20,
        "beliefs": float(len(state.beliefs)),
        "schemas": float(len(state.schema.schemas)),
    }


def summarise(rows: list[dict[str, float]]) -> dict[str, float]:
    out: dict[str, float] = {}
    for key in rows[0]:
        values = sorted(r[key] for r in rows)
        out[f"{key}_p50"] = statistics.median(values)
        out[f"{key}_p95"] = values[min(len(values) - 1, int(0.95 * len(values)))]
    return out


def measure(path: Path, n_docs: int, queries: int) -> dict[str, dict[str, float]]:
    store = EdgePageStore(path, encoder_name=SyntheticEncoder.name, dim=DIM)
    timed = TimedStore(store)
    runner = DocMemoRunner.build(
        timed,  # type: ignore[arg-type]
        SyntheticEncoder(),
        DocMemoConfig(),
        round_events=False,
    )
    scopes: dict[str, Callable[[int], PageFilter]] = {
        f"tenant ({n_docs * PAGES_PER_DOC:,} pages)": lambda i: PageFilter(tenant=TENANT),
        f"1 document ({PAGES_PER_DOC} pages)": lambda i: PageFilter(
            tenant=TENANT, doc_ids=(doc_name(i % n_docs),)
        ),
    }
    results = {}
    try:
        for name, scope in scopes.items():
            one_query(runner, timed, scope(0), "warm-up", memory=False)
            rows = [
                one_query(runner, timed, scope(i), f"question {i}", memory=False)
                for i in range(queries)
            ]
            peaks = [
                one_query(runner, timed, scope(i), f"question {i}", memory=True)["peak_mb"]
                for i in range(queries)
            ]
            for row, peak in zip(rows, peaks, strict=True):
                row["peak_mb"] = peak
            results[name] = summarise(rows)
    finally:
        store.close()
    return results


def table(results: dict[str, dict[str, float]]) -> str:
    head = (
        "| scope | loop: start+select+update ms (p50 / p95) | peak MB (p50 / p95) "
        "| store ms (p50) | search ms (p50 / p95) | start / select / update ms (p50, store incl.) "
        "| beliefs | schemas |"
    )
    lines = [head, "|" + "---|" * 8]
    for name, r in results.items():
        lines.append(
            f"| {name} | {r['loop_ms_p50']:.2f} / {r['loop_ms_p95']:.2f} "
            f"| {r['peak_mb_p50']:.2f} / {r['peak_mb_p95']:.2f} | {r['store_ms_p50']:.1f} "
            f"| {r['search_ms_p50']:.1f} / {r['search_ms_p95']:.1f} "
            f"| {r['start_ms_p50']:.1f} / {r['select_ms_p50']:.1f} / {r['update_ms_p50']:.2f} "
            f"| {r['beliefs_p50']:.0f} | {r['schemas_p50']:.0f} |"
        )
    return "\n".join(lines)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--pages", type=int, default=500_000, help="pages in the tenant")
    parser.add_argument("--queries", type=int, default=30)
    parser.add_argument("--store", type=Path, help="store folder to build or reuse")
    parser.add_argument("--json", type=Path, help="also write the numbers here")
    parser.add_argument(
        "--no-bulk-load", action="store_true", help="write without bulk_load (no vector index)"
    )
    args = parser.parse_args()
    n_docs = max(1, args.pages // PAGES_PER_DOC)
    path = args.store or Path(tempfile.mkdtemp(prefix="docmemo-overhead-")) / "store"
    if not (path / "edge_config.json").is_file():
        print(f"building {n_docs:,} documents x {PAGES_PER_DOC} pages in {path}")
        writing, indexing = build(path, n_docs, bulk=not args.no_bulk_load)
        print(
            f"built in {writing + indexing:.0f} s ({writing:.0f} s writing, {indexing:.0f} s indexing)"
        )
    results = measure(path, n_docs, args.queries)
    print()
    print(table(results))
    worst = max(r["loop_ms_p95"] for r in results.values())
    peak = max(r["peak_mb_p95"] for r in results.values())
    met = worst <= TARGET_MS and peak <= TARGET_MB
    print(
        f"\ntarget <= {TARGET_MS:.0f} ms and <= {TARGET_MB:.0f} MB per query (p95): "
        f"{'met' if met else 'NOT met'} ({worst:.2f} ms, {peak:.2f} MB)"
    )
    search = max(r["search_ms_p50"] for r in results.values())
    print(
        f"store search <= {TARGET_SEARCH_MS:.0f} ms p50: "
        f"{'met' if search <= TARGET_SEARCH_MS else 'NOT met'} ({search:.1f} ms)"
    )
    if args.json:
        args.json.write_text(json.dumps(results, indent=2))


if __name__ == "__main__":
    main()
