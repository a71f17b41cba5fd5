"""State scores σ(s) from ranked state pairs (paper 004 §4), for analysis and benchmarks.

σ is a :class:`preflab.reward.RewardEnsemble` without actions, fit with the core's
Bradley–Terry trainer on one-step segments (one state each) with the confidences as soft
labels; with one member it trains on every pair (nothing held out). The policy is trained on
σ only through the loop: ``TrainConfig(reward=RewardConfig(use_actions=False),
policy_reward=PolicyRewardConfig(mode='potential'))`` gives r_t = σ(s_{t+1}) − σ(s_t)
(:mod:`preflab.policy.shaping`); ``preflab_bench.llm_fig7`` runs the paper's Fig. 7 that way.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from preflab.errors import ConfigError, DataError
from preflab.records import Label, Segment
from preflab.reward import (
    FitConfig,
    LabelBatch,
    RewardConfig,
    RewardEnsemble,
    SegmentBatch,
)
from preflab.reward.offline import fit_reward_model


@dataclass(frozen=True, kw_only=True)
class ScoreConfig:
    """Architecture and fit of the state-score model σ."""

    hidden: tuple[int, ...] = (64, 64)
    """Hidden widths of σ's MLP."""
    members: int = 1
    """Ensemble members (their normalised scores are averaged)."""
    epochs: int = 40
    """Passes over the labels."""
    batch_size: int = 128
    """Labels per gradient step."""
    lr: float = 1e-3
    """Adam learning rate."""
    l2: float = 1e-4
    """ℓ2 coefficient on the weights (fixed; not adapted)."""
    random_answer: float = 0.0
    """ε of the core trainer's random-answer term (the paper uses none)."""
    label_smoothing: float = 0.0
    """s: targets become s + (1 − 2s)·p, bounding σ's scale under exact 0/1 labels (the
    optimum of a consistent pair is the logit log((1 − s)/s)); 0 = the paper's raw labels."""

    def __post_init__(self) -> None:
        if self.members < 1 or self.epochs < 1 or self.batch_size < 1:
            raise ConfigError("members, epochs and batch_size must be ≥ 1")
        if self.lr <= 0 or self.l2 < 0:
            raise ConfigError(f"lr must be > 0 and l2 ≥ 0, got {self.lr}, {self.l2}")


class StateScorer:
    """σ(s): a fitted score model; ``scores`` returns the normalised score of each state."""

    def __init__(self, ensemble: RewardEnsemble) -> None:
        if ensemble.act_dim != 0:
            raise ConfigError(
                "a state-score model must not use actions (RewardConfig(use_actions=False))"
            )
        self.ensemble = ensemble

    @property
    def obs_dim(self) -> int:
        return self.ensemble.obs_dim

    def scores(self, obs: np.ndarray, *, normalise: bool = False) -> np.ndarray:
        """σ of each row of ``obs`` (batch, obs_dim), averaged over members.

        Raw by default: the Bradley–Terry scale, where a 50%-confidence pair has equal scores
        (what the potential difference needs; rescaling would amplify the noise of a flat
        model). ``normalise=True`` standardises each member over the states it was fit on
        (zero mean, unit std), which is the direct-reward baseline.
        """
        o = np.asarray(obs, dtype=np.float32)
        if o.ndim == 1:
            o = o[None]
        return self.ensemble.predict(o, normalise=normalise).mean(0).astype(np.float64)


def fit_state_scores(
    obs_a: np.ndarray,
    obs_b: np.ndarray,
    p: np.ndarray,
    rng: np.random.Generator,
    config: ScoreConfig | None = None,
) -> StateScorer:
    """Fit σ so that P(a ≻ b) = sigmoid(σ(a) − σ(b)) matches the soft labels ``p``."""
    cfg = config or ScoreConfig()
    a = np.asarray(obs_a, np.float32)
    b = np.asarray(obs_b, np.float32)
    pr = np.asarray(p, np.float32).reshape(-1)
    if a.ndim != 2 or a.shape != b.shape or pr.shape[0] != a.shape[0]:
        raise DataError(
            f"obs_a and obs_b must be (n, obs_dim) of one shape with n labels; got "
            f"{a.shape}, {b.shape}, {pr.shape}"
        )
    if a.shape[0] == 0:
        raise DataError("no state pairs to fit the score model on")
    n = a.shape[0]
    batch = SegmentBatch.from_arrays(np.concatenate([a, b])[:, None, :])
    labels = LabelBatch.from_arrays(np.arange(n), np.arange(n, 2 * n), pr)
    return _fit(batch, labels, a.shape[1], rng, cfg)


def fit_state_scores_from_labels(
    segments: list[Segment],
    labels: list[Label],
    rng: np.random.Generator,
    config: ScoreConfig | None = None,
) -> StateScorer:
    """Fit σ on labels over one-state segments (e.g. from :class:`preflab.aggregate.ConfidenceAggregator`)."""
    cfg = config or ScoreConfig()
    if any(s.length != 1 for s in segments):
        raise DataError("state scores are fit on one-state segments (length 1)")
    batch = SegmentBatch.from_segments(segments)
    lb = LabelBatch.from_labels(labels, batch.index())
    return _fit(batch, lb, batch.obs_dim, rng, cfg)


def _fit(
    batch: SegmentBatch,
    labels: LabelBatch,
    obs_dim: int,
    rng: np.random.Generator,
    cfg: ScoreConfig,
) -> StateScorer:
    fit = FitConfig(
        epochs=cfg.epochs,
        batch_size=cfg.batch_size,
        lr=cfg.lr,
        random_answer=cfg.random_answer,
        label_smoothing=cfg.label_smoothing,
        bootstrap=cfg.members > 1,
        holdout=0.0,  # one member: train on every pair (no validation needed: ℓ2 is fixed)
        l2_init=cfg.l2,
        adapt_l2=False,
        l2_limits=(0.0, 10.0),
    )
    ens = fit_reward_model(
        batch,
        labels,
        rng,
        obs_dim=obs_dim,
        act_dim=0,
        reward=RewardConfig(members=cfg.members, hidden=cfg.hidden, use_actions=False),
        fit=fit,
    )
    return StateScorer(ens)
