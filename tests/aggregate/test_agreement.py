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


# ----- the vectorised coincidences against the per-unit definition ---------------------------------
def slow_coincidences(units: list[list]) -> tuple[np.ndarray, list]:
    """The coincidence matrix by its definition, one unit at a time: the ordered pairs of
    distinct answers of each unit with m ≥ 2 answers, counted by their values, over m − 1."""
    values = sorted({v for u in units for v in u}, key=repr)
    o = np.zeros((len(values), len(values)))
    for u in units:
        if len(u) < 2:
            continue
        for i, x in enumerate(u):
            for j, y in enumerate(u):
                if i != j:
                    o[values.index(x), values.index(y)] += 1.0 / (len(u) - 1)
    return o, values


def slow_alpha(units: list[list]) -> float:
    o, _ = slow_coincidences(units)
    n_c = o.sum(axis=1)
    n = n_c.sum()
    if n < 2 or n**2 - (n_c**2).sum() == 0:
        return float("nan")
    return float(1 - (n - 1) * (o.sum() - np.trace(o)) / (n**2 - (n_c**2).sum()))


def slow_interval(units: list[list], rng: np.random.Generator, n_boot: int) -> tuple:
    """The bootstrap as a loop over replicates, each a list of the drawn units."""
    pairable = [u for u in units if len(u) >= 2]
    reps = []
    for _ in range(n_boot):
        pick = rng.integers(0, len(pairable), size=len(pairable))
        a = slow_alpha([pairable[i] for i in pick])
        if not math.isnan(a):
            reps.append(a)
    lo, hi = np.quantile(reps, [0.025, 0.975])
    return slow_alpha(pairable), lo, hi, len(pairable)


def random_units(rng: np.random.Generator, n: int, labels: list) -> list[list]:
    return [
        [labels[int(k)] for k in rng.integers(0, len(labels), size=int(rng.integers(0, 7)))]
        for _ in range(n)
    ]


@pytest.mark.parametrize("seed", range(8))
def test_vectorised_coincidences_match_the_per_unit_definition(seed: int) -> None:
    from preflab.aggregate.agreement import _coincidences, _coincidences_of, _count_matrix

    rng = np.random.default_rng(seed)
    labels: list = [[1, -1], ["L", "R", "="], [0, 1, 2, 3]][seed % 3]
    units = random_units(rng, int(rng.integers(1, 40)), labels)
    o, values = _coincidences(units)
    o_ref, values_ref = slow_coincidences(units)
    assert values == values_ref
    np.testing.assert_allclose(o, o_ref, rtol=1e-12, atol=1e-12)
    a, a_ref = krippendorff_alpha(units), slow_alpha(units)
    assert (math.isnan(a) and math.isnan(a_ref)) or a == pytest.approx(a_ref, abs=1e-12)
    # multiplicities: a unit taken k times counts as k copies of it
    counts, _ = _count_matrix(units)
    k = rng.integers(0, 4, size=len(units))
    copies = [u for u, times in zip(units, k, strict=True) for _ in range(times)]
    o_k = _coincidences_of(counts, k)
    o_copies, values_copies = slow_coincidences(copies)
    cols = [values.index(v) for v in values_copies]
    np.testing.assert_allclose(o_k[np.ix_(cols, cols)], o_copies, rtol=1e-12, atol=1e-12)


def test_coincidences_of_a_hand_computed_case() -> None:
    from preflab.aggregate.agreement import _coincidences

    o, values = _coincidences(UNITS)
    assert values == [-1, 1]
    np.testing.assert_allclose(o, [[2.0, 2.0], [2.0, 4.0]], atol=1e-12)  # see the comment above


@pytest.mark.parametrize("seed", range(4))
def test_bootstrap_matches_the_replicate_loop_draw_for_draw(seed: int) -> None:
    """Same generator, same draws: the interval equals the one of the loop that rebuilds each
    replicate's units, and the generator ends in the same state."""
    rng = np.random.default_rng(100 + seed)
    truth = rng.choice([-1, 1], size=60)
    units = [
        [int(t) if rng.random() < 0.8 else -int(t) for _ in range(int(rng.integers(1, 5)))]
        for t in truth
    ]
    fast_rng, slow_rng = np.random.default_rng(seed), np.random.default_rng(seed)
    iv = alpha_interval(units, rng=fast_rng, n_boot=200)
    alpha, lo, hi, n = slow_interval(units, slow_rng, 200)
    assert iv.units == n
    assert iv.alpha == pytest.approx(alpha, abs=1e-12)
    assert iv.low == pytest.approx(lo, abs=1e-12)
    assert iv.high == pytest.approx(hi, abs=1e-12)
    assert fast_rng.integers(0, 2**62) == slow_rng.integers(0, 2**62)
