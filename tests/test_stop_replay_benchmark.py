"""The stop replay (benchmarks/stop_replay.py) gives what a real run under that stop gives."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from benchmark_module import load_benchmark
from fakes_docmemo import BagOfWordsEncoder
from stores_docmemo import StoreMaker, add_document

from llama_index_docmemo.config import DocMemoConfig
from llama_index_docmemo.evaluation.baselines import build_engines
from llama_index_docmemo.evaluation.configs import EngineConfigs
from llama_index_docmemo.evaluation.datasets import QAItem, load_dataset
from llama_index_docmemo.evaluation.metrics import QuestionRun
from llama_index_docmemo.evaluation.runner import run_evaluation
from llama_index_docmemo.evaluation.simulated import SimulatedReader
from llama_index_docmemo.evaluation.stopping import StopRule
from llama_index_docmemo.query_engine import DocMemoQueryEngine
from llama_index_docmemo.types import PageRef

bench = load_benchmark("stop_replay")

ENGINES = ["docmemo", "static-paged", "neighbours"]
SETTINGS = {
    "pages_schedule": [3, 2],
    "rounds": 5,
    "answer_needs_evidence": True,
    "give_up_after_pages": 7,
}
TOPICS = ["revenue", "margin", "headcount", "leases", "taxes", "goodwill", "pension", "debt"]


@pytest.fixture()
def dataset(tmp_path: Path, store_maker: StoreMaker):
    pages = [f"filler page {i} about office plants and weather" for i in range(1, 41)]
    rows = []
    for i, topic in enumerate(TOPICS):
        gold = [3 + 4 * i] if i % 2 else [3 + 4 * i, 5 + 4 * i]
        for page in gold:
            pages[page - 1] = f"page on {topic} of the year"
        rows.append(
            {
                "qid": topic,
                "doc": "r.pdf",
                "question": f"{topic} page",
                "answer": "x",
                "evidence_pages": gold,
            }
        )
    root = tmp_path / "data"
    root.mkdir()
    (root / "qa.jsonl").write_text("\n".join(json.dumps(r) for r in rows))
    store = store_maker.open("edge")
    add_document(store, "r.pdf", pages)
    yield load_dataset(root, check_pdfs=False), store
    store.close()


def run(dataset, tmp_path: Path, name: str, stop: StopRule, seed: int):
    items, store = dataset
    encoder = BagOfWordsEncoder()

    def make(config: DocMemoConfig, reader):
        return DocMemoQueryEngine.from_defaults(
            store=store, encoder=encoder, reader=reader, config=config, evidence_images=False
        )

    configs = EngineConfigs(
        pages_per_round=5, rounds=3, overrides=SETTINGS, fixed_budget=stop.mode == "never"
    )
    engines = build_engines(
        ENGINES, configs=configs, seed=seed, make_engine=make, store=store, encoder=encoder
    )
    return run_evaluation(
        items,
        engines,
        lambda: SimulatedReader(fn=0.3, fp=0.1, seed=seed),
        tmp_path / name / f"seed-{seed}",
        stop=stop,
        progress=False,
    )


def test_replaying_a_fixed_budget_run_gives_the_real_noisy_and_oracle_runs(
    dataset, tmp_path: Path
) -> None:
    items = {item.qid: item for item in dataset[0].items}
    settings = {"k": 5, "rounds": 3, "config": SETTINGS}
    loop = bench.loop_of(settings, SETTINGS["give_up_after_pages"])
    reasons: set[str] = set()
    for seed in range(4):
        never = run(dataset, tmp_path, "never", StopRule("never", seed=seed), seed)
        for mode in ("noisy", "oracle"):
            rule = StopRule(mode, p_early=0.3, p_miss=0.3, seed=seed)
            real = run(dataset, tmp_path, mode, rule, seed)
            for engine in ENGINES:
                recorded = {r.qid: r for r in never[engine]}
                for r in real[engine]:
                    replayed = bench.replay_run(recorded[r.qid], items[r.qid], rule, loop)
                    assert (replayed.pages, replayed.reason) == (r.pages_read, r.stop_reason), (
                        engine,
                        mode,
                        seed,
                        r.qid,
                    )
                    assert replayed.requests == r.rounds
                    reasons.add(replayed.reason)
    assert {"answered", "no_evidence", "max_rounds"} <= reasons  # every rule was exercised


def test_endings_name_the_state_of_the_gold_pages() -> None:
    item = QAItem(qid="q", doc_id="d", question="?", answer="x", evidence_pages=(2, 9))
    refs = [PageRef("d", p) for p in range(1, 16)]
    reads = [refs[0:3], refs[3:5], refs[5:7], refs[7:9], refs[9:11]]
    loop = bench.loop_of({"k": 5, "rounds": 3, "config": SETTINGS}, None)
    oracle = StopRule("oracle")
    found_late = QuestionRun("docmemo", "q", reads, useful=[refs[1], refs[8]])
    replayed = bench.replay_run(found_late, item, oracle, loop)
    assert (replayed.pages, replayed.reason, replayed.hit) == (9, "answered", True)
    assert replayed.ending == "answered: every gold page recognised"
    missed = QuestionRun("docmemo", "q", reads, useful=[refs[1]])  # page 9 labelled irrelevant
    replayed = bench.replay_run(missed, item, oracle, loop)
    assert (replayed.pages, replayed.reason, replayed.hit) == (11, "max_rounds", True)
    assert replayed.ending == "max_rounds: every gold page read, one or more labelled irrelevant"
    gave_up = QuestionRun("docmemo", "q", reads, useful=[])
    loop7 = loop.model_copy(update={"give_up_after_pages": 7})
    replayed = bench.replay_run(gave_up, item, oracle, loop7)
    assert (replayed.pages, replayed.reason, replayed.hit) == (7, "no_evidence", False)
    assert replayed.ending == "no_evidence: a gold page unread"
    rows = bench.endings(
        {"q": [bench.replay_run(r, item, oracle, loop) for r in (found_late, missed)]}
    )
    assert [row["ending"] for row in rows][0].startswith("max_rounds")  # most pages first
    assert sum(row["share_of_pages"] for row in rows) == pytest.approx(100.0)


@pytest.mark.parametrize("value", ["9,x", "0", "13,-1"])
def test_a_bad_give_up_is_refused_naming_the_option(value: str, capsys) -> None:
    with pytest.raises(SystemExit):
        bench.main(["--data", "d", "--run", "r", "--give-up", value])
    assert "--give-up" in capsys.readouterr().err
