"""Spectral Meta-Learner (Parisi et al. 2014) as Crowd-PrefRL uses it, with missing answers.

Under independent errors and balanced classes, the covariance of annotators i ≠ j is
Q_ij = (1 − b²)(2π_i − 1)(2π_j − 1) (π = balanced accuracy, b = class imbalance): its
off-diagonal part is rank one, Q_ij = r_i r_j. We estimate every Q_ij over the queries that
i and j both answered (centred by each annotator's mean answer), fit r by weighted least
squares on the off-diagonal entries (weights = number of co-answered queries; the diagonal,
which is not rank one, is left out), and return the lead eigenvector of the completed
matrix r rᵀ, i.e. v = r / |r|, oriented so that most entries are positive. The label of a
query is sign(Σ_i f_i v_i) (Crowd-PrefRL eq. 2). With dense answers and ``diagonal='fit'``
this is Parisi's rank-one SML; ``diagonal='empirical'`` is the plain lead eigenvector of the
empirical covariance matrix, which is how Crowd-PrefRL (paper 003, eq. 2) defines v̂.
``diagonal='auto'`` follows the paper: the empirical lead eigenvector when every annotator
answered every query (the paper's crowds), the rank-one fit otherwise (a sparse crowd's
covariance has entries estimated on few or no shared queries, which the paper's definition
does not cover); the paper reproductions use it. The default is ``'fit'``: on the same votes of
300 dense crowds (``preflab bench crowd_fig2``, ``benchmarks/results/crowd_fig2.md``) the
rank-one fit's labels were more accurate than the lead eigenvector's (label error lower by
0.0012 ± 0.0003; better in 149 crowds, worse in 54).

Estimated accuracy: π_i = (1 + r_i / √(1 − b̂²)) / 2, with b̂ the mean SML label, clipped to
[0, 1]. Crowd-PrefRL presents each pair in random order, so b ≈ 0.
"""

from __future__ import annotations

import logging
from dataclasses import dataclass

import numpy as np
import scipy.sparse as sp
from scipy.sparse.linalg import eigsh

from preflab.aggregate.votes import VotesLike, as_votes
from preflab.errors import ConfigError, DataError

log = logging.getLogger(__name__)


@dataclass(frozen=True)
class SMLResult:
    """What :func:`sml` estimates."""

    labels: np.ndarray
    """(queries,) int8: +1 first preferred, −1 second; 0 only for a query without any
    weighted vote (nobody with non-zero weight answered it, or an exact tie)."""
    weights: np.ndarray
    """(annotators,) unit-norm lead eigenvector v, oriented so most entries are positive;
    larger = more accurate (agrees more with the crowd's consensus)."""
    accuracy: np.ndarray
    """(annotators,) estimated probability that each annotator's answer matches the truth
    (NaN for an annotator who shares no query with anyone)."""
    eigenvalue: float
    """|r|²: the lead eigenvalue of the rank-one completed covariance."""
    isolated: np.ndarray
    """(annotators,) bool: annotators sharing fewer than ``min_overlap`` queries with every
    other annotator; their weight is 0 (their votes are not used)."""
    covariance: np.ndarray
    """(annotators, annotators) covariance estimated over co-answered queries (NaN where
    two annotators share fewer than ``min_overlap`` queries)."""


def _moments(m: sp.csr_matrix) -> tuple[np.ndarray, np.ndarray]:
    """Co-answer counts N and sums S of centred products over co-answered queries."""
    answered = m.copy()
    answered.data = np.ones_like(answered.data)
    n_i = np.diff(m.indptr).astype(np.float64)
    mu = np.asarray(m.sum(axis=1)).ravel() / np.maximum(n_i, 1.0)
    centred = m.copy()
    centred.data = centred.data - np.repeat(mu, np.diff(m.indptr))
    s = (centred @ centred.T).toarray()
    n = (answered @ answered.T).toarray()
    return n, s


def _orient(v: np.ndarray) -> np.ndarray:
    pos, neg = int((v > 0).sum()), int((v < 0).sum())
    if neg > pos or (neg == pos and v.sum() < 0):
        return -v
    return v


def _lead_eig(a: np.ndarray) -> tuple[float, np.ndarray]:
    """Largest (algebraic) eigenvalue and its eigenvector of a symmetric matrix."""
    n = a.shape[0]
    if n <= 64:
        vals, vecs = np.linalg.eigh(a)
        k = int(np.argmax(vals))
        return float(vals[k]), vecs[:, k]
    v0 = np.full(n, 1.0 / np.sqrt(n))
    vals, vecs = eigsh(a, k=1, which="LA", v0=v0, tol=1e-12)
    return float(vals[0]), vecs[:, 0]


def _rank_one_fit(c: np.ndarray, w: np.ndarray, *, iters: int, tol: float) -> np.ndarray:
    """r minimising Σ_{i≠j} w_ij (c_ij − r_i r_j)² (w has a zero diagonal); damped ALS.

    Each sweep sets r_i to its weighted least-squares optimum given the others,
    r_i ← Σ_j w_ij c_ij r_j / Σ_j w_ij r_j², averaged with the previous r (damping ½).
    Sparse matrix products keep it fast when few annotator pairs share queries.
    """
    wc_dense = w * c
    w_s = sp.csr_matrix(w)
    wc_s = sp.csr_matrix(wc_dense)
    # initialise from the lead eigenvector of the weighted off-diagonal matrix
    _, u = _lead_eig(np.where(w > 0, c, 0.0))
    uu = np.outer(u, u)
    denom = float((w * uu * uu).sum())
    scale2 = float((wc_dense * uu).sum()) / denom if denom > 0 else 0.0
    r: np.ndarray = u * np.sqrt(max(scale2, 1e-12))
    for _ in range(iters):
        den = w_s @ (r * r)
        num = wc_s @ r
        new = np.divide(num, den, out=np.zeros_like(r), where=den > 1e-300)
        new = 0.5 * r + 0.5 * new
        if np.max(np.abs(new - r)) < tol:
            r = new
            break
        r = new
    return r


def sml(
    votes: VotesLike,
    *,
    diagonal: str = "fit",
    min_overlap: int = 2,
    iters: int = 2000,
    tol: float = 1e-10,
) -> SMLResult:
    """Spectral Meta-Learner labels and annotator weights for (annotators × queries) votes.

    ``votes`` holds +1 / −1 / 0 (0 = missing, skipped or tie), dense or scipy.sparse. Needs
    ≥ 3 annotators, each with at least one answer, and a non-zero covariance between two who
    share ``min_overlap`` queries (else :class:`DataError`). ``diagonal='fit'`` fits the rank-one
    off-diagonal part weighted by co-answer counts (works with sparse crowds); ``'empirical'``
    takes the lead eigenvector of the covariance with its empirical diagonal (entries with
    fewer than ``min_overlap`` co-answered queries set to 0), paper 003's v̂; ``'auto'``
    (paper 003's rule): 'empirical' when every annotator answered every query, else 'fit'.
    The default, 'fit', was the more accurate on dense crowds in the Fig. 2 benchmark.
    """
    if diagonal not in ("auto", "fit", "empirical"):
        raise ConfigError(f"diagonal must be 'auto', 'fit' or 'empirical', got {diagonal!r}")
    if min_overlap < 1:
        raise ConfigError(f"min_overlap must be ≥ 1, got {min_overlap}")
    m = as_votes(votes, require_answers=True)
    n_ann = m.shape[0]
    if n_ann < 3:
        raise DataError(
            f"SML needs at least 3 annotators (its weights come from the covariance between "
            f"annotators), got {n_ann}; use preflab.aggregate.majority for smaller crowds"
        )
    if diagonal == "auto":
        dense = m.nnz == m.shape[0] * m.shape[1]  # as_votes stores only the ±1 answers
        diagonal = "empirical" if dense else "fit"
    n, s = _moments(m)
    known = n >= min_overlap
    off = ~np.eye(n_ann, dtype=bool)
    c = np.divide(s, n, out=np.full_like(s, np.nan), where=known)
    isolated = ~np.any(known & off, axis=1)
    if isolated.all():
        raise DataError(
            f"no two annotators share {min_overlap} or more answered queries; SML needs overlap "
            "between annotators. Ask each query to several annotators or lower min_overlap"
        )
    if not np.any(np.where(known & off, c, 0.0)):
        raise DataError(
            "the annotators' answers do not covary on any query they share (every covariance "
            f"between two annotators sharing {min_overlap} or more queries is 0, e.g. each "
            "answered every shared query the same way), so SML has nothing to weight them by; "
            "use preflab.aggregate.majority, or collect more answers to shared queries"
        )
    if isolated.any():
        log.warning(
            "%d annotator(s) share no query with anyone; their SML weight is 0", int(isolated.sum())
        )
    if diagonal == "fit":
        w = np.where(known & off, n, 0.0)
        r = _rank_one_fit(np.nan_to_num(c), w, iters=iters, tol=tol)
        r[isolated] = 0.0
        lam = float(r @ r)
        v = r / np.sqrt(lam) if lam > 0 else np.full(n_ann, 1.0 / np.sqrt(n_ann))
    else:
        _, v = _lead_eig(np.where(known, c, 0.0))
        v[isolated] = 0.0
        v = v / max(float(np.linalg.norm(v)), 1e-300)
        # rank-one scale from the off-diagonal entries, for the accuracy estimate
        w = np.where(known & off, n, 0.0)
        vv = np.outer(v, v)
        den = float((w * vv * vv).sum())
        lam = max(float((w * np.nan_to_num(c) * vv).sum()) / den, 0.0) if den > 0 else 0.0
        r = v * np.sqrt(lam)
    v = _orient(v)
    if np.sign(v @ r) < 0:
        r = -r
    labels = np.sign(np.asarray(m.T @ v).ravel()).astype(np.int8)
    labelled = labels != 0
    b = float(labels[labelled].mean()) if labelled.any() else 0.0
    b = float(np.clip(b, -0.99, 0.99))
    acc = np.clip(0.5 * (1.0 + r / np.sqrt(1.0 - b * b)), 0.0, 1.0)
    acc[isolated] = np.nan
    return SMLResult(
        labels=labels, weights=v, accuracy=acc, eigenvalue=lam, isolated=isolated, covariance=c
    )
