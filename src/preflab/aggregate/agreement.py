"""Inter-annotator agreement: Krippendorff's α for nominal answers (with missing answers) and a
bootstrap interval over units.

For units u (queries) each answered by m_u ≥ 2 people, the coincidence matrix is
o_ck = Σ_u (number of ordered pairs of answers (c, k) in u) / (m_u − 1); with n_c = Σ_k o_ck
and n = Σ_c n_c, the nominal α = 1 − (n − 1) Σ_{c≠k} o_ck / Σ_{c≠k} n_c n_k (Krippendorff,
*Content Analysis*, 2004, §11.3.1). Units with fewer than two answers are not pairable and
left out. α = 1 is perfect agreement, 0 agreement at chance, below 0 systematic disagreement.

The `krippendorff` package on PyPI computes the same but is GPL-3.0 (PrefLab is MIT), so α is
computed here and checked against a hand-computed case (tests/aggregate/test_agreement.py).
"""

from __future__ import annotations

from collections.abc import Hashable, Sequence
from dataclasses import dataclass

import numpy as np

from preflab.errors import DataError


def _count_matrix(units: Sequence[Sequence[Hashable]]) -> tuple[np.ndarray, list[Hashable]]:
    """C: (units × values) counts, C[u, c] = how many answers of unit u are value c; and the
    values, sorted by repr (the columns' order)."""
    values = sorted({v for u in units for v in u}, key=repr)
    index = {v: i for i, v in enumerate(values)}
    rows = [r for r, u in enumerate(units) for _ in u]
    cols = [index[v] for u in units for v in u]
    counts = np.zeros((len(units), len(values)))
    np.add.at(counts, (np.asarray(rows, dtype=np.intp), np.asarray(cols, dtype=np.intp)), 1.0)
    return counts, values


def _coincidences_of(counts: np.ndarray, mult: np.ndarray | None = None) -> np.ndarray:
    """The coincidence matrix of the units whose counts are the rows of ``counts``, unit u
    taken ``mult[u]`` times (once each without ``mult``; a bootstrap replicate's multiplicities).

    Unit u with counts c_u and m_u = Σ_c c_u[c] ≥ 2 answers has c_u[c] c_u[k] − δ_ck c_u[c]
    ordered pairs of distinct answers (c, k), i.e. the matrix c_u c_uᵀ − diag(c_u); so with
    w_u = mult_u / (m_u − 1) (0 for units with m_u < 2, not pairable)
    o = Σ_u w_u (c_u c_uᵀ − diag(c_u)) = Cᵀ diag(w) C − diag(Cᵀ w)."""
    m = counts.sum(axis=1)
    pairable = m >= 2
    w = np.zeros(len(m))
    k = np.ones(len(m)) if mult is None else np.asarray(mult, dtype=np.float64)
    w[pairable] = k[pairable] / (m[pairable] - 1.0)
    o: np.ndarray = (counts.T * w) @ counts - np.diag(counts.T @ w)
    return o


def _coincidences(units: Sequence[Sequence[Hashable]]) -> tuple[np.ndarray, list[Hashable]]:
    counts, values = _count_matrix(units)
    return _coincidences_of(counts), values


def _alpha_of(o: np.ndarray) -> float:
    """Nominal α from a coincidence matrix (NaN: fewer than two pairable answers, or no
    variation)."""
    n_c = o.sum(axis=1)
    n = float(n_c.sum())
    if n < 2:
        return float("nan")
    disagree_obs = float(o.sum() - np.trace(o))
    disagree_exp = float(n_c.sum() ** 2 - (n_c**2).sum())
    if disagree_exp == 0:
        return float("nan")
    return 1.0 - (n - 1.0) * disagree_obs / disagree_exp


def krippendorff_alpha(units: Sequence[Sequence[Hashable]]) -> float:
    """Nominal Krippendorff's α over ``units`` (each the answers one query got, any number;
    answers are any hashable values). NaN when fewer than two answers are pairable or every
    pairable answer has the same value (no variation to agree on)."""
    o, _values = _coincidences(units)
    return _alpha_of(o)


@dataclass(frozen=True)
class AlphaInterval:
    """α with a percentile bootstrap interval over units."""

    alpha: float
    low: float
    high: float
    units: int
    """Pairable units (queries with at least two answers)."""


def alpha_interval(
    units: Sequence[Sequence[Hashable]],
    *,
    rng: np.random.Generator,
    n_boot: int = 1000,
    level: float = 0.95,
) -> AlphaInterval:
    """α and its percentile bootstrap interval: units (queries) resampled with replacement,
    ``n_boot`` times (NaN replicates, with no variation, left out)."""
    if not 0 < level < 1:
        raise DataError(f"level must be in (0, 1), got {level}")
    if n_boot < 1:
        raise DataError(f"n_boot must be ≥ 1, got {n_boot}")
    pairable = [list(u) for u in units if len(u) >= 2]
    counts, _values = _count_matrix(pairable)
    alpha = _alpha_of(_coincidences_of(counts))
    if not pairable or np.isnan(alpha):
        return AlphaInterval(alpha, float("nan"), float("nan"), len(pairable))
    reps = []
    for _ in range(n_boot):
        # one draw of units per replicate, as many as there are; a replicate's coincidences
        # are the units' counts weighted by how often each was drawn
        pick = rng.integers(0, len(pairable), size=len(pairable))
        a = _alpha_of(_coincidences_of(counts, np.bincount(pick, minlength=len(pairable))))
        if not np.isnan(a):
            reps.append(a)
    if not reps:
        return AlphaInterval(alpha, float("nan"), float("nan"), len(pairable))
    lo, hi = np.quantile(reps, [(1 - level) / 2, 1 - (1 - level) / 2])
    return AlphaInterval(alpha, float(lo), float(hi), len(pairable))
