"""``bench llm_local``'s pooled accuracy interval (:func:`stratified_ci`), against a case whose
bootstrap distribution is worked out by hand."""

from __future__ import annotations

import numpy as np
import pytest

from preflab_bench.llm_local import stratified_ci

# group 1: pairs (1 of 1, 0 of 1); group 2: one pair, 1 of 1. Pooled: 2 of 3.
GROUPS = [(np.array([1.0, 0.0]), np.array([1.0, 1.0])), (np.array([1.0]), np.array([1.0]))]


@pytest.mark.parametrize("seed", [0, 1, 2])
def test_the_interval_resamples_within_each_group(seed: int) -> None:
    """Resampling within groups, group 2 always adds 1 of 1 and group 1's two draws add 0, 1 or
    2 of 2 with chances 1/4, 1/2, 1/4: the pooled ratio is 1/3, 2/3 or 1 with those chances.
    Each end holds a quarter of 10,000 resamples, far beyond 2.5 %, so the 2.5 and 97.5
    percentiles are exactly 1/3 and 1 whatever the seed. (Resampling the three pairs together,
    the ratio would be 0 with chance 1/27 > 2.5 % and the lower end would be 0.)"""
    point, lo, hi = stratified_ci(GROUPS, np.random.default_rng(seed))
    assert point == pytest.approx(2 / 3)
    assert (lo, hi) == (pytest.approx(1 / 3), pytest.approx(1.0))


def test_the_point_is_the_pooled_ratio_not_the_mean_of_the_groups_ratios() -> None:
    # groups 1/2 and 3/3: pooled 4/5; the mean of the two ratios would be 0.75
    groups = [(np.array([1.0, 0.0]), np.array([1.0, 1.0])), (np.ones(3), np.ones(3))]
    point, lo, hi = stratified_ci(groups, np.random.default_rng(0))
    assert point == pytest.approx(4 / 5)
    assert lo == pytest.approx(3 / 5) and hi == pytest.approx(1.0)  # group 1 gives 0 or 2 of 2
