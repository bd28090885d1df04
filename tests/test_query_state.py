"""A query's rules as pure functions: a state and hits in, the next state out; no store, no
reader, no steps runtime. Each test also checks the state it was given is left as it was."""

from __future__ import annotations

from dataclasses import replace

import pytest

from llama_index_docmemo.config import DocMemoConfig
from llama_index_docmemo.events import LLMCallTally
from llama_index_docmemo.loop.result import round_trace
from llama_index_docmemo.loop.state import (
    Clock,
    QueryState,
    Reading,
    allot,
    apply,
    begin,
    choose,
    close_round,
    document_trace,
    pinned,
    round_selection,
    start,
    verdict,
    with_priors,
    with_schemas,
)
from llama_index_docmemo.memory.schema import DocumentSchema
from llama_index_docmemo.types import Feedback, PageHit, PageRecord, PageRef

DOC = "report.pdf"


def hit(page: int, score: float, doc: str = DOC, version: str = "v1") -> PageHit:
    record = PageRecord(doc, version, page, 10, f"text of page {page}", f"/{doc}")
    return PageHit(record, score)


def schema(doc: str = DOC, version: str = "v1", pages: int = 10) -> DocumentSchema:
    return DocumentSchema(doc_id=doc, doc_version=version, n_pages=pages)


def known(config: DocMemoConfig, *docs: str) -> QueryState:
    """A fresh state whose documents' schemas were loaded (versions pinned)."""
    return with_schemas(start("what was revenue", None, config), [schema(d) for d in docs])


def picture(state: QueryState) -> tuple:
    """What a rule must not change in the state it is given."""
    return (
        state.round,
        dict(state.retrieval),
        dict(state.records),
        state.read,
        state.beliefs.informed_refs(),
        [state.beliefs.get(r) for r in state.beliefs.informed_refs()],
        len(state.episodic.episodes),
        state.rng.bit_generator.state["state"],
        state.llm_calls,
    )


def chosen(state: QueryState, hits: list[PageHit], config: DocMemoConfig):
    state, choice = choose(state, hits, config)
    selection = round_selection(state, "what was revenue", choice, choice.pages[: choice.k], 0.0)
    return state, choice, selection


def test_choose_takes_the_best_candidates_and_leaves_its_input_state_alone() -> None:
    config = DocMemoConfig().updated(pages_per_round=2)
    state = known(config, DOC)
    before = picture(state)
    hits = [hit(3, 0.9), hit(7, 0.6), hit(1, 0.3)]
    after, choice = choose(state, hits, config)
    assert picture(state) == before
    assert after.round == 1 and choice.k == 2 and choice.lam == 0.0  # round 1: lambda 0
    assert choice.pages == [PageRef(DOC, 3), PageRef(DOC, 7)]
    assert [c.score for c in choice.candidates] == pytest.approx([1.0, 0.6 / 0.9, 0.3 / 0.9])
    assert set(after.retrieval) == {h.ref for h in hits} and set(after.records) == set(
        after.retrieval
    )


def test_choose_is_a_function_of_the_state_even_with_thompson_draws() -> None:
    """The same state chooses the same pages however often it is asked (the random stream is
    part of the state), and the next state carries the stream on."""
    config = DocMemoConfig().updated(pages_per_round=3, sampling="thompson")
    state = known(config, DOC)
    hits = [hit(p, 1.0 - p / 20) for p in range(1, 9)]
    state, _ = choose(state, hits, config)  # round 1 (lambda 0): no draw
    state = replace_read(state, [PageRef(DOC, 1)])
    first = choose(state, hits, config)[1].pages
    again = choose(state, hits, config)[1].pages
    assert first == again and PageRef(DOC, 1) not in first  # a page read is not read again
    moved, _ = choose(state, hits, config)
    assert moved.rng.bit_generator.state != state.rng.bit_generator.state


def replace_read(state: QueryState, refs: list[PageRef]) -> QueryState:
    return replace(state, read=state.read | frozenset(refs))


def test_apply_moves_beliefs_and_memory_in_a_new_state_only() -> None:
    config = DocMemoConfig().updated(pages_per_round=2, propagation=False)
    state, _, selection = chosen(known(config, DOC), [hit(3, 0.9), hit(7, 0.6)], config)
    before = picture(state)
    feedback = Feedback(
        useful_pages=[PageRef(DOC, 3), PageRef(DOC, 9)],  # page 9 was never shown
        irrelevant_pages=[PageRef(DOC, 7)],
        status="need_more",
    )
    cost = LLMCallTally()
    cost.calls = 1
    after, applied = apply(state, Reading(selection, feedback, cost), config)
    assert picture(state) == before
    assert after.read == {PageRef(DOC, 3), PageRef(DOC, 7)} and after.llm_calls == 1
    assert after.beliefs.get(PageRef(DOC, 3)) == (2.0, 1.0)
    assert after.beliefs.get(PageRef(DOC, 7)) == (1.0, 2.0)
    assert applied.feedback is not None and applied.feedback.useful_pages == [PageRef(DOC, 3)]
    assert applied.dropped == 1 and after.feedback == applied.feedback
    assert after.episodic.useful_pages == [PageRef(DOC, 3)]


def test_apply_without_a_reading_counts_the_calls_only() -> None:
    config = DocMemoConfig()
    state, _, selection = chosen(known(config, DOC), [hit(3, 0.9)], config)
    cost = LLMCallTally()
    cost.calls = 1  # a reranking, then no reading
    after, applied = apply(state, Reading(selection, None, cost), config)
    assert after.llm_calls == 1 and after.read == frozenset() and applied.feedback is None


def test_close_round_keeps_the_trace_and_asks_the_stop_policy() -> None:
    config = DocMemoConfig().updated(pages_per_round=1, rounds=3)
    clock = Clock(out_of_time=False, cut=False, has_reader=True, reserved=0)
    state, _, selection = chosen(known(config, DOC), [hit(3, 0.9)], config)
    outcomes = {}
    for status in ("answered", "need_more"):
        feedback = Feedback(useful_pages=[PageRef(DOC, 3)], answer="42", status=status)
        applied, reading = apply(state, Reading(selection, feedback, LLMCallTally()), config)
        trace = round_trace(selection, reading.feedback, 0, applied.beliefs, 0, reading.cost)
        done = close_round(applied, reading, trace, config, clock)
        assert done.rounds == (trace,) and applied.rounds == ()
        outcomes[status] = (done.stop, verdict(done))
    assert outcomes["answered"] == ("answered", ("answered", "42"))
    assert outcomes["need_more"][0] is None  # round 1 of 3: go on
    late = Clock(out_of_time=True, cut=False, has_reader=True, reserved=0)
    feedback = Feedback(status="need_more")
    applied, reading = apply(state, Reading(selection, feedback, LLMCallTally()), config)
    trace = round_trace(selection, reading.feedback, 0, applied.beliefs, 0, reading.cost)
    assert close_round(applied, reading, trace, config, late).stop == "deadline"


def test_a_query_never_mixes_two_versions_of_a_document() -> None:
    config = DocMemoConfig()
    state = known(config, DOC)  # v1 pinned
    assert with_schemas(state, [schema(DOC, "v2")]).versions == {DOC: "v1"}
    hits = [hit(2, 0.9, version="v2"), hit(4, 0.5)]
    assert [h.ref for h in pinned(state, hits)] == [PageRef(DOC, 4)]


def test_the_document_layer_allots_pages_and_learns_from_labels() -> None:
    config = DocMemoConfig().updated(pages_per_round=2, sampling="greedy", propagation=False)
    a, b = "a.pdf", "b.pdf"
    state = known(config, a, b)
    wide = [hit(1, 0.9, a), hit(2, 0.8, a), hit(1, 0.2, b)]
    assert begin(wide[:2], config) is None  # one document: no layer
    documents = with_priors(begin(wide, config), wide, config)
    state = allot(replace(state, documents=documents), config)
    assert state.documents is not None and state.documents.allotted == {a: 2}
    before = picture(state)
    after, choice = choose(state, wide, config)
    assert picture(state) == before
    assert {r.doc_id for r in choice.pages} == {a}  # the selection ran inside document a
    selection = round_selection(after, "q", choice, choice.pages[: choice.k], 0.0)
    feedback = Feedback(useful_pages=[PageRef(a, 1)], irrelevant_pages=[PageRef(a, 2)])
    applied, _ = apply(after, Reading(selection, feedback, LLMCallTally()), config)
    old, new = after.documents.beliefs.get(a), applied.documents.beliefs.get(a)
    assert new[0] == old[0] + 1 and new[1] > old[1]
    assert [d.doc_id for d in document_trace(applied)] == [a, b]
