"""Runner and baselines over in-memory doubles: equal budget, resumability, settings guard."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from fakes_docmemo import BagOfWordsEncoder, MemoryPageStore

from llama_index_docmemo.config import DocMemoConfig
from llama_index_docmemo.errors import DocMemoError
from llama_index_docmemo.evaluation.baselines import build_engines, config_for
from llama_index_docmemo.evaluation.datasets import load_dataset
from llama_index_docmemo.evaluation.runner import RESULTS, check_settings, load_runs, run_evaluation
from llama_index_docmemo.evaluation.simulated import SimulatedReasoner
from llama_index_docmemo.query_engine import DocMemoQueryEngine

pytest.importorskip("llama_index.retrievers.bm25")


def pages() -> list[str]:
    out = [f"filler page {i} about office plants and weather" for i in range(1, 41)]
    out[2] = "revenue growth in 2023 was strong"
    out[20] = "segment margin of the retail business"
    out[30] = "headcount and offices"
    return out


@pytest.fixture()
def setup(tmp_path: Path):
    store = MemoryPageStore()
    store.add("r.pdf", pages())
    root = tmp_path / "data"
    (root / "pdfs").mkdir(parents=True)
    (root / "pdfs" / "r.pdf").write_bytes(b"%PDF-1.4")
    rows = [
        {
            "qid": "a",
            "doc": "r.pdf",
            "question": "revenue growth 2023",
            "answer": "x",
            "evidence_pages": [3, 21],
        },
        {
            "qid": "b",
            "doc": "r.pdf",
            "question": "headcount offices",
            "answer": "y",
            "evidence_pages": [31],
        },
        {
            "qid": "c",
            "doc": "r.pdf",
            "question": "weather",
            "answer": "Not answerable",
            "evidence_pages": [],
        },
    ]
    (root / "qa.jsonl").write_text("\n".join(json.dumps(r) for r in rows))
    encoder = BagOfWordsEncoder()

    def make(config: DocMemoConfig, reasoner):
        return DocMemoQueryEngine.from_defaults(
            store=store, encoder=encoder, reasoner=reasoner, config=config, evidence_images=False
        )

    base = DocMemoConfig(pages_per_round=3, rounds=3, candidates=10)
    engines = build_engines(
        ["static", "llamaindex-topk", "greedy"], base=base, make_engine=make, store=store
    )
    return load_dataset(root), engines


def test_equal_budget_and_resume(setup, tmp_path: Path) -> None:
    dataset, engines = setup
    assert list(engines) == ["docmemo", "static", "llamaindex-topk", "greedy"]
    out = tmp_path / "out"
    runs = run_evaluation(
        dataset, engines, lambda: SimulatedReasoner(fn=0.0, fp=0.0), out, progress=False
    )
    dm = {r.qid: r for r in runs["docmemo"]}
    assert len(dm) == 3
    for name in ("static", "llamaindex-topk"):
        for run in runs[name]:
            assert run.rounds == 1
            # k = DocMemo's pages; the word-overlap test store may have fewer matching pages
            assert 0 < run.pages_read <= min(dm[run.qid].pages_read, 40)
    assert dm["b"].stop_reason == "answered" and dm["b"].rounds == 1  # gold page found in round 1
    assert dm["c"].rounds == 3  # no gold page: never answered
    lines = (out / RESULTS).read_text().splitlines()
    assert len(lines) == 12
    traces = [json.loads(line) for line in (out / "traces.jsonl").read_text().splitlines()]
    assert {t["engine"] for t in traces} == {"docmemo", "static", "greedy"}
    again = run_evaluation(dataset, engines, lambda: SimulatedReasoner(), out, progress=False)
    assert (out / RESULTS).read_text().splitlines() == lines  # nothing re-run
    assert {n: len(v) for n, v in again.items()} == {n: 3 for n in engines}
    assert load_runs(out / RESULTS)[0].reads == runs["docmemo"][0].reads


def test_errors_are_reported_and_skipped(setup, tmp_path: Path) -> None:
    dataset, engines = setup
    failures: list[str] = []

    class Broken(SimulatedReasoner):
        def reason(self, inp):
            raise RuntimeError("boom")

    run_evaluation(
        dataset,
        {"docmemo": engines["docmemo"], "static": engines["static"]},
        Broken,
        tmp_path / "o",
        progress=False,
        on_error=lambda n, i, e: failures.append(f"{n}:{i.qid}:{e}"),
    )
    assert failures == [
        "docmemo:a:boom",
        "docmemo:b:boom",
        "docmemo:c:boom",
    ]  # static waits for docmemo
    assert not (tmp_path / "o" / RESULTS).read_text()


def test_settings_guard(tmp_path: Path) -> None:
    check_settings(tmp_path, {"seed": 0, "k": 5})
    check_settings(tmp_path, {"seed": 0, "k": 5})
    with pytest.raises(DocMemoError, match="different seed"):
        check_settings(tmp_path, {"seed": 1, "k": 5})


def test_ablation_configs() -> None:
    base = DocMemoConfig()
    assert config_for("docmemo", base) is base
    assert config_for("greedy", base).sampling == "greedy"
    nm = config_for("no_memory", base)
    assert not (nm.use_schema or nm.use_belief or nm.use_episodic)
    with pytest.raises(ValueError, match="unknown engine"):
        config_for("bogus", base)
