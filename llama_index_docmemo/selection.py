"""Selection step of a round (pure): combine retrieval scores with page beliefs, pick k pages."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass

import numpy as np

from llama_index_docmemo.memory.belief import PageBeliefMemory, Sampling, selection_scores
from llama_index_docmemo.types import PageRef


@dataclass(frozen=True)
class Selection:
    """The pages chosen this round, best first, with the scores that ranked them."""

    pages: list[PageRef]
    scores: list[float]
    pool: int


def candidate_pool(
    retrieval: Mapping[PageRef, float],
    beliefs: PageBeliefMemory | None,
    read: set[PageRef],
    reread: set[PageRef],
) -> list[PageRef]:
    """Pages eligible this round: retrieved candidates plus pages the beliefs know about,
    minus pages already read (except those in ``reread``). Deterministic order."""
    pool: dict[PageRef, None] = dict.fromkeys(retrieval)
    if beliefs is not None:
        for ref in beliefs.informed_refs():
            pool.setdefault(ref, None)
    return [r for r in pool if r not in read or r in reread]


def select_pages(
    pool: Sequence[PageRef],
    retrieval: Mapping[PageRef, float],
    beliefs: PageBeliefMemory | None,
    *,
    k: int,
    lam: float,
    rng: np.random.Generator,
    sampling: Sampling,
) -> Selection:
    """Top-k of score = (1 - lam) * c + lam * theta over ``pool``.

    Without beliefs (or with lam = 0) this is the static retrieval ranking. Ties keep the
    pool order (retrieval order), so a fixed seed always gives the same selection.
    """
    if not pool:
        return Selection([], [], 0)
    c = np.array([retrieval.get(ref, 0.0) for ref in pool], dtype=np.float64)
    if beliefs is None or lam == 0.0:
        scores = c
    else:
        scores = selection_scores(c, beliefs.draw(list(pool), rng, sampling), lam)
    order = np.argsort(-scores, kind="stable")[:k]
    return Selection([pool[i] for i in order], [float(scores[i]) for i in order], len(pool))
