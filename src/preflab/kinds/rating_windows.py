"""Pref-GUIDE's conversions of real-time scalar feedback into preferences (Algorithms 1 and 2).

Algorithm 1 (Individual): slide a window of n consecutive items over a stream of N ratings;
inside every window compare every pair (A < B): |f_A − f_B| < δ → 0.5, f_A > f_B → 1, else 0.
Windows overlap, so a pair appears once per window containing both items: there are exactly
(N − n + 1)·C(n, 2) labelled pairs, duplicates included, as in the paper. δ defaults to 5% of
the feedback range [−1, 1], i.e. 0.1 (Pref-GUIDE §4.2).

Algorithm 2 (Voting): every evaluator's reward model j predicts r_j for both items of each
pair and votes 1 (r_j(A) − r_j(B) ≥ δ), 0.5 (|Δ| < δ) or 0; the label is the mean vote.
"""

from __future__ import annotations

from dataclasses import dataclass
from math import comb
from typing import cast

import numpy as np

from preflab.errors import ConfigError, DataError

FEEDBACK_RANGE = (-1.0, 1.0)
DEFAULT_DELTA = 0.05 * (FEEDBACK_RANGE[1] - FEEDBACK_RANGE[0])
"""δ = 5% of the feedback range [−1, 1] = 0.1."""


@dataclass(frozen=True)
class PairLabels:
    """Labelled pairs of stream items: p = P(item a ≻ item b)."""

    pairs: np.ndarray
    """(P, 2) int64 item indices (a < b), in the order Algorithm 1 visits them."""
    p: np.ndarray
    """(P,) float64 labels in {0, 0.5, 1} (Algorithm 1) or mean votes (Algorithm 2)."""

    def __len__(self) -> int:
        return int(self.p.shape[0])


def window_pairs(n_items: int, window: int = 10) -> np.ndarray:
    """All (A, B) pairs, A < B, inside every window of ``window`` consecutive items: (P, 2).

    P = (n_items − window + 1)·C(window, 2); 0 pairs when the stream is shorter than a window.
    """
    if window < 2:
        raise ConfigError(f"window must be ≥ 2 (a window needs a pair), got {window}")
    if n_items < 0:
        raise ConfigError(f"n_items must be ≥ 0, got {n_items}")
    n_windows = max(0, n_items - window + 1)
    iu, ju = np.triu_indices(window, k=1)  # row-major: (0,1), (0,2), ... like the nested loop
    starts = np.arange(n_windows, dtype=np.int64)[:, None]
    a = (starts + iu[None, :]).ravel()
    b = (starts + ju[None, :]).ravel()
    out = np.stack([a, b], axis=1)
    assert out.shape[0] == n_windows * comb(window, 2)
    return out


def _check_delta(delta: float) -> float:
    d = float(delta)
    if not np.isfinite(d) or d < 0:
        raise ConfigError(f"delta (no-preference range) must be finite and ≥ 0, got {delta}")
    return d


def _compare(fa: np.ndarray, fb: np.ndarray, delta: float) -> np.ndarray:
    """Pref-GUIDE's label of each pair: 0.5 when |f^A − f^B| < δ (strictly), else which is
    higher. A gap of δ up to float rounding (0.3 − 0.2 is 0.0999…, 0.4 − 0.3 is 0.1000…) is a
    gap of δ, not below it: the slider's ±0.1 keys make such gaps common."""
    diff = fa - fb
    gap = np.abs(diff)
    below = (gap < delta) & ~np.isclose(gap, delta, rtol=1e-9, atol=1e-12)
    return np.where(below, 0.5, np.where(diff > 0, 1.0, 0.0))


def window_labels(values: np.ndarray, window: int = 10, delta: float | None = None) -> PairLabels:
    """Pref-GUIDE Algorithm 1 on one evaluator's stream of ratings in [−1, 1].

    ``values`` are consecutive ratings in time order (see :func:`preflab.kinds.rating_streams.stream_values`
    to get them from stored ratings with their timestamps checked). Raises DataError on NaN,
    values outside [−1, 1] or a non 1-D input.
    """
    f = np.asarray(values, dtype=np.float64)
    if f.ndim != 1:
        raise DataError(f"values must be a 1-D stream of ratings, got shape {f.shape}")
    if not np.all(np.isfinite(f)):
        raise DataError(
            "ratings contain NaN or infinite values; drop those steps "
            "(a missing rating is no rating)"
        )
    lo, hi = FEEDBACK_RANGE
    if f.size and (f.min() < lo or f.max() > hi):
        raise DataError(
            f"ratings must lie in [{lo}, {hi}], got values in [{f.min():.3g}, {f.max():.3g}]; "
            "rescale the slider to [−1, 1]"
        )
    d = DEFAULT_DELTA if delta is None else _check_delta(delta)
    pairs = window_pairs(f.size, window)
    return PairLabels(pairs=pairs, p=_compare(f[pairs[:, 0]], f[pairs[:, 1]], d))


def vote_labels(predictions: np.ndarray, pairs: np.ndarray, delta: float) -> np.ndarray:
    """Pref-GUIDE Algorithm 2: mean over evaluators' models of their 1 / 0.5 / 0 votes per pair.

    ``predictions`` is (S evaluators, N items): model j's predicted reward of every item, on a
    common scale (e.g. each model's outputs standardised); ``pairs`` is (P, 2) item indices
    (e.g. :func:`window_pairs`); ``delta`` is the no-preference range in prediction units.
    Returns (P,) labels c / S in [0, 1].
    """
    r = np.asarray(predictions, dtype=np.float64)
    if r.ndim == 1:
        r = r[None, :]
    if r.ndim != 2 or r.shape[0] == 0:
        raise DataError(
            f"predictions must be (evaluators, items), got shape {np.shape(predictions)}"
        )
    if not np.all(np.isfinite(r)):
        raise DataError("predictions contain NaN or infinite values")
    pr = np.asarray(pairs)
    if pr.ndim != 2 or pr.shape[1] != 2 or not np.issubdtype(pr.dtype, np.integer):
        raise DataError(
            f"pairs must be an integer array of shape (P, 2), got {pr.dtype} {pr.shape}"
        )
    if pr.size and (pr.min() < 0 or pr.max() >= r.shape[1]):
        raise DataError(
            f"pairs index items outside [0, {r.shape[1]}); predictions cover {r.shape[1]} items"
        )
    d = _check_delta(delta)
    votes = _compare(r[:, pr[:, 0]], r[:, pr[:, 1]], d)  # (S, P)
    return cast(np.ndarray, votes.sum(0) / r.shape[0])


def binary_majority(labels: np.ndarray) -> np.ndarray:
    """The binary-majority baseline: mean vote > 0.5 → 1, < 0.5 → 0, exactly 0.5 → 0.5."""
    v = np.asarray(labels, dtype=np.float64)
    return np.where(v > 0.5, 1.0, np.where(v < 0.5, 0.0, 0.5))


def capped_draw(n: int, cap: int, rng: np.random.Generator) -> np.ndarray | None:
    """Sorted indices of ``cap`` of ``n`` rows drawn uniformly without replacement, or None when
    ``n`` ≤ ``cap`` (keep them all): the one way labels and pairs are capped."""
    if n <= cap:
        return None
    return np.sort(rng.choice(n, size=cap, replace=False))
