"""Budget shape (pure): how many pages each round reads, at a fixed total."""

from __future__ import annotations

from collections.abc import Sequence


def pages_for_round(
    round_: int,
    pages_per_round: int,
    schedule: Sequence[int] | None = None,
    *,
    read_so_far: int = 0,
    max_pages: int | None = None,
) -> int:
    """Pages to read in a 1-based round.

    ``schedule`` (e.g. [3, 6, 6]) overrides ``pages_per_round`` round by round; its last value
    repeats. ``max_pages`` caps the total read so far plus this round.
    """
    if round_ < 1:
        raise ValueError(f"rounds are 1-based, got {round_}")
    k = pages_per_round
    if schedule:
        k = schedule[min(round_ - 1, len(schedule) - 1)]
    if max_pages is not None:
        k = min(k, max(0, max_pages - read_so_far))
    return max(0, k)
