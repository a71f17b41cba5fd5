"""Reward models from real-time scalar feedback: per-evaluator (Individual), voting, pooled,
binary majority, and the GUIDE regression baseline. Items are short stretches of behaviour
(a SegmentBatch); every model is a :class:`preflab.reward.RewardEnsemble`, so the same
reward function drives the policy whichever way it was learned.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Literal, cast

import numpy as np
import torch

from preflab.errors import ConfigError, DataError
from preflab.kinds.rating_windows import (
    FEEDBACK_RANGE,
    PairLabels,
    binary_majority,
    capped_draw,
    vote_labels,
)
from preflab.reward import (
    FitConfig,
    LabelBatch,
    RewardConfig,
    RewardEnsemble,
    SegmentBatch,
)
from preflab.reward.offline import fit_reward_model
from preflab.seeding import derive_seed


@dataclass(frozen=True, kw_only=True)
class ScalarModelConfig:
    """How reward models are fit from scalar feedback."""

    reward: RewardConfig = field(default_factory=lambda: RewardConfig(members=1, hidden=(64, 64)))
    """Architecture of every model."""
    fit: FitConfig = field(
        default_factory=lambda: FitConfig(epochs=3, batch_size=256, random_answer=0.0)
    )
    """Bradley–Terry fitting of the preference models."""
    max_pairs: int = 40_000
    """Labelled pairs drawn (uniformly, without replacement) from a dataset to train on; the
    labels themselves are Algorithm 1/2's, only the number trained on is capped."""
    regression_epochs: int = 20
    """Epochs of the GUIDE regression baseline (MSE on raw ratings)."""
    regression_lr: float = 1e-3
    """Adam learning rate of the regression baseline."""


def _subsample(labels: PairLabels, k: int, rng: np.random.Generator) -> PairLabels:
    idx = capped_draw(len(labels), k, rng)
    if idx is None:
        return labels
    return PairLabels(pairs=labels.pairs[idx], p=labels.p[idx])


def fit_preferences(
    items: SegmentBatch,
    labels: PairLabels,
    rng: np.random.Generator,
    config: ScalarModelConfig | None = None,
) -> RewardEnsemble:
    """Bradley–Terry reward model on labelled item pairs (Individual, voting, pooled, majority)."""
    cfg = config or ScalarModelConfig()
    if len(labels) == 0:
        raise DataError("no labelled pairs to fit on; the stream is shorter than one window")
    sub = _subsample(labels, cfg.max_pairs, rng)
    return fit_reward_model(
        items,
        LabelBatch.from_arrays(sub.pairs[:, 0], sub.pairs[:, 1], sub.p),
        rng,
        obs_dim=items.obs_dim,
        act_dim=items.act_dim,
        reward=cfg.reward,
        fit=cfg.fit,
    )


VoteScale = Literal["feedback", "std"]
"""How a model's item scores are put on a common scale before the vote compares them with δ:
'feedback' maps them linearly onto the feedback range [−1, 1] (lowest item −1, highest +1), so
δ is in the raters' units as Pref-GUIDE sets it (5 % of the range = 0.1); 'std' standardises
them (δ in standard deviations)."""


def item_scores(model: RewardEnsemble, items: SegmentBatch, scale: VoteScale = "std") -> np.ndarray:
    """A model's predicted return of every item on the ``scale`` (:data:`VoteScale`): (N,)."""
    r = model.segment_returns(items, normalise=True).mean(0)
    if scale == "feedback":
        lo, hi = FEEDBACK_RANGE
        span = float(r.max() - r.min())
        if span <= 0:
            return np.full_like(r, (lo + hi) / 2)
        return cast(np.ndarray, lo + (hi - lo) * (r - r.min()) / span)
    if scale != "std":
        raise ConfigError(f"scale must be 'feedback' or 'std', got {scale!r}")
    sd = float(r.std())
    return cast(np.ndarray, (r - r.mean()) / (sd if sd > 0 else 1.0))


def voting_labels(
    models: Sequence[RewardEnsemble],
    items: SegmentBatch,
    pairs: np.ndarray,
    delta: float,
    *,
    binary: bool = False,
    scale: VoteScale = "feedback",
) -> PairLabels:
    """Algorithm 2 labels of ``pairs`` from every evaluator's model (each model's scores on
    ``scale``, :data:`VoteScale`; δ in those units); ``binary`` gives the binary-majority
    baseline instead."""
    if not models:
        raise DataError("voting needs at least one evaluator model")
    preds = np.stack([item_scores(m, items, scale) for m in models])
    p = vote_labels(preds, pairs, delta)
    return PairLabels(pairs=np.asarray(pairs), p=binary_majority(p) if binary else p)


def pooled_labels(datasets: Sequence[PairLabels]) -> PairLabels:
    """All evaluators' Algorithm 1 labels in one dataset (the pooled baseline)."""
    if not datasets:
        raise DataError("no datasets to pool")
    return PairLabels(
        pairs=np.concatenate([d.pairs for d in datasets]), p=np.concatenate([d.p for d in datasets])
    )


def fit_regression(
    items: SegmentBatch,
    ratings: np.ndarray,
    rng: np.random.Generator,
    config: ScalarModelConfig | None = None,
) -> RewardEnsemble:
    """GUIDE's baseline: regress each item's rating on the mean per-step reward of the item."""
    cfg = config or ScalarModelConfig()
    y = np.asarray(ratings, np.float32)
    if y.shape != (len(items),):
        raise DataError(f"need one rating per item ({len(items)}), got shape {y.shape}")
    if not np.all(np.isfinite(y)):
        raise DataError("ratings contain NaN or infinite values")
    ens = RewardEnsemble(items.obs_dim, items.act_dim, cfg.reward, seed=derive_seed(rng))
    ens.fit_input_stats(items)
    gen = torch.Generator().manual_seed(derive_seed(rng))
    target = torch.from_numpy(y)
    steps = items.mask.sum(-1).clamp_min(1.0)
    opt = torch.optim.Adam(ens.parameters(), lr=cfg.regression_lr)
    bs = cfg.fit.batch_size
    ens.train()
    for _ in range(cfg.regression_epochs):
        order = torch.randperm(len(items), generator=gen)
        for start in range(0, len(order), bs):
            idx = order[start : start + bs]
            pred = ens.segment_returns_t(items, idx) / steps[idx]  # (members, b)
            loss = ((pred - target[idx]) ** 2).mean()
            opt.zero_grad(set_to_none=True)
            loss.backward()
            opt.step()
    ens.eval()
    ens.fit_output_stats(items)
    return ens
