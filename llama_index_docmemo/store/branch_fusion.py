"""Deterministic fusion of a search's branches (dense, lexical), the same on both backends.

Qdrant leaves the order of equal scores to chance (segment and hash-map order), so the branches
come back whole and are ranked and fused here: the same query on the same store gives the same
ranking and scores in every process.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import numpy as np

from llama_index_docmemo.store.payloads import DOC_KEY, REVISION
from llama_index_docmemo.store.plans import SearchPlan

RRF_K = 2  # Qdrant's own default ranking constant, set explicitly so both backends agree
# RRF weights of the (dense, lexical) branches. With the CPU encoder the lexical branch carries
# most of the signal: on MMLongBench-Doc weight 3 gave recall@5 0.643 vs 0.622 with equal weights
# (benchmarks/retrieval_recall.py). A dense-only encoder (ColQwen) has no lexical branch.
RRF_WEIGHTS = [1.0, 3.0]

ScoredPayload = tuple[dict[str, Any], float]
TieKey = tuple[str, int, str, str]


def _tie_key(payload: dict[str, Any]) -> TieKey:
    """(doc_id, page), then the point's identity: two tenants' ``report.pdf`` p.1, or two
    revisions of one document during a write, are different points, never fused into one."""
    return (
        str(payload.get("doc_id", "")),
        int(payload.get("page", 0)),
        str(payload.get(DOC_KEY, "")),
        str(payload.get(REVISION, "")),
    )


def order_branch(scored: Sequence[ScoredPayload]) -> list[ScoredPayload]:
    """Best first; equal scores by (doc_id, page).

    Pages without text share one dense vector and are absent from the lexical branch, so whole
    groups tie; their rank decides their fused score, so each branch gets this fixed order first.
    """
    return sorted(scored, key=lambda hit: (-float(hit[1]), *_tie_key(hit[0])))


def rrf_score(rank: int, weight: float, k: int = RRF_K) -> float:
    """Qdrant's weighted RRF term for a 1-based rank: ``1 / (rank / weight + k - 1)``.

    With weight 1 this is the textbook ``1 / (k + rank - 1)``; the weighted form is the one
    qdrant-edge 0.9 computes (checked against its fused scores), so rankings match Qdrant's.
    """
    return 1.0 / (rank / weight + k - 1)


def _dbsf_normalised(scored: Sequence[ScoredPayload]) -> list[float]:
    """Qdrant's DBSF normalisation: (s - (mean - 3 sd)) / (6 sd), sample sd, not clipped.

    (Checked against qdrant-edge 0.9's fused scores.) A branch of one hit, or of equal scores,
    gives every hit 0.5.
    """
    values = np.asarray([float(score) for _, score in scored], dtype=np.float64)
    if values.size < 2 or float(values.std(ddof=1)) == 0.0:
        return [0.5] * int(values.size)
    mean, sd = float(values.mean()), float(values.std(ddof=1))
    return [float(v) for v in (values - (mean - 3.0 * sd)) / (6.0 * sd)]


def fuse_branches(
    branches: Sequence[Sequence[ScoredPayload]], plan: SearchPlan
) -> list[ScoredPayload]:
    """The plan's top ``limit`` pages from its branch results, deterministically.

    One branch (no lexical vector): that branch in :func:`order_branch` order. Two branches (dense,
    lexical): RRF with :data:`RRF_WEIGHTS` or DBSF over branches in that order; fused scores are
    summed in branch order (the same float result in every process) and ties are broken by
    (doc_id, page). Identical query + identical store -> identical ranking and scores.
    """
    ordered = [order_branch(branch) for branch in branches]
    if len(ordered) == 1:
        return ordered[0][: plan.limit]
    fused: dict[TieKey, float] = {}
    payloads: dict[TieKey, dict[str, Any]] = {}
    for index, branch in enumerate(ordered):
        if plan.fusion == "rrf":
            terms = [rrf_score(rank, RRF_WEIGHTS[index]) for rank in range(1, len(branch) + 1)]
        else:
            terms = _dbsf_normalised(branch)
        for (payload, _), term in zip(branch, terms, strict=True):
            key = _tie_key(payload)
            payloads.setdefault(key, payload)
            fused[key] = fused.get(key, 0.0) + term
    best = sorted(fused, key=lambda key: (-fused[key], *key))[: plan.limit]
    return [(payloads[key], fused[key]) for key in best]
