"""Document beliefs (pure): priors from the document stage, updates from page labels, and how a
round's pages are allotted across documents."""

from __future__ import annotations

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from llama_index_docmemo.memory.documents import DocumentBeliefMemory
from llama_index_docmemo.types import PageRef


def _rng() -> np.random.Generator:
    return np.random.default_rng(0)


def test_prior_comes_from_the_score_and_is_never_overwritten() -> None:
    docs = DocumentBeliefMemory(prior_strength=4.0)
    docs.add({"a.pdf": 1.0, "b.pdf": 0.25, "c.pdf": 7.0})  # scores are clipped to [0, 1]
    assert docs.get("a.pdf") == (5.0, 1.0)
    assert docs.get("b.pdf") == (2.0, 4.0)
    assert docs.get("c.pdf") == (5.0, 1.0)
    docs.update(useful=[PageRef("b.pdf", 3)])
    docs.add({"b.pdf": 1.0})  # a later round's search scores b again: its belief stays
    assert docs.get("b.pdf") == (3.0, 4.0)


def test_a_useful_page_raises_its_document_more_than_an_irrelevant_one_lowers_it() -> None:
    docs = DocumentBeliefMemory(prior_strength=0.0, irrelevant_weight=0.25, miss_weight=0.0)
    docs.add({"a.pdf": 0.5, "b.pdf": 0.5})
    docs.update(
        useful=[PageRef("a.pdf", 1)],
        irrelevant=[PageRef("b.pdf", p) for p in range(1, 5)] + [PageRef("z.pdf", 1)],
    )
    assert docs.get("a.pdf") == (2.0, 1.0)
    assert docs.get("b.pdf") == (1.0, 2.0)  # four irrelevant pages = one useful page's weight
    assert "z.pdf" not in docs  # a document never scored holds no belief


def test_a_fruitless_round_lowers_a_document_by_how_little_the_question_names_it() -> None:
    docs = DocumentBeliefMemory(prior_strength=0.0, irrelevant_weight=0.0, miss_weight=2.0)
    docs.add({"named.pdf": 0.5, "paged.pdf": 0.5, "found.pdf": 0.5, "unread.pdf": 0.5})
    docs.update(
        useful=[PageRef("found.pdf", 2)],
        irrelevant=[PageRef(d, p) for d in ("named.pdf", "paged.pdf", "found.pdf") for p in (1, 3)],
        named={"named.pdf": 0.75, "paged.pdf": 0.0, "found.pdf": 0.0},
    )
    assert docs.get("named.pdf") == (1.0, 1.5)  # the question names it: looked in further
    assert docs.get("paged.pdf") == (1.0, 3.0)  # chosen by its pages alone: left
    assert docs.get("found.pdf") == (2.0, 1.0)  # one useful page: the round was not fruitless
    assert docs.get("unread.pdf") == (1.0, 1.0)  # not read this round: nothing learnt
    docs.update(irrelevant=[PageRef("paged.pdf", 5)])  # no card match given: not named
    assert docs.get("paged.pdf") == (1.0, 5.0)


def test_a_dominant_document_gets_the_whole_round() -> None:
    docs = DocumentBeliefMemory()
    docs.add({"a.pdf": 1.0, "b.pdf": 0.3, "c.pdf": 0.2})
    assert docs.allot(5, _rng(), "greedy") == {"a.pdf": 5}


def test_two_close_documents_share_the_round_best_first() -> None:
    docs = DocumentBeliefMemory()
    docs.add({"a.pdf": 1.0, "b.pdf": 0.95, "c.pdf": 0.94})
    allotted = docs.allot(5, _rng(), "greedy", max_documents=2, share=0.9)
    assert list(allotted) == ["a.pdf", "b.pdf"] and allotted == {"a.pdf": 3, "b.pdf": 2}
    assert docs.allot(5, _rng(), "greedy", max_documents=1) == {"a.pdf": 5}


def test_a_document_read_out_passes_its_pages_down_the_ranking() -> None:
    docs = DocumentBeliefMemory()
    docs.add({"a.pdf": 1.0, "b.pdf": 0.2, "c.pdf": 0.1})
    allotted = docs.allot(5, _rng(), "greedy", open_pages={"a.pdf": 2, "b.pdf": 10, "c.pdf": 1})
    assert allotted == {"a.pdf": 2, "b.pdf": 3}
    assert docs.allot(5, _rng(), "greedy", open_pages={"a.pdf": 0, "b.pdf": 0, "c.pdf": 0}) == {}


def test_greedy_never_draws_and_thompson_follows_the_seed() -> None:
    docs = DocumentBeliefMemory()
    docs.add({"a.pdf": 0.9, "b.pdf": 0.8})
    rng = _rng()
    state = rng.bit_generator.state
    docs.draw(rng, "greedy")
    assert rng.bit_generator.state == state
    assert docs.draw(_rng(), "thompson") == docs.draw(_rng(), "thompson")


def test_bad_settings_are_refused() -> None:
    with pytest.raises(ValueError, match="non-negative"):
        DocumentBeliefMemory(irrelevant_weight=-1.0)
    with pytest.raises(ValueError, match="non-negative"):
        DocumentBeliefMemory(miss_weight=-1.0)


@settings(max_examples=200, deadline=None)
@given(
    scores=st.dictionaries(
        st.sampled_from(["a", "b", "c", "d", "e"]), st.floats(0, 1), min_size=1, max_size=5
    ),
    k=st.integers(0, 12),
    open_counts=st.lists(st.integers(0, 6), min_size=5, max_size=5),
    max_documents=st.integers(1, 4),
    share=st.floats(0, 1),
    sampling=st.sampled_from(["greedy", "thompson"]),
)
def test_an_allotment_spends_what_it_can_and_never_more(
    scores: dict[str, float],
    k: int,
    open_counts: list[int],
    max_documents: int,
    share: float,
    sampling: str,
) -> None:
    docs = DocumentBeliefMemory()
    docs.add(scores)
    open_pages = dict(zip("abcde", open_counts, strict=True))
    allotted = docs.allot(
        k,
        _rng(),
        sampling,  # type: ignore[arg-type]
        max_documents=max_documents,
        share=share,
        open_pages=open_pages,
    )
    room = sum(open_pages[d] for d in scores)
    assert sum(allotted.values()) == min(k, room)
    assert all(0 < n <= open_pages[d] for d, n in allotted.items())
