"""Runner and baselines on a real store: fixed budget, same first round, stop rules, resume."""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path

import pytest
from fakes_docmemo import BagOfWordsEncoder
from stores_docmemo import StoreMaker

from llama_index_docmemo.config import DocMemoConfig
from llama_index_docmemo.errors import DocMemoError
from llama_index_docmemo.evaluation.baselines import build_engines, check_engine_names, static_k
from llama_index_docmemo.evaluation.configs import EngineConfigs
from llama_index_docmemo.evaluation.datasets import load_dataset
from llama_index_docmemo.evaluation.runner import RESULTS, check_settings, load_runs, run_evaluation
from llama_index_docmemo.evaluation.simulated import SimulatedReader
from llama_index_docmemo.evaluation.stopping import StopRule
from llama_index_docmemo.query_engine import DocMemoQueryEngine
from llama_index_docmemo.store import PageStore
from llama_index_docmemo.types import PageRef


def pages() -> list[str]:
    out = [f"filler page {i} about office plants and weather" for i in range(1, 41)]
    out[2] = "page on revenue growth in 2023, which was strong"
    out[20] = "page on the segment margin of the retail business"
    out[30] = "page on headcount and offices"
    return out


@pytest.fixture(scope="module")
def store(store_maker: StoreMaker) -> Iterator[PageStore]:
    """The report, shared: the runs only read it (on Edge: the store is not what is tested)."""
    yield from store_maker.with_document("r.pdf", pages())


@pytest.fixture()
def setup(tmp_path: Path, store: PageStore):
    root = tmp_path / "data"
    (root / "pdfs").mkdir(parents=True)
    (root / "pdfs" / "r.pdf").write_bytes(b"%PDF-1.4")
    rows = [
        {
            "qid": "a",
            "doc": "r.pdf",
            "question": "revenue growth 2023 page",
            "answer": "x",
            "evidence_pages": [3, 21],
        },
        {
            "qid": "b",
            "doc": "r.pdf",
            "question": "headcount offices page",
            "answer": "y",
            "evidence_pages": [31],
        },
        {
            "qid": "c",
            "doc": "r.pdf",
            "question": "weather page",
            "answer": "Not answerable",
            "evidence_pages": [],
        },
    ]
    (root / "qa.jsonl").write_text("\n".join(json.dumps(r) for r in rows))
    encoder = BagOfWordsEncoder()

    def make(config: DocMemoConfig, reader):
        return DocMemoQueryEngine.from_defaults(
            store=store, encoder=encoder, reader=reader, config=config, evidence_images=False
        )

    engines = build_engines(
        ["docmemo", "static-paged", "neighbours", "static@5", "greedy"],
        configs=EngineConfigs(pages_per_round=3, rounds=3, overrides={"candidates": 10}),
        seed=0,
        make_engine=make,
        store=store,
        encoder=encoder,
    )
    return load_dataset(root), engines


def test_fixed_budget_and_resume(setup, tmp_path: Path) -> None:
    dataset, engines = setup
    assert list(engines) == ["docmemo", "static-paged", "neighbours", "static@5", "greedy"]
    out = tmp_path / "out"
    runs = run_evaluation(
        dataset, engines, lambda: SimulatedReader(fn=0.0, fp=0.0), out, progress=False
    )
    for name in ("docmemo", "static-paged", "neighbours", "greedy"):
        for run in runs[name]:
            # --stop never: the whole budget, T rounds of k, even once every gold page was seen
            assert run.rounds == 3 and run.pages_read == 9, (name, run)
            assert run.stop_reason in ("max_rounds", "answered")  # answered in the last round
    for run in runs["static@5"]:
        assert run.rounds == 1 and run.pages_read == 5 and run.stop_reason == "static"
    first = {name: {r.qid: r.reads[0] for r in runs[name]} for name in runs}
    for qid in ("a", "b", "c"):  # round 1 is the same ranking for every engine
        assert first["docmemo"][qid] == first["static-paged"][qid] == first["neighbours"][qid]
        assert first["static@5"][qid][:3] == first["docmemo"][qid]
    dm = {r.qid: r for r in runs["docmemo"]}
    assert PageRef("r.pdf", 31) in dm["b"].useful  # the reader's labels are recorded
    lines = (out / RESULTS).read_text().splitlines()
    assert len(lines) == 15
    traces = [json.loads(line) for line in (out / "traces.jsonl").read_text().splitlines()]
    assert {t["engine"] for t in traces} == {"docmemo", "greedy"}
    again = run_evaluation(dataset, engines, lambda: SimulatedReader(), out, progress=False)
    assert (out / RESULTS).read_text().splitlines() == lines  # nothing re-run
    assert {n: len(v) for n, v in again.items()} == {n: 3 for n in engines}
    assert load_runs(out / RESULTS)[0].reads == runs["docmemo"][0].reads
    assert load_runs(out / RESULTS)[0].useful == runs["docmemo"][0].useful


def test_oracle_stop_ends_when_gold_is_recognised(setup, tmp_path: Path) -> None:
    dataset, engines = setup
    runs = run_evaluation(
        dataset,
        {n: engines[n] for n in ("docmemo", "static-paged", "neighbours")},
        lambda: SimulatedReader(fn=0.0, fp=0.0),
        tmp_path / "o",
        stop=StopRule("oracle"),
        progress=False,
    )
    for name, engine_runs in runs.items():
        by_qid = {r.qid: r for r in engine_runs}
        assert by_qid["b"].stop_reason == "answered" and by_qid["b"].rounds == 1, name
        assert by_qid["c"].rounds == 3  # no gold page: never answered


def test_errors_are_reported_and_skipped(setup, tmp_path: Path) -> None:
    dataset, engines = setup
    failures: list[str] = []

    class Broken(SimulatedReader):
        def read(self, inp):
            raise RuntimeError("boom")

    run_evaluation(
        dataset,
        {"docmemo": engines["docmemo"], "static-paged": engines["static-paged"]},
        Broken,
        tmp_path / "o",
        progress=False,
        on_error=lambda n, i, e: failures.append(f"{n}:{i.qid}:{e}"),
    )
    assert failures == [f"{n}:{q}:boom" for q in "abc" for n in ("docmemo", "static-paged")]
    assert not (tmp_path / "o" / RESULTS).read_text()


def test_settings_guard(tmp_path: Path) -> None:
    check_settings(tmp_path, {"seed": 0, "k": 5})
    check_settings(tmp_path, {"seed": 0, "k": 5})
    with pytest.raises(DocMemoError, match="different seed"):
        check_settings(tmp_path, {"seed": 1, "k": 5})


def test_engine_configs() -> None:
    configs = EngineConfigs(pages_per_round=4, rounds=2, overrides={"sampling": "thompson"})
    docmemo = configs.for_engine("docmemo", seed=3)
    assert (docmemo.loop.pages_per_round, docmemo.loop.rounds, docmemo.selection.seed) == (4, 2, 3)
    assert docmemo.selection.sampling == "thompson" and configs.budget == 8
    assert configs.for_engine("greedy").selection.sampling == "greedy"  # the ablation wins
    nm = configs.for_engine("no_memory").loop
    assert not (nm.use_schema or nm.use_belief or nm.use_episodic) and nm.pages_per_round == 4
    paper = configs.for_engine("paper")
    assert paper.selection == DocMemoConfig.paper().selection.model_copy(
        update={"sampling": "thompson", "seed": 0}
    )
    assert paper.levers == DocMemoConfig.paper().levers and paper.loop.pages_per_round == 4
    no_levers = configs.for_engine("no_levers").levers
    assert no_levers.statement_weight == 0.0 and no_levers.question_reference_weight == 0.0
    with pytest.raises(ValueError, match="unknown engine"):
        configs.for_engine("bogus")
    with pytest.raises(ValueError, match="unknown DocMemoConfig field.*not_a_field"):
        EngineConfigs(overrides={"not_a_field": 1})


def test_engine_names() -> None:
    assert static_k("static@15") == 15 and static_k("static@0") is None
    check_engine_names(["docmemo", "static@5", "static@10", "neighbours", "no_belief"])
    with pytest.raises(ValueError, match="static@K, bogus"):
        check_engine_names(["static@K", "bogus"])
