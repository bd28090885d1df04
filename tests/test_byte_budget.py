"""The byte budget of a request's images: which rung each image goes at, pure."""

from __future__ import annotations

import itertools

import pytest

from llama_index_docmemo.llms.byte_budget import LADDER, rung_scale, spend
from llama_index_docmemo.llms.image_budget import MIN_LONG_SIDE


def table_cost(table: list[list[int]], asked: list[tuple[int, int]] | None = None):
    def cost(image: int, rung: int) -> int:
        if asked is not None:
            asked.append((image, rung))
        return table[image][rung]

    return cost


def total(table: list[list[int]], levels: list[int | None]) -> int:
    return sum(table[i][r] for i, r in enumerate(levels) if r is not None)


def tables(count: int, rungs: int):
    """Every cost table of ``count`` images over ``rungs`` rungs with costs in 1..3, each image's
    cost non-increasing down its rungs (as lower quality and fewer pixels are)."""
    columns = [
        c for c in itertools.product(range(1, 4), repeat=rungs) if list(c) == sorted(c)[::-1]
    ]
    for rows in itertools.product(columns, repeat=count):
        yield [list(r) for r in rows]


@pytest.mark.parametrize(("count", "rungs"), [(1, 1), (1, 3), (2, 2), (3, 2), (2, 3), (3, 3)])
def test_every_small_case_fits_with_the_fewest_losses(count: int, rungs: int) -> None:
    for table in tables(count, rungs):
        for budget in range(0, 3 * count + 1):
            levels = spend(table_cost(table), count, budget, rungs)
            assert total(table, levels) <= budget
            assert all(r is None or 0 <= r < rungs for r in levels)  # never below the floor
            if total(table, [0] * count) <= budget:
                assert levels == [0] * count  # nothing shrinks that fits
            dropped = [i for i, r in enumerate(levels) if r is None]
            if dropped:
                # the lowest priorities go, only with every other image at the floor, and
                # only as many as needed: the first one left out would not have fitted
                assert dropped == list(range(count - len(dropped), count))
                assert all(r == rungs - 1 for r in levels if r is not None)
                back = [rungs - 1 if i == dropped[0] else r for i, r in enumerate(levels)]
                assert total(table, back) > budget


def test_the_largest_image_steps_down_first() -> None:
    table = [[10, 5, 4], [6, 3, 2]]
    assert spend(table_cost(table), 2, 12, 3) == [1, 0]  # 10 -> 5: 11 fits
    assert spend(table_cost(table), 2, 8, 3) == [1, 1]  # then the 6 (now largest)
    assert spend(table_cost(table), 2, 6, 3) == [2, 2]  # both at the floor: 4 + 2


def test_between_equal_images_the_lower_priority_shrinks_first() -> None:
    table = [[6, 3], [6, 3], [6, 3]]
    assert spend(table_cost(table), 3, 15, 2) == [0, 0, 1]
    assert spend(table_cost(table), 3, 12, 2) == [0, 1, 1]


def test_past_the_floor_the_last_images_are_left_out() -> None:
    table = [[9, 4], [9, 4], [9, 4]]
    assert spend(table_cost(table), 3, 8, 2) == [1, 1, None]
    assert spend(table_cost(table), 3, 3, 2) == [None, None, None]


def test_costs_are_asked_only_for_the_rungs_it_visits() -> None:
    asked: list[tuple[int, int]] = []
    spend(table_cost([[5, 1], [5, 1]], asked), 2, 10, 2)
    assert asked == [(0, 0), (1, 0)]  # it fits: no other encoding is made
    asked.clear()
    spend(table_cost([[5, 1, 1], [2, 1, 1]], asked), 2, 4, 3)
    assert asked == [(0, 0), (1, 0), (0, 1)]


def test_a_budget_needs_sense() -> None:
    with pytest.raises(ValueError, match="budget"):
        spend(table_cost([[1]]), 1, -1)
    assert spend(table_cost([]), 0, 0) == []


def test_the_ladder_only_goes_down() -> None:
    pairs = [(r.quality, r.scale) for r in LADDER]
    assert pairs[0] == (70, 1.0)  # the first rung is today's encoding, unchanged
    for (q0, s0), (q1, s1) in itertools.pairwise(pairs):
        assert (q1, s1) != (q0, s0) and q1 <= q0 and s1 <= s0


def test_a_rung_never_takes_the_long_side_below_the_floor() -> None:
    small = LADDER[-1]
    assert rung_scale(small, 1000) == max(small.scale, MIN_LONG_SIDE / 1000)
    assert rung_scale(small, 600) * 600 >= MIN_LONG_SIDE - 1e-9
    assert rung_scale(small, MIN_LONG_SIDE) == 1.0 == rung_scale(small, 200)  # kept as is
    assert rung_scale(LADDER[0], 5000) == 1.0
