"""Bootstrap intervals and the paired comparison: seeded, pure, checked against hand counts."""

from __future__ import annotations

import math

import numpy as np
import pytest

from llama_index_docmemo.evaluation.stats import bootstrap_ci, discordant_counts, paired_bootstrap


def test_interval_brackets_the_mean_and_is_seeded() -> None:
    values = [1.0] * 30 + [0.0] * 70
    lo, hi = bootstrap_ci(values)
    assert lo < 0.3 < hi
    assert 0.18 < lo < 0.25 and 0.35 < hi < 0.42  # about 0.3 -+ 1.96 * sqrt(.3 * .7 / 100)
    assert bootstrap_ci(values) == (lo, hi)
    skewed = [1.0] * 3 + [0.0] * 20  # a lumpy sample: another seed moves the interval
    assert bootstrap_ci(skewed, seed=1) != bootstrap_ci(skewed, seed=2)


def test_interval_edge_cases() -> None:
    assert bootstrap_ci([1.0, 1.0, 1.0]) == (1.0, 1.0)
    lo, hi = bootstrap_ci([])
    assert math.isnan(lo) and math.isnan(hi)
    with pytest.raises(ValueError, match="level"):
        bootstrap_ci([1.0], level=1.0)


def test_interval_narrows_with_more_questions() -> None:
    rng = np.random.default_rng(0)
    small = bootstrap_ci(rng.integers(0, 2, 40).astype(float))
    large = bootstrap_ci(rng.integers(0, 2, 4000).astype(float))
    assert large[1] - large[0] < (small[1] - small[0]) / 4


def test_paired_difference_and_discordant_pairs() -> None:
    a = [1, 1, 1, 0, 0, 1, 1, 0]
    b = [1, 0, 0, 0, 1, 1, 1, 0]
    result = paired_bootstrap(a, b)
    assert result.diff == pytest.approx(1 / 8)
    assert (result.a_only, result.b_only, result.n) == (2, 1, 8)
    assert result.ci[0] <= result.diff <= result.ci[1]
    assert discordant_counts([bool(x) for x in a], [bool(x) for x in b]) == (2, 1)


def test_paired_interval_is_tighter_than_unpaired_when_engines_agree() -> None:
    rng = np.random.default_rng(3)
    a = rng.integers(0, 2, 200).astype(float)
    b = a.copy()
    b[:6] = 1 - b[:6]  # the engines differ on 6 questions only
    paired = paired_bootstrap(a, b)
    lo_a, hi_a = bootstrap_ci(a)
    assert paired.ci[1] - paired.ci[0] < (hi_a - lo_a) / 2


def test_paired_samples_must_align() -> None:
    with pytest.raises(ValueError, match="differ in length"):
        paired_bootstrap([1, 0], [1])
