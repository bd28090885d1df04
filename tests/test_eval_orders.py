"""Page orders of the baselines over a fixed first-round ranking (no store)."""

from __future__ import annotations

import pytest

from llama_index_docmemo.evaluation.orders import neighbour_pages, next_in_ranking, next_neighbours
from llama_index_docmemo.types import PageRef


def refs(*pages: int) -> list[PageRef]:
    return [PageRef("d.pdf", p) for p in pages]


RANKING = refs(9, 3, 20, 4, 15, 1, 30, 7)


def test_paged_reads_the_ranking_in_order_skipping_read_pages() -> None:
    assert next_in_ranking(RANKING, [], 3) == refs(9, 3, 20)
    assert next_in_ranking(RANKING, refs(9, 3, 20), 3) == refs(4, 15, 1)
    assert next_in_ranking(RANKING, refs(3), 2) == refs(9, 20)
    assert next_in_ranking(RANKING, RANKING, 3) == []
    assert next_in_ranking(RANKING, [], 0) == []


def test_neighbours_nearest_first_within_the_document() -> None:
    assert neighbour_pages(refs(10), {"d.pdf": 40}) == refs(9, 11, 8, 12)
    assert neighbour_pages(refs(1, 40), {"d.pdf": 40}) == refs(2, 39, 3, 38)
    # distance 1 of every useful page before distance 2; useful pages are not their own neighbours
    assert neighbour_pages(refs(10, 11), {"d.pdf": 40}) == refs(9, 12, 8, 13)
    assert neighbour_pages(refs(5), {"d.pdf": 40}, radius=0) == []


def test_neighbours_then_ranking_fill() -> None:
    read = refs(9, 3, 20)
    # page 3 judged useful: 2 and 4 (distance 1), then 1 and 5; fill from the ranking after that
    assert next_neighbours(RANKING, refs(3), read, 3, {"d.pdf": 40}) == refs(2, 4, 1)
    assert next_neighbours(RANKING, refs(3), read + refs(2, 4, 1), 3, {"d.pdf": 40}) == refs(
        5, 15, 30
    )
    # nothing useful yet: exactly static-paged
    assert next_neighbours(RANKING, [], read, 3, {"d.pdf": 40}) == next_in_ranking(RANKING, read, 3)


def test_bad_arguments() -> None:
    with pytest.raises(ValueError):
        next_in_ranking(RANKING, [], -1)
    with pytest.raises(ValueError):
        neighbour_pages(refs(3), {}, radius=-1)
