"""Intervals of the harness: scipy's bootstrap over questions, its paired form, and Wilson intervals.

The unit of resampling is the question: every figure of a report is a mean over questions, so its
uncertainty comes from which questions happened to be asked. With several seeds, a question's value
is its mean over seeds before resampling (seeds average the label noise; they are not new questions).
A paired comparison resamples the same questions for both engines, which is the bootstrap of the
per-question differences (``scipy.stats.bootstrap`` with ``paired=True`` resamples exactly so).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np
from scipy import stats

N_BOOT = 9999
LEVEL = 0.95
BOOT_SEED = 20260


def bootstrap_ci(
    values: Sequence[float], *, n_boot: int = N_BOOT, level: float = LEVEL, seed: int = BOOT_SEED
) -> tuple[float, float]:
    """Percentile bootstrap interval of the mean of ``values`` (``scipy.stats.bootstrap``, seeded).

    Returns ``(nan, nan)`` for no values; one value or a constant sample gives a zero-width
    interval (scipy needs two observations, and a sample without spread has nothing to resample).
    """
    if not 0.0 < level < 1.0:
        raise ValueError(f"level must be in (0, 1), got {level}")
    if n_boot < 1:
        raise ValueError(f"n_boot must be positive, got {n_boot}")
    data = np.asarray(values, dtype=float)
    if data.size == 0:
        return (float("nan"), float("nan"))
    if np.all(data == data[0]):
        return (float(data[0]), float(data[0]))
    result = stats.bootstrap(
        (data,),
        np.mean,
        n_resamples=n_boot,
        confidence_level=level,
        method="percentile",
        rng=np.random.default_rng(seed),
    )
    interval = result.confidence_interval
    return (float(interval.low), float(interval.high))


@dataclass(frozen=True)
class PairedResult:
    """``diff`` = mean(a) - mean(b) over the same questions, its interval, and the discordant pairs.

    ``a_only``: questions (or question x seed pairs) where ``a`` succeeded and ``b`` did not;
    ``b_only`` the reverse. Only these pairs carry information about which engine is better.
    """

    diff: float
    ci: tuple[float, float]
    a_only: int
    b_only: int
    n: int


def paired_bootstrap(
    a: Sequence[float],
    b: Sequence[float],
    *,
    n_boot: int = N_BOOT,
    level: float = LEVEL,
    seed: int = BOOT_SEED,
) -> PairedResult:
    """Paired bootstrap of mean(a - b): the same resampled questions for both engines.

    ``a`` and ``b`` are per-question values in the same order (0/1 successes, or their means over
    seeds). Discordant counts compare values per position (a > b, a < b).
    """
    left = np.asarray(a, dtype=float)
    right = np.asarray(b, dtype=float)
    if left.shape != right.shape:
        raise ValueError(f"paired samples differ in length: {left.size} vs {right.size}")
    diffs = left - right
    lo, hi = bootstrap_ci(diffs, n_boot=n_boot, level=level, seed=seed)
    return PairedResult(
        diff=float(diffs.mean()) if diffs.size else float("nan"),
        ci=(lo, hi),
        a_only=int((diffs > 0).sum()),
        b_only=int((diffs < 0).sum()),
        n=int(diffs.size),
    )


def discordant_counts(a: Sequence[bool], b: Sequence[bool]) -> tuple[int, int]:
    """(a succeeded and b failed, b succeeded and a failed) over paired binary outcomes."""
    if len(a) != len(b):
        raise ValueError(f"paired samples differ in length: {len(a)} vs {len(b)}")
    a_only = sum(1 for x, y in zip(a, b, strict=True) if x and not y)
    b_only = sum(1 for x, y in zip(a, b, strict=True) if y and not x)
    return a_only, b_only


def wilson_interval(k: int, n: int, *, level: float = LEVEL) -> tuple[float, float]:
    """Wilson score interval of a proportion k/n (``scipy.stats.binomtest``); (0, 1) when n is 0.

    For the rates of a reader's labels and verdicts, where n can be small and k can be 0 or n
    (the normal approximation then collapses to a point)."""
    if n == 0:
        return 0.0, 1.0
    interval = stats.binomtest(k, n).proportion_ci(confidence_level=level, method="wilson")
    return float(interval.low), float(interval.high)
