"""benchmarks/store_scale.py on a tiny size: ``--layouts default`` alone and ``--dim``."""

from __future__ import annotations

import json
import sys
from pathlib import Path

import numpy as np
import pytest

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "benchmarks"))
import store_scale as bench  # noqa: E402  (importable by name: --producers spawns processes)


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


def test_producers_lay_pages_out_and_build_the_same_store(tmp_path: Path) -> None:
    """Pages made and laid out in a producer process (what an indexing worker does beside its
    encoder) give the rows pages laid out by the store as it writes give."""
    rows: dict[int, dict[str, object]] = {}
    for producers in (0, 1):
        out = tmp_path / f"rows-{producers}.json"
        argv = ["--pages", "200", "--vectors", "48", "--dim", "32", "--queries", "6"]
        argv += ["--layouts", "default", "--json", str(out), "--workdir", str(tmp_path / "w")]
        bench.main([*argv, "--producers", str(producers)])
        (rows[producers],) = json.loads(out.read_text())
    for key in ("recall_at_10", "vector_bytes_per_page", "pages"):
        assert rows[1][key] == rows[0][key], key


def test_candidate_recall_tables_each_first_stage_and_pooled_rerank(
    capsys: pytest.CaptureFixture[str],
) -> None:
    bench.main(["--pages", "300", "--vectors", "48", "--queries", "6", "--candidate-recall"])
    lines = capsys.readouterr().out.splitlines()
    assert lines[0].startswith("exact first stages and pooled reranks, 300 pages, 6 queries")
    assert lines[1] == "| first stage | values | top-100 | top-200 |"
    rows = [[cell.strip() for cell in line.strip("|").split("|")] for line in lines[3:]]
    cells = {row[0]: row[1:] for row in rows}
    assert set(cells) == {
        *bench.CANDIDATE_STAGES,
        *(f"{s} + pool {f}" for s in bench.RERANKED_STAGES for f in bench.POOL_FACTORS),
    }
    assert cells["muvera k4-r16"][0] == cells["muvera k5-r8"][0] == "4,096"
    assert cells["muvera 2k"][0] == "2,048"
    assert cells["mean"][0] == "128"  # the vectors' own width (--dim)
    for stage in bench.CANDIDATE_STAGES:
        top100, top200 = (float(c) for c in cells[stage][1:])
        assert 0.6 < top100 <= top200 <= 1.0  # a random top-100 of 300 holds a third
    for stage in bench.RERANKED_STAGES:
        for factor in bench.POOL_FACTORS:
            reranked = [float(c) for c in cells[f"{stage} + pool {factor}"][1:]]
            # the rerank's top-10 comes from the P candidates: it cannot find more than they hold
            found = [float(c) for c in cells[stage][1:]]
            assert all(0.0 < r <= f for r, f in zip(reranked, found, strict=True))
