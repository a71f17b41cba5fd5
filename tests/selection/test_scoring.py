"""group_score against hand-computed cases and properties; the batched matrix agrees."""

from __future__ import annotations

import itertools

import numpy as np
import pytest

from preflab.errors import DataError
from preflab.selection.scoring import group_score, group_score_matrix


def _sym(n: int, entries: dict[tuple[int, int], float]) -> np.ndarray:
    v = np.zeros((n, n))
    for (i, j), x in entries.items():
        v[i, j] = v[j, i] = x
    return v


def test_equal_sizes_hand_computed() -> None:
    v = _sym(4, {(0, 1): 0.1, (2, 3): 0.3, (0, 2): 0.2, (0, 3): 0.4, (1, 2): 0.6, (1, 3): 0.8})
    # v_inter = (0.2 + 0.4 + 0.6 + 0.8) / 4 = 0.5; v_intra = (0.1 + 0.3) / 2 = 0.2; r = 1
    assert group_score(v, [0, 1], [2, 3], eps=0.0) == pytest.approx(2.5)
    assert group_score(v, [0, 1], [2, 3]) == pytest.approx(0.5 / (0.2 + 1e-8))


def test_unequal_sizes_hand_computed() -> None:
    entries = {(0, 1): 0.1, (0, 2): 0.2, (1, 2): 0.3, (3, 4): 0.4}
    entries |= {(i, j): 0.9 for i in (0, 1, 2) for j in (3, 4)}
    v = _sym(5, entries)
    # v_intra(A) = 0.2, v_intra(B) = 0.4 -> v_intra = 0.3; v_inter = 0.9; r = 3/2
    assert group_score(v, [0, 1, 2], [3, 4], eps=0.0) == pytest.approx(0.9 / (1.5 * 0.3))
    assert group_score(v, [3, 4], [0, 1, 2], eps=0.0) == pytest.approx(2.0)


def test_symmetric_in_the_groups_and_the_matrix_orientation() -> None:
    rng = np.random.default_rng(0)
    v = rng.random((10, 10))
    a, b = [0, 3, 5], [1, 2, 7, 9]
    assert group_score(v, a, b) == pytest.approx(group_score(v, b, a))
    assert group_score(v, a, b) == pytest.approx(group_score(v.T, a, b))
    assert group_score(v, a, b) == pytest.approx(group_score(v, a[::-1], b[::-1]))


def test_r_is_one_for_equal_sizes() -> None:
    rng = np.random.default_rng(1)
    m = rng.random((8, 8))
    v = m + m.T
    a, b = [0, 1, 2], [5, 6, 7]
    inter = v[np.ix_(a, b)].mean()
    intra = 0.5 * (
        np.mean([v[i, j] for i, j in itertools.combinations(a, 2)])
        + np.mean([v[i, j] for i, j in itertools.combinations(b, 2)])
    )
    assert group_score(v, a, b, eps=0.0) == pytest.approx(inter / intra)


def test_eps_guards_zero_intra_variance() -> None:
    v = _sym(4, {(0, 2): 0.5, (0, 3): 0.5, (1, 2): 0.5, (1, 3): 0.5})
    assert group_score(v, [0, 1], [2, 3], eps=1e-8) == pytest.approx(0.5 / 1e-8)
    assert group_score(np.zeros((4, 4)), [0, 1], [2, 3]) == 0.0


def test_matrix_agrees_with_scalar_and_marks_overlaps() -> None:
    rng = np.random.default_rng(2)
    m = rng.random((12, 12))
    v = m + m.T
    np.fill_diagonal(v, rng.random(12))  # diagonal must not leak into intra terms
    groups = [(0, 1), (2, 3, 4), (5, 6, 7, 8), (9, 10, 11), (0, 1, 2)]
    s = group_score_matrix(v, groups)
    for i, j in itertools.product(range(len(groups)), repeat=2):
        if set(groups[i]) & set(groups[j]):
            assert np.isnan(s[i, j])
        else:
            assert s[i, j] == pytest.approx(group_score(v, groups[i], groups[j]))


@pytest.mark.parametrize(
    ("a", "b", "match"),
    [
        ([], [1, 2], "empty"),
        ([0], [1, 2], "at least 2"),
        ([0, 1], [1, 2], "both groups"),
        ([0, 0], [1, 2], "more than once"),
        (list(range(9)), [9, 10], "limit of 8"),
        ([0, 1], [2, 30], "outside"),
        ([0.0, 1.0], [2, 3], "integer"),
    ],
)
def test_bad_groups(a: list, b: list, match: str) -> None:
    with pytest.raises(DataError, match=match):
        group_score(np.ones((12, 12)), a, b)


def test_bad_matrix() -> None:
    v = np.ones((4, 4))
    v[0, 1] = np.nan
    with pytest.raises(DataError, match="NaN"):
        group_score(v, [0, 1], [2, 3])
    with pytest.raises(DataError, match="square"):
        group_score(np.ones((4, 5)), [0, 1], [2, 3])
    with pytest.raises(DataError, match="≥ 0"):
        group_score(-np.ones((4, 4)), [0, 1], [2, 3])
