"""Minority viewpoints: 1-D Gaussian mixtures on SML weights, number of groups chosen by BIC.

Crowd-PrefRL §5.2: annotators who judge by another reward form their own cluster of SML
weights. We fit mixtures with k = 1..max_groups components, keep the k with the lowest BIC,
and assign each annotator to its most likely component. Each group can then be aggregated on
its own (:func:`aggregate_groups`) to give one label set — and one reward model — per
viewpoint.
"""

from __future__ import annotations

import contextlib
from dataclasses import dataclass
from typing import TYPE_CHECKING

import numpy as np

from preflab.aggregate.majority import majority
from preflab.aggregate.sml import sml
from preflab.aggregate.votes import VotesLike, as_votes
from preflab.errors import ConfigError, DataError

if TYPE_CHECKING:  # scikit-learn loads in about a second: only a crowd with viewpoints needs it
    from sklearn.mixture import GaussianMixture


@dataclass(frozen=True)
class Viewpoints:
    """Groups of annotators found in the SML weights."""

    n_groups: int
    """Number of groups chosen by BIC."""
    assignment: np.ndarray
    """(annotators,) int group index; group 0 is the largest, then by size (ties: by mean)."""
    means: np.ndarray
    """(n_groups,) mean weight of each group's mixture component."""
    bic: np.ndarray
    """(max k,) BIC of the mixture with k = 1, 2, … components (lower is better)."""

    def members(self, group: int) -> np.ndarray:
        """Indices of the annotators in ``group``."""
        return np.flatnonzero(self.assignment == group)


def find_viewpoints(
    weights: np.ndarray,
    max_groups: int = 4,
    *,
    seed: int = 0,
    n_init: int = 5,
    min_group_size: int = 3,
) -> Viewpoints:
    """Cluster annotators by their SML weights with 1-D Gaussian mixtures, k chosen by BIC.

    ``max_groups`` is capped at the number of distinct weights. A mixture in which some
    component would hold fewer than ``min_group_size`` annotators is not considered (with
    few annotators, one-member components fit a point exactly and fool BIC); its BIC is
    reported as inf. NaN weights (annotators SML could not place) raise a DataError: drop
    them first.
    """
    if max_groups < 1:
        raise ConfigError(f"max_groups must be ≥ 1, got {max_groups}")
    w = np.asarray(weights, dtype=np.float64)
    if w.ndim != 1 or w.size == 0:
        raise DataError(
            f"weights must be a non-empty 1-D array (one per annotator), got shape {w.shape}"
        )
    if not np.all(np.isfinite(w)):
        raise DataError(
            "weights contain NaN or infinite values; drop annotators SML could not weigh"
        )
    from sklearn.mixture import GaussianMixture

    x = w[:, None]
    k_max = int(min(max_groups, np.unique(w).size))
    bics = np.full(max_groups, np.inf)
    best: GaussianMixture | None = None
    for k in range(1, k_max + 1):
        gm = GaussianMixture(
            n_components=k,
            covariance_type="full",
            n_init=n_init,
            random_state=seed,
            reg_covar=1e-6 * max(float(w.var()), 1e-12),
        )
        gm.fit(x)
        if k > 1 and np.bincount(gm.predict(x), minlength=k).min() < min_group_size:
            continue
        bics[k - 1] = gm.bic(x)
        if best is None or bics[k - 1] < bics[best.n_components - 1]:
            best = gm
    assert best is not None
    raw = best.predict(x)
    comps = np.unique(raw)
    means_raw = best.means_.ravel()
    order = sorted(comps, key=lambda c: (-(raw == c).sum(), -means_raw[c]))
    remap = {int(c): g for g, c in enumerate(order)}
    assignment = np.array([remap[int(c)] for c in raw], dtype=np.int64)
    means = np.array([means_raw[c] for c in order])
    return Viewpoints(n_groups=len(order), assignment=assignment, means=means, bic=bics)


def aggregate_groups(votes: VotesLike, viewpoints: Viewpoints) -> list[np.ndarray]:
    """One label vector per group: SML inside groups of ≥ 3 annotators, majority otherwise.

    Queries that no member of a group answered get label 0 in that group.
    """
    m = as_votes(votes)
    if viewpoints.assignment.shape != (m.shape[0],):
        raise DataError(
            f"viewpoints assign {viewpoints.assignment.shape[0]} annotators but votes have "
            f"{m.shape[0]} rows"
        )
    out = []
    for g in range(viewpoints.n_groups):
        rows = viewpoints.members(g)
        sub = m[rows]
        answered = np.diff(sub.indptr) > 0
        labels = None
        if answered.sum() >= 3:
            # a group whose answers do not covary (e.g. all agree) gives SML nothing to weigh
            with contextlib.suppress(DataError):
                labels = sml(sub[np.flatnonzero(answered)]).labels
        out.append(majority(sub) if labels is None else labels)
    return out
