"""Groupwise active learning: the group variance score s_g (paper 000, Eq. 2 and 3)."""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np

from preflab.errors import DataError
from preflab.kinds.group import GROUP_LIMIT, check_groups


def check_pair_variance(pair_variance: np.ndarray) -> np.ndarray:
    """Validate an (N, N) finite, non-negative variance matrix; return it symmetrised.

    ``V[i, j]`` = variance across ensemble members of P(i ≻ j). Since P(j ≻ i) = 1 − P(i ≻ j),
    V is symmetric in exact arithmetic; we use (V + Vᵀ)/2 so that scores never depend on
    which group is passed first.
    """
    v = np.asarray(pair_variance, dtype=np.float64)
    if v.ndim != 2 or v.shape[0] != v.shape[1]:
        raise DataError(
            f"pair_variance must be a square (N, N) matrix, got shape {v.shape}; "
            "compute it with preflab.reward.pair_variance(model.segment_returns(batch))"
        )
    if not np.all(np.isfinite(v)):
        raise DataError(
            "pair_variance has NaN or infinite entries; check the reward ensemble's inputs"
        )
    if (v < 0).any():
        raise DataError(f"pair_variance must be ≥ 0 (a variance), found min {v.min():.3g}")
    return 0.5 * (v + v.T)


def _check_rows(group: Sequence[int], n: int, name: str) -> np.ndarray:
    rows = np.asarray(group)
    if rows.size and not np.issubdtype(rows.dtype, np.integer):
        raise DataError(
            f"{name} must hold integer row indices of pair_variance, got dtype {rows.dtype}"
        )
    if rows.size and (rows.min() < 0 or rows.max() >= n):
        raise DataError(
            f"{name} has row indices outside [0, {n}) of pair_variance: {rows.tolist()}"
        )
    return rows.astype(np.int64)


def group_score(
    pair_variance: np.ndarray,
    group_a: Sequence[int],
    group_b: Sequence[int],
    eps: float = 1e-8,
    *,
    max_size: int | None = GROUP_LIMIT,
) -> float:
    """s_g = v_inter / (r · v_intra + eps) between two groups of rows of ``pair_variance``.

    Our reading of the paper (§3.5, Eq. 2–3):

    - v_inter: mean of V[i, j] over the m·n cross pairs (i ∈ A, j ∈ B) — "averaging the
      variance of the cartesian product".
    - v_intra: "the average variance within each group"; the intra variance *of a group* is
      the mean of V[i, j] over its unordered pairs i < j. The two groups' intra variances are
      combined by their plain mean, (v_intra(A) + v_intra(B)) / 2, so each group counts the
      same whatever its size (the size difference is already penalised by r).
    - r = max(m, n) / min(m, n) (1 for equal sizes).
    - A one-member group has no unordered pair, so its intra variance is undefined: such a
      group is rejected (DataError). Compare single behaviours with V[i, j] directly.

    V is symmetrised first (see :func:`check_pair_variance`), so s_g(A, B) = s_g(B, A).
    Raises DataError on empty or one-member groups, a row in both groups or twice in one,
    groups larger than ``max_size``, out-of-range rows and a non-finite or non-square V.
    """
    v = check_pair_variance(pair_variance)
    a = _check_rows(group_a, v.shape[0], "group_a")
    b = _check_rows(group_b, v.shape[0], "group_b")
    check_groups(a.tolist(), b.tolist(), min_size=2, max_size=max_size)
    if not eps >= 0:
        raise DataError(f"eps must be ≥ 0, got {eps}")
    v_inter = float(v[np.ix_(a, b)].mean())
    v_intra = 0.5 * (_intra(v, a) + _intra(v, b))
    r = max(len(a), len(b)) / min(len(a), len(b))
    return v_inter / (r * v_intra + eps)


def _intra(v: np.ndarray, g: np.ndarray) -> float:
    sub = v[np.ix_(g, g)]
    iu = np.triu_indices(len(g), k=1)
    return float(sub[iu].mean())


def group_score_matrix(
    pair_variance: np.ndarray, groups: Sequence[Sequence[int]], eps: float = 1e-8
) -> np.ndarray:
    """s_g for every pair of ``groups`` at once: (K, K), NaN where two groups share a row.

    Same definition as :func:`group_score` (groups of ≥ 2 rows); one matrix product instead of
    K² Python calls, which is what makes suggestions for 1,000 behaviours fast.
    """
    v = check_pair_variance(pair_variance)
    n = v.shape[0]
    k = len(groups)
    member = np.zeros((k, n), dtype=np.float64)
    for t, g in enumerate(groups):
        rows = _check_rows(g, n, f"group {t}")
        if len(rows) < 2 or len(set(rows.tolist())) != len(rows):
            raise DataError(f"group {t} must have ≥ 2 distinct rows, got {rows.tolist()}")
        member[t, rows] = 1.0
    sizes = member.sum(1)
    mv = member @ v  # (K, N)
    cross = mv @ member.T  # sum of V over A × B; diagonal: 2 × unordered pairs + V[i, i]
    own = member @ np.diag(v)  # V[i, i] terms, not pairs
    intra = (np.diag(cross) - own) / (sizes * (sizes - 1))  # mean over unordered pairs
    v_inter = cross / np.outer(sizes, sizes)
    v_intra = 0.5 * (intra[:, None] + intra[None, :])
    r = np.maximum.outer(sizes, sizes) / np.minimum.outer(sizes, sizes)
    scores = v_inter / (r * v_intra + eps)
    overlap = (member @ member.T) > 0
    scores[overlap] = np.nan
    return scores
