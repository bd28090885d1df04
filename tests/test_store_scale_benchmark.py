"""benchmarks/store_scale.py on a tiny size: ``--layouts default`` alone and ``--dim`` (one run of
the script, whose rows size docs/backends.md), and its corpus's ground truth."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
from benchmark_module import load_benchmark

bench = load_benchmark("store_scale")


def test_default_alone_at_another_width_writes_its_row_marked_default(tmp_path: Path) -> None:
    rows = tmp_path / "rows.json"
    argv = ["--pages", "200", "--vectors", "48", "--dim", "32", "--queries", "6"]
    argv += ["--layouts", "default", "--json", str(rows), "--workdir", str(tmp_path / "w")]
    bench.main(argv)
    (row,) = json.loads(rows.read_text())
    assert row["layout"] == "default" and row["default"] is True
    assert (row["pages"], row["vectors"], row["dim"]) == (200, 48, 32)
    # the whole store within the prefetch; the default pools 48 vectors into 16, which alone
    # moves the ranking from exact MaxSim over the 48 (0.87 here; random pages would give 0.05)
    assert row["recall_at_10"] >= 0.8
    assert row["disk_bytes_per_page"] > 0 and row["cpu_p50_ms"] > 0
    # the fit: what the 100 pages beyond the first document added, and a store's fixed part
    assert 0 <= row["marginal_bytes_per_page"] < row["disk_bytes_per_page"] < row["fixed_bytes"]
    assert not any((tmp_path / "w").iterdir())  # the stores are removed


def test_the_corpus_and_its_ground_truth_take_the_width() -> None:
    corpus = bench.Corpus(120, 12, dim=40)
    pages, _ = corpus.document(1)
    assert pages.shape == (20, 12, 40)
    queries, targets = corpus.queries(4)
    assert all(q.shape[1] == 40 for q in queries)
    exact = bench.ExactMaxSim(corpus, queries)
    for doc in range(corpus.n_docs):
        exact.add(doc, exact.scores_of(corpus.document(doc)[0]))
    top = exact.top()
    # a query is drawn from its target page's words: the target ranks near the top
    assert np.mean([t in row for t, row in zip(targets, top, strict=True)]) >= 0.75
