"""A search reaches the store and comes back through few package files (issue 44), measured by
``benchmarks/query_files.py`` on one offline query of the demo report: the engine, the loop's
rounds, the levers' round, the steps runtime, the store's reads, the embedded backend, and the
types of the hits it returns: seven, for a round's search and for the document stage's searches
alike (they are the rounds' I/O, asked from ``loop/query.py``; ``loop/state.py`` holds the
document layer's rules). The whole query runs at most 35 package files (47 before the folds of
issue 44: the store's record modules, the citations', the runtime's, the document layer's, the
reader's), the store's search at most 8 helpers."""

from __future__ import annotations

from benchmark_module import load_benchmark

query_files = load_benchmark("query_files")

PATH = [
    "llama_index_docmemo.levers.rounds",
    "llama_index_docmemo.loop.query",
    "llama_index_docmemo.query_engine",
    "llama_index_docmemo.step_runtime",
    "llama_index_docmemo.store.edge",
    "llama_index_docmemo.store.reads",
    "llama_index_docmemo.types",
]


def test_a_search_reaches_the_store_and_back_through_at_most_seven_files() -> None:
    counts = query_files.measure()
    path = counts["store path"]
    assert len(path) <= 7, path
    assert path == PATH  # the loop's suspended steps were followed to the backend, not cut
    assert set(path) <= set(counts["query"])
    assert len(counts["query"]) <= 35, counts["query"]
    assert len(counts["store helpers"]) <= 8, counts["store helpers"]
