"""Fusion of rankings (pure): the question's own ranking with the rankings levers add in later rounds.

Each ranking is a mapping page -> score (higher is better); scores are first brought to [0, 1]
(best = 1) so rankings from different searches are comparable, then combined per page as a
weighted maximum (a page strongly found by any one search stays strong) or a weighted sum
(pages found by several searches rise).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Literal, TypeVar

from llama_index_docmemo.memory.belief import normalise_scores

K = TypeVar("K")
FusionRule = Literal["max", "sum"]


def unit_scores(scores: Mapping[K, float]) -> dict[K, float]:
    """A ranking's scores in [0, 1], best -> 1, by the loop's own rule for retrieval scores
    (:func:`~llama_index_docmemo.memory.belief.normalise_scores`), so both scales agree."""
    return dict(zip(scores, normalise_scores(list(scores.values())).tolist(), strict=True))


def fuse_rankings(
    base: Mapping[K, float],
    others: Sequence[tuple[Mapping[K, float], float]],
    rule: FusionRule = "max",
) -> dict[K, float]:
    """Fuse ``base`` (weight 1) with ``(ranking, weight)`` pairs; returns page -> fused score.

    With ``rule="max"`` a page's score is max(base, w_i * other_i); with ``"sum"`` it is
    base + sum(w_i * other_i). Pages missing from a ranking score 0 there. Order of the result:
    fused score descending, ties in the order pages first appear (``base`` first), so the
    fusion is deterministic.
    """
    fused: dict[K, float] = dict(unit_scores(base))
    for ranking, weight in others:
        if weight < 0:
            raise ValueError(f"fusion weight must be non-negative, got {weight}")
        for key, score in unit_scores(ranking).items():
            value = weight * score
            if rule == "max":
                fused[key] = max(fused.get(key, 0.0), value)
            else:
                fused[key] = fused.get(key, 0.0) + value
    order = {key: i for i, key in enumerate(fused)}
    return dict(sorted(fused.items(), key=lambda kv: (-kv[1], order[kv[0]])))
