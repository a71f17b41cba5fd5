"""The one offline Bradley–Terry fit: a fresh reward model trained once on fixed labels.

The loop fits its ensemble round after round (warm starts, :class:`RewardTrainer` kept across
rounds); analyses and baselines that learn a reward model from a finished label set (scalar
feedback's Individual/voting/pooled/majority models, the language-model state scores) call
:func:`fit_reward_model` instead of building and training an ensemble themselves.
"""

from __future__ import annotations

import numpy as np

from preflab.reward.batch import LabelBatch, SegmentBatch
from preflab.reward.ensemble import RewardConfig, RewardEnsemble
from preflab.reward.trainer import FitConfig, RewardTrainer
from preflab.seeding import derive_seed


def fit_reward_model(
    segments: SegmentBatch,
    labels: LabelBatch,
    rng: np.random.Generator,
    *,
    obs_dim: int,
    act_dim: int,
    reward: RewardConfig,
    fit: FitConfig,
) -> RewardEnsemble:
    """A new :class:`RewardEnsemble` (``obs_dim``, ``act_dim``, ``reward``; its seed drawn from
    ``rng``) fit by Bradley–Terry on ``labels`` over ``segments`` with ``fit`` (and ``rng``)."""
    ens = RewardEnsemble(obs_dim, act_dim, reward, seed=derive_seed(rng))
    RewardTrainer(ens, fit).fit(segments, labels, rng)
    return ens
