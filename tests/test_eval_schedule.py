"""Round sizes and when "answered" is trusted (issue 28): one rule for DocMemo and its baselines."""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path

import pytest
from fakes_docmemo import BagOfWordsEncoder
from pydantic import ValidationError
from stores_docmemo import StoreMaker, add_document

from llama_index_docmemo.config import DocMemoConfig, LoopSettings
from llama_index_docmemo.evaluation.baselines import build_engines
from llama_index_docmemo.evaluation.configs import EngineConfigs
from llama_index_docmemo.evaluation.datasets import EvalDataset, load_dataset
from llama_index_docmemo.evaluation.runner import run_evaluation
from llama_index_docmemo.evaluation.simulated import SimulatedReader
from llama_index_docmemo.evaluation.stopping import StopRule
from llama_index_docmemo.loop.state import gives_up, trusts_answer
from llama_index_docmemo.query_engine import DocMemoQueryEngine
from llama_index_docmemo.store import PageStore
from llama_index_docmemo.types import PageRef

ROUND_BASED = ("docmemo", "static-paged", "neighbours")


@pytest.mark.parametrize("status", ["answered", "need_more", "unanswerable"])
@pytest.mark.parametrize("useful", [0, 1, 3])
@pytest.mark.parametrize("needs_evidence", [False, True])
def test_an_answer_is_trusted_only_with_evidence_when_asked(
    status: str, useful: int, needs_evidence: bool
) -> None:
    expected = status == "answered" and (useful > 0 or not needs_evidence)
    assert trusts_answer(status, useful_so_far=useful, needs_evidence=needs_evidence) is expected


@pytest.mark.parametrize("pages", [0, 5, 9, 10, 15])
@pytest.mark.parametrize("useful", [0, 1, 4])
@pytest.mark.parametrize("after", [None, 1, 10])
def test_the_reading_gives_up_only_after_enough_pages_with_nothing_useful(
    pages: int, useful: int, after: int | None
) -> None:
    expected = after is not None and useful == 0 and pages >= after
    assert gives_up(pages_read=pages, useful_so_far=useful, after_pages=after) is expected


@pytest.mark.parametrize(
    ("schedule", "rounds", "expected"),
    [
        ((), 3, [5, 5, 5]),
        ((5, 2), 6, [5, 2, 2, 2, 2, 2]),
        ((3, 4, 8), 2, [3, 4]),
        ((3, 4, 8), 4, [3, 4, 8, 8]),
        ((1,), 1, [1]),
    ],
)
def test_round_pages_follow_the_schedule_and_repeat_its_last_value(
    schedule: tuple[int, ...], rounds: int, expected: list[int]
) -> None:
    loop = LoopSettings(rounds=rounds, pages_schedule=schedule)
    assert loop.round_pages() == expected
    assert [loop.pages_at(r) for r in range(1, rounds + 1)] == expected
    assert LoopSettings(rounds=rounds, pages_schedule=schedule, static=True).round_pages() == [
        expected[0]
    ]


def test_a_schedule_outside_its_bounds_is_refused() -> None:
    for bad in ((0,), (5, 51)):
        with pytest.raises(ValidationError, match="pages_schedule"):
            DocMemoConfig(pages_schedule=bad)


def _pages() -> list[str]:
    out = [f"filler page {i} about office plants and weather" for i in range(1, 31)]
    out[2] = "page on revenue growth in 2023, which was strong"
    out[20] = "page on headcount and offices"
    return out


@pytest.fixture()
def dataset(tmp_path: Path) -> EvalDataset:
    root = tmp_path / "data"
    (root / "pdfs").mkdir(parents=True)
    (root / "pdfs" / "r.pdf").write_bytes(b"%PDF-1.4")
    rows = [
        {"qid": "a", "doc": "r.pdf", "question": "revenue growth 2023 page", "answer": "x",
         "evidence_pages": [3, 21]},
        {"qid": "b", "doc": "r.pdf", "question": "headcount offices page", "answer": "y",
         "evidence_pages": [21]},
    ]  # fmt: skip
    (root / "qa.jsonl").write_text("\n".join(json.dumps(r) for r in rows))
    return load_dataset(root)


@pytest.fixture(scope="module")
def store(store_maker: StoreMaker) -> Iterator[PageStore]:
    """The report, shared: the runs only read it (on Edge: the store is not what is tested)."""
    yield from store_maker.with_document("r.pdf", _pages())


def _engines(store: PageStore, overrides: dict[str, object]):
    encoder = BagOfWordsEncoder()

    def make(config: DocMemoConfig, reader):
        return DocMemoQueryEngine.from_defaults(
            store=store, encoder=encoder, reader=reader, config=config, evidence_images=False
        )

    return build_engines(
        [*ROUND_BASED, "static@4"],
        configs=EngineConfigs(pages_per_round=3, rounds=3, overrides=overrides),
        seed=0,
        make_engine=make,
        store=store,
        encoder=encoder,
    )


def test_baselines_read_docmemos_round_sizes(
    dataset: EvalDataset, store: PageStore, tmp_path: Path
) -> None:
    engines = _engines(store, {"candidates": 10, "pages_schedule": (3, 1), "rounds": 4})
    runs = run_evaluation(
        dataset, engines, lambda: SimulatedReader(fn=0.0, fp=0.0), tmp_path, progress=False
    )
    for name in ROUND_BASED:
        for run in runs[name]:
            assert [len(r) for r in run.reads] == [3, 1, 1, 1], (name, run.qid)
    assert all([len(r) for r in run.reads] == [4] for run in runs["static@4"])


@pytest.mark.parametrize("needs_evidence", [False, True])
def test_an_unevidenced_answer_ends_no_engine_early(
    dataset: EvalDataset, store: PageStore, tmp_path: Path, needs_evidence: bool
) -> None:
    """A stop signal that always says "answered" too early, and a reader that labels nothing
    useful: with ``answer_needs_evidence`` every round-based engine reads on to its last round."""
    engines = _engines(store, {"candidates": 10, "answer_needs_evidence": needs_evidence})
    runs = run_evaluation(
        dataset,
        {name: engines[name] for name in ROUND_BASED},
        lambda: SimulatedReader(fn=1.0, fp=0.0),
        tmp_path,
        stop=StopRule("noisy", p_early=1.0, p_miss=0.0),
        progress=False,
    )
    for name in ROUND_BASED:
        for run in runs[name]:
            assert run.rounds == (3 if needs_evidence else 1), (name, run.qid)
            assert run.stop_reason == ("max_rounds" if needs_evidence else "answered")


@pytest.mark.parametrize("first_round", [1, 2])
def test_round_one_fusion_reaches_every_baseline(
    open_store, tmp_path: Path, first_round: int
) -> None:
    """With ``statement_first_round=1`` the income statement joins round 1, for DocMemo and for
    every engine reading the first-round ranking alike; by default round 1 is the plain ranking."""
    root = tmp_path / "data"
    (root / "pdfs").mkdir(parents=True)
    row = {"qid": "r", "doc": "r.pdf", "question": "revenue growth page", "answer": "x",
           "evidence_pages": [3, 10]}  # fmt: skip
    (root / "qa.jsonl").write_text(json.dumps(row))
    (root / "pdfs" / "r.pdf").write_bytes(b"%PDF-1.4")
    pages = _pages()
    pages[9] = "consolidated statements of operations net sales operating income net income"
    store, encoder = open_store(), BagOfWordsEncoder()
    add_document(store, "r.pdf", pages)

    def make(config: DocMemoConfig, reader):
        return DocMemoQueryEngine.from_defaults(
            store=store, encoder=encoder, reader=reader, config=config, evidence_images=False
        )

    engines = build_engines(
        [*ROUND_BASED, "static@3"],
        configs=EngineConfigs(3, 2, {"candidates": 10, "statement_first_round": first_round}),
        seed=0,
        make_engine=make,
        store=store,
        encoder=encoder,
    )
    runs = run_evaluation(
        load_dataset(root), engines, lambda: SimulatedReader(fn=0.0), tmp_path, progress=False
    )
    firsts = {name: set(runs[name][0].reads[0]) for name in engines}
    assert len({frozenset(f) for f in firsts.values()}) == 1, firsts
    assert (PageRef("r.pdf", 10) in firsts["docmemo"]) is (first_round == 1)


@pytest.mark.parametrize("fn", [1.0, 0.0])
def test_every_round_based_engine_gives_up_by_the_same_rule(
    dataset: EvalDataset, store: PageStore, tmp_path: Path, fn: float
) -> None:
    """``give_up_after_pages=6`` with a reader that labels nothing useful: DocMemo and its
    round-based baselines end after the round that reaches 6 pages; with the gold pages
    recognised (and no stop signal) they read on to their last round."""
    engines = _engines(store, {"candidates": 10, "give_up_after_pages": 6, "rounds": 4})
    runs = run_evaluation(
        dataset,
        {name: engines[name] for name in ROUND_BASED},
        lambda: SimulatedReader(fn=fn, fp=0.0),
        tmp_path,
        stop=StopRule("noisy", p_early=0.0, p_miss=1.0),
        progress=False,
    )
    for name in ROUND_BASED:
        for run in runs[name]:
            gave_up = run.stop_reason == "no_evidence"
            assert (run.rounds, gave_up) == ((2, True) if fn else (4, False)), (name, run.qid)


def test_a_fixed_budget_run_never_gives_up() -> None:
    configs = EngineConfigs(3, 4, {"give_up_after_pages": 6}, fixed_budget=True)
    assert configs.for_engine("docmemo").loop.give_up_after_pages is None
    assert configs.for_engine("no_belief").loop.give_up_after_pages is None
    assert (
        EngineConfigs(3, 4, {"give_up_after_pages": 6}).for_engine().loop.give_up_after_pages == 6
    )
