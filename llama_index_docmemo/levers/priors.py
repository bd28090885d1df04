"""Priors calibrated from the first-stage score (pure): p(page holds evidence | its retrieval score).

The uninformed Beta(1, 1) makes Thompson draws uniform noise that outranks real differences in
retrieval score. A logistic model of "gold page" on the normalised score c and the log-rank,
fitted once on labelled data (the tuning half), turns each candidate's score into a prior mean
p; the prior Beta(a0 + s p, b0 + s (1 - p)) then carries the retrieval evidence into the
belief, with s the prior strength.
"""

from __future__ import annotations

import math
from collections.abc import Sequence

import numpy as np


def calibrated_probability(scores: Sequence[float], coefficients: Sequence[float]) -> np.ndarray:
    """p_i = sigmoid(b0 + b1 * c_i + b2 * log(1 + rank_i)) for scores c in ranking order.

    ``coefficients`` is (b0, b1, b2); rank is 0 for the first score.
    """
    if len(coefficients) != 3:
        raise ValueError(f"calibration needs 3 coefficients (b0, b1, b2), got {len(coefficients)}")
    c = np.asarray(scores, dtype=np.float64)
    ranks = np.log1p(np.arange(c.size, dtype=np.float64))
    b0, b1, b2 = (float(x) for x in coefficients)
    z = b0 + b1 * c + b2 * ranks
    return 1.0 / (1.0 + np.exp(-z))


def fit_calibration(
    scores: Sequence[Sequence[float]],
    labels: Sequence[Sequence[bool]],
    *,
    iterations: int = 500,
    l2: float = 1e-3,
) -> tuple[float, float, float]:
    """Logistic regression (Newton's method) of gold labels on (1, c, log(1 + rank)).

    ``scores[q]`` is question q's candidate scores in ranking order and ``labels[q]`` whether each
    candidate is a gold page. Used offline on the tuning half only; engines never see labels.
    """
    rows: list[list[float]] = []
    ys: list[float] = []
    for qs, ql in zip(scores, labels, strict=True):
        if len(qs) != len(ql):
            raise ValueError("each question needs one label per score")
        for rank, (c, y) in enumerate(zip(qs, ql, strict=True)):
            rows.append([1.0, float(c), math.log1p(rank)])
            ys.append(1.0 if y else 0.0)
    if not rows or min(ys) == max(ys):
        raise ValueError("calibration needs both gold and non-gold candidates")
    x = np.asarray(rows)
    y = np.asarray(ys)
    w = np.zeros(3)
    for _ in range(iterations):
        p = 1.0 / (1.0 + np.exp(-(x @ w)))
        grad = x.T @ (p - y) + l2 * w
        hess = (x * (p * (1 - p))[:, None]).T @ x + l2 * np.eye(3)
        step = np.linalg.solve(hess, grad)
        w -= step
        if float(np.abs(step).max()) < 1e-9:
            break
    return float(w[0]), float(w[1]), float(w[2])
