"""Votes matrices: (annotators × queries) arrays of +1 (first preferred), −1 (second), 0 (none).

A 0 means the annotator did not answer the query, skipped it, or called it a tie; every
aggregator treats it as "no vote". Dense numpy arrays and scipy.sparse matrices are both
accepted; sparse matrices store only the ±1 answers (explicit zeros are allowed and ignored).
"""

from __future__ import annotations

import numpy as np
import scipy.sparse as sp

from preflab.errors import DataError

VotesLike = np.ndarray | sp.spmatrix | sp.sparray


def as_votes(votes: object, *, require_answers: bool = False) -> sp.csr_matrix:
    """Validate ``votes`` and return it as a float64 CSR matrix with only ±1 entries stored.

    Raises :class:`DataError` for a wrong shape, NaN/inf, values outside {−1, 0, +1} and,
    with ``require_answers``, an annotator (row) without a single ±1 answer.
    """
    if sp.issparse(votes):
        m = sp.csr_matrix(votes, dtype=np.float64)
        m.sum_duplicates()
        data = m.data
    else:
        try:
            arr = np.asarray(votes, dtype=np.float64)
        except (TypeError, ValueError) as exc:
            raise DataError(
                "votes must be a numeric (annotators × queries) array of −1/0/+1, got "
                f"{type(votes).__name__}"
            ) from exc
        if arr.ndim != 2:
            raise DataError(
                f"votes must be 2-D (annotators × queries), got shape {arr.shape}; "
                "put one annotator per row and one query per column"
            )
        data = arr
        m = None
    if not np.all(np.isfinite(data)):
        raise DataError(
            "votes contain NaN or infinite values; encode a missing answer as 0, not NaN"
        )
    bad = (data != 1) & (data != -1) & (data != 0)
    if np.any(bad):
        vals = np.unique(data[bad])[:5]
        raise DataError(
            f"votes must be +1 (first preferred), −1 (second preferred) or 0 (missing/tie); found "
            f"{vals.tolist()}. Convert probabilities p = P(a ≻ b) with sign(p − 0.5)"
        )
    if m is None:
        m = sp.csr_matrix(data)
    m.eliminate_zeros()
    if m.shape[0] == 0 or m.shape[1] == 0:
        raise DataError(
            f"votes must have at least one annotator and one query, got shape {m.shape}"
        )
    if require_answers:
        answered = np.diff(m.indptr)
        empty = np.flatnonzero(answered == 0)
        if empty.size:
            raise DataError(
                f"annotator row(s) {empty[:10].tolist()} answered no query (all 0); SML cannot "
                "weigh an annotator without answers. Drop those rows before aggregating"
            )
    return m


def votes_from_probabilities(p: np.ndarray) -> np.ndarray:
    """Map answers p = P(a ≻ b) to votes: p > 0.5 → +1, p < 0.5 → −1, 0.5 or NaN (skip) → 0."""
    arr = np.asarray(p, dtype=np.float64)
    out = np.zeros(arr.shape, dtype=np.int8)
    with np.errstate(invalid="ignore"):
        out[arr > 0.5] = 1
        out[arr < 0.5] = -1
    return out
