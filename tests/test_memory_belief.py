"""Page Belief Memory: update rules, propagation bounds, sampling modes (property-based)."""

from __future__ import annotations

import time

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from llama_index_docmemo.memory.belief import (
    PageBeliefMemory,
    normalise_scores,
    selection_scores,
)
from llama_index_docmemo.types import PageRef

DOCS = {"a.pdf": 12, "b.pdf": 7}
pages = st.one_of(
    st.builds(PageRef, st.just("a.pdf"), st.integers(1, 12)),
    st.builds(PageRef, st.just("b.pdf"), st.integers(1, 7)),
)


class ExplodingRng:
    """A generator stand-in that fails the test if anything draws from it."""

    def __getattr__(self, name: str):
        raise AssertionError(f"greedy selection must not sample (called rng.{name})")


def test_update_adds_one_to_the_labelled_pages() -> None:
    m = PageBeliefMemory(DOCS)
    m.update(useful=[PageRef("a.pdf", 3)], irrelevant=[PageRef("b.pdf", 2)])
    assert m.get(PageRef("a.pdf", 3)) == (2.0, 1.0)
    assert m.get(PageRef("b.pdf", 2)) == (1.0, 2.0)
    assert m.get(PageRef("a.pdf", 4)) == (1.0, 1.0)


def test_propagation_follows_gamma_to_the_power_of_distance() -> None:
    m = PageBeliefMemory(DOCS)
    m.update(useful=[PageRef("a.pdf", 5)], radius=2, gamma=0.5)
    assert m.get(PageRef("a.pdf", 4))[0] == pytest.approx(1.5)
    assert m.get(PageRef("a.pdf", 6))[0] == pytest.approx(1.5)
    assert m.get(PageRef("a.pdf", 3))[0] == pytest.approx(1.25)
    assert m.get(PageRef("a.pdf", 7))[0] == pytest.approx(1.25)
    assert m.get(PageRef("a.pdf", 2))[0] == 1.0
    assert m.get(PageRef("a.pdf", 8))[0] == 1.0


@pytest.mark.parametrize("cross, expected", [(0.0, 1.0), (0.5, 1.25), (1.0, 1.5)])
def test_propagation_across_a_section_boundary_is_scaled(cross: float, expected: float) -> None:
    m = PageBeliefMemory(DOCS)
    m.update(
        useful=[PageRef("a.pdf", 5)],
        radius=2,
        gamma=0.5,
        same_section=lambda a, b: (a.page <= 5) == (b.page <= 5),
        cross_section=cross,
    )
    assert m.get(PageRef("a.pdf", 4))[0] == pytest.approx(1.5)
    assert m.get(PageRef("a.pdf", 6))[0] == pytest.approx(expected)


def test_pages_outside_scope_are_ignored_by_update_and_rejected_by_get() -> None:
    m = PageBeliefMemory(DOCS)
    m.update(useful=[PageRef("c.pdf", 1), PageRef("a.pdf", 99)])
    assert np.all(m.alpha == 1.0)
    with pytest.raises(KeyError, match="not a page"):
        m.get(PageRef("a.pdf", 13))
    assert len(m) == 0  # nothing outside the scope got a belief of its own


@settings(max_examples=200, deadline=None)
@given(
    rounds=st.lists(
        st.tuples(st.lists(pages, max_size=5), st.lists(pages, max_size=5)), max_size=6
    ),
    radius=st.integers(0, 4),
    gamma=st.floats(0.0, 1.0),
)
def test_counts_never_decrease(rounds, radius, gamma) -> None:
    m = PageBeliefMemory(DOCS)
    for useful, irrelevant in rounds:
        before_a, before_b = m.alpha.copy(), m.beta.copy()
        m.update(useful=useful, irrelevant=irrelevant, radius=radius, gamma=gamma)
        assert np.all(m.alpha >= before_a) and np.all(m.beta >= before_b)


@settings(max_examples=200, deadline=None)
@given(useful=pages, radius=st.integers(0, 5), gamma=st.floats(0.01, 1.0))
def test_propagation_never_crosses_documents_or_exceeds_radius(useful, radius, gamma) -> None:
    m = PageBeliefMemory(DOCS)
    m.update(useful=[useful], radius=radius, gamma=gamma)
    for ref in m.refs():
        alpha, beta = m.get(ref)
        assert beta == 1.0
        if ref == useful:
            assert alpha == 2.0
        elif ref.doc_id != useful.doc_id or abs(ref.page - useful.page) > radius:
            assert alpha == 1.0
        else:
            assert alpha == pytest.approx(1.0 + gamma ** abs(ref.page - useful.page))


@settings(max_examples=100, deadline=None)
@given(scores=st.lists(st.floats(0, 1), min_size=1, max_size=30), seed=st.integers(0, 2**32 - 1))
def test_lambda_zero_reproduces_the_static_ranking(scores, seed) -> None:
    theta = np.random.default_rng(seed).random(len(scores))
    combined = selection_scores(np.array(scores), theta, 0.0)
    assert list(np.argsort(-combined, kind="stable")) == list(
        np.argsort(-np.array(scores), kind="stable")
    )


def test_fixed_seed_gives_the_same_draw_and_greedy_never_samples() -> None:
    m = PageBeliefMemory(DOCS)
    m.update(useful=[PageRef("a.pdf", 2)], irrelevant=[PageRef("a.pdf", 9)], radius=2)
    refs = m.refs()
    one = m.draw(refs, np.random.default_rng(7))
    two = m.draw(refs, np.random.default_rng(7))
    assert np.array_equal(one, two)
    greedy = m.draw(refs, ExplodingRng(), "greedy")  # type: ignore[arg-type]
    assert np.allclose(greedy, m.mean())


def test_normalise_scores_keeps_order_and_range() -> None:
    c = normalise_scores([4.0, 2.0, 1.0])
    assert list(c) == [1.0, 0.5, 0.25]
    c = normalise_scores([-1.0, -3.0])
    assert list(c) == [1.0, 0.0]
    assert normalise_scores([]).size == 0


def test_update_and_draw_over_a_large_scope_is_fast_and_sparse() -> None:
    m = PageBeliefMemory({f"d{i}": 50 for i in range(10_000)})  # 500,000 pages in scope
    rng = np.random.default_rng(0)
    start = time.perf_counter()
    for i in range(200):
        m.update(
            useful=[PageRef(f"d{i}", 1 + i % 50)], irrelevant=[PageRef(f"d{i + 1}", 2)], radius=2
        )
        pool = m.informed_refs()[-60:] + [PageRef(f"d{(7 * i) % 10_000}", 9)] * 30
        m.draw(pool, rng)
    per_round = (time.perf_counter() - start) / 200
    assert per_round < 0.005  # measured ~0.1 ms; generous bound against a loaded CI machine
    assert len(m) <= 200 * (2 + 2 * 2)  # state only for labelled and propagated pages
