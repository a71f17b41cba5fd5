"""What selectors, sources and evaluators may ask of a reward model.

A reward model has one prediction method, :meth:`RewardModel.predict`, which returns the
per-step reward of every member, shape (members, batch), and :meth:`RewardModel.segment_returns`,
the raw return Σ_t r̂_m of every segment under every member, shape (members, n_segments).
Everything else (ensemble variance, Bradley–Terry probabilities) is computed from those
returns by the functions below, so any model with these two methods can drive query selection.
:class:`preflab.reward.RewardEnsemble` is the implementation; its other methods (training,
normalisation statistics, persistence) belong to the trainer and the loop.
"""

from __future__ import annotations

from typing import Protocol, cast, runtime_checkable

import numpy as np

from preflab.errors import DataError
from preflab.reward.batch import SegmentBatch


@runtime_checkable
class RewardModel(Protocol):
    """A learned reward: M members (M = 1 for a single network)."""

    def predict(self, obs: np.ndarray, acts: np.ndarray | None = None) -> np.ndarray:
        """Per-step rewards of every member for a batch of steps: (members, batch).

        ``obs`` is (batch, obs_dim), ``acts`` (batch, act_dim) or None for a model of r(s).
        Each member is standardised by the statistics of its last fit.
        """
        ...

    def segment_returns(self, batch: SegmentBatch) -> np.ndarray:
        """Raw (Bradley–Terry scale) returns of every segment under every member:
        (members, n_segments), padding excluded."""
        ...


def _returns(returns: np.ndarray) -> np.ndarray:
    r = np.asarray(returns, dtype=np.float64)
    if r.ndim != 2:
        raise DataError(
            f"segment returns must have shape (members, segments), got {r.shape}; "
            "pass RewardModel.segment_returns(batch)"
        )
    return r


def _sigmoid(x: np.ndarray) -> np.ndarray:
    return cast(np.ndarray, np.exp(-np.logaddexp(0.0, -x)))


def preference_probs(returns: np.ndarray, a: np.ndarray, b: np.ndarray) -> np.ndarray:
    """Bradley–Terry P(a ≻ b) = σ(R_m(a) − R_m(b)) per member for segment rows ``a``, ``b``:
    (members, pairs), from ``returns`` = ``model.segment_returns(batch)``."""
    r = _returns(returns)
    return _sigmoid(r[:, np.asarray(a)] - r[:, np.asarray(b)])


def pair_variance(returns: np.ndarray) -> np.ndarray:
    """V[i, j] = variance across members of P(i ≻ j), for every pair of rows: (N, N).

    From ``returns`` = ``model.segment_returns(batch)``; zero everywhere for one member.
    """
    r = _returns(returns)
    probs = _sigmoid(r[:, :, None] - r[:, None, :])  # (M, N, N)
    return cast(np.ndarray, probs.var(axis=0))


def n_members(returns: np.ndarray) -> int:
    """Number of members behind ``returns`` (its first axis)."""
    return int(_returns(returns).shape[0])
