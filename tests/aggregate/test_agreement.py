"""Krippendorff's α (nominal, missing answers) against a case computed by hand, and its
bootstrap interval."""

from __future__ import annotations

import math

import numpy as np
import pytest

from preflab.aggregate.agreement import alpha_interval, krippendorff_alpha
from preflab.errors import DataError

# Four queries, answers +1/−1, a fifth with one answer (not pairable). By hand:
# coincidences o(+,+) = 3 (u1: 6 ordered pairs / 2) + 1 (u4: 2 / 2) = 4,
# o(+,−) = o(−,+) = 1 (u2) + 1 (u4: 2 / 2) = 2, o(−,−) = 2 (u3);
# n(+) = 6, n(−) = 4, n = 10; α = 1 − (n − 1) · (2 + 2) / (2 · 6 · 4) = 1 − 36 / 48 = 0.25.
UNITS = [[1, 1, 1], [1, -1], [-1, -1], [1, 1, -1], [1]]


def test_alpha_matches_the_hand_computed_case() -> None:
    assert krippendorff_alpha(UNITS) == pytest.approx(0.25, abs=1e-12)
    # values are labels, not numbers: renaming them changes nothing
    renamed = [["L" if v == 1 else "R" for v in u] for u in UNITS]
    assert krippendorff_alpha(renamed) == pytest.approx(0.25, abs=1e-12)


def test_alpha_is_one_for_perfect_agreement_and_below_zero_for_systematic_disagreement() -> None:
    assert krippendorff_alpha([[1, 1], [-1, -1, -1], [1, 1]]) == pytest.approx(1.0)
    # every unit split: observed disagreement above chance
    assert krippendorff_alpha([[1, -1], [1, -1], [-1, 1]]) < 0
    assert math.isnan(krippendorff_alpha([[1], [-1]]))  # nothing pairable
    assert math.isnan(krippendorff_alpha([[1, 1], [1, 1]]))  # no variation


def test_the_bootstrap_interval_holds_alpha_and_narrows_with_more_units() -> None:
    rng = np.random.default_rng(3)
    truth = rng.choice([-1, 1], size=400)

    def crowd(n: int) -> list[list[int]]:
        return [[int(t) if rng.random() < 0.85 else -int(t) for _ in range(3)] for t in truth[:n]]

    small = alpha_interval(crowd(40), rng=np.random.default_rng(0), n_boot=300)
    large = alpha_interval(crowd(400), rng=np.random.default_rng(0), n_boot=300)
    for iv in (small, large):
        assert iv.low <= iv.alpha <= iv.high
    assert large.high - large.low < small.high - small.low
    # three raters each right 85 % of the time: α near (2·0.85 − 1)² = 0.49
    assert large.low < 0.49 < large.high
    with pytest.raises(DataError, match="level"):
        alpha_interval(UNITS, rng=np.random.default_rng(0), level=1.5)
