"""State scores σ(s) from ranked state pairs, and the rewards they give (paper 004 §4).

σ is a :class:`preflab.reward.RewardEnsemble` without actions, fit with the core's
Bradley–Terry trainer on one-step segments (one state each) with the confidences as soft
labels. Rewards for the policy:

* potential difference (the paper's method): r_t = σ(s_{t+1}) − σ(s_t), so an uncertain pair
  (σ equal) gives no reward;
* direct (baseline, Christiano et al.): r_t = σ(s_{t+1}) normalised to zero mean, unit std;

each optionally minus a flat step penalty and times a reward discount γ_r^t (t = step index
within the episode).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Literal

import numpy as np
from stable_baselines3.common.vec_env import VecEnv

from preflab.errors import ConfigError, DataError
from preflab.policy.reward_wrapper import LearnedRewardVecEnv
from preflab.records import Label, Segment
from preflab.reward import (
    FitConfig,
    LabelBatch,
    RewardConfig,
    RewardEnsemble,
    RewardTrainer,
    SegmentBatch,
)
from preflab.seeding import derive_seed


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
    ens = RewardEnsemble(
        obs_dim,
        0,
        RewardConfig(members=cfg.members, hidden=cfg.hidden, use_actions=False),
        seed=derive_seed(rng),
    )
    fit = FitConfig(
        epochs=cfg.epochs,
        batch_size=cfg.batch_size,
        lr=cfg.lr,
        random_answer=cfg.random_answer,
        bootstrap=cfg.members > 1,
        l2_init=cfg.l2,
        adapt_l2=False,
        l2_limits=(0.0, 10.0),
    )
    RewardTrainer(ens, fit).fit(batch, labels, rng)
    return StateScorer(ens)


# ----- rewards --------------------------------------------------------------------------------
RewardMode = Literal["potential", "direct"]


@dataclass(frozen=True, kw_only=True)
class RewardShaping:
    """How state scores become per-step rewards."""

    mode: RewardMode = "potential"
    """'potential': σ(s_{t+1}) − σ(s_t) (paper 004); 'direct': normalised σ(s_{t+1})."""
    step_penalty: float = 0.0
    """Constant subtracted every step (≥ 0)."""
    discount: float = 1.0
    """γ_r: the reward of episode step t is multiplied by γ_r^t (1 = no discount)."""
    scale: float = 1.0
    """Multiplier on the score part of the reward."""

    def __post_init__(self) -> None:
        if self.mode not in ("potential", "direct"):
            raise ConfigError(f"mode must be 'potential' or 'direct', got {self.mode!r}")
        if self.step_penalty < 0:
            raise ConfigError(f"step_penalty must be ≥ 0, got {self.step_penalty}")
        if not 0 < self.discount <= 1:
            raise ConfigError(f"discount γ_r must be in (0, 1], got {self.discount}")


def potential_rewards(
    scores: np.ndarray, *, step_penalty: float = 0.0, discount: float = 1.0, start: int = 0
) -> np.ndarray:
    """r_t = σ(s_t) − σ(s_{t−1}) along the last axis: (..., T+1) scores → (..., T) rewards.

    With a penalty and discount: r_t = (σ(s_t) − σ(s_{t−1}) − step_penalty) · γ_r^(t−1+start),
    t = 1..T (``start`` is the episode step of the first transition).
    """
    s = np.asarray(scores, dtype=np.float64)
    if s.ndim == 0 or s.shape[-1] < 2:
        raise DataError(f"need the scores of at least two consecutive states, got shape {s.shape}")
    if not np.all(np.isfinite(s)):
        raise DataError("scores contain NaN or infinite values")
    r = np.diff(s, axis=-1) - step_penalty
    return r * _discounts(r.shape[-1], discount, start)


def direct_rewards(
    scores: np.ndarray,
    *,
    mean: float = 0.0,
    std: float = 1.0,
    step_penalty: float = 0.0,
    discount: float = 1.0,
    start: int = 0,
) -> np.ndarray:
    """r_t = ((σ(s_t) − mean) / std − step_penalty) · γ_r^(t+start) along the last axis."""
    s = np.asarray(scores, dtype=np.float64)
    if std <= 0:
        raise DataError(f"std must be > 0, got {std}")
    r = (s - mean) / std - step_penalty
    return r * _discounts(r.shape[-1], discount, start)


def _discounts(n: int, discount: float, start: int) -> np.ndarray:
    if not 0 < discount <= 1:
        raise ConfigError(f"discount γ_r must be in (0, 1], got {discount}")
    return discount ** (start + np.arange(n, dtype=np.float64))


class ScoreRewardVecEnv(LearnedRewardVecEnv):
    """Trains a policy on state-score rewards; tracks each env's episode step for γ_r^t.

    Potential mode uses raw scores; direct mode uses scores normalised by the model (zero
    mean, unit std over the states it was fit on), i.e. the normalised σ(s_{t+1}).
    """

    def __init__(
        self, venv: VecEnv, scorer: StateScorer, shaping: RewardShaping | None = None
    ) -> None:
        self.scorer = scorer
        self.shaping = shaping or RewardShaping()
        self._t = np.zeros(venv.num_envs, dtype=np.int64)
        super().__init__(venv, self._reward)

    def _reward(self, obs: np.ndarray, acts: np.ndarray, next_obs: np.ndarray) -> np.ndarray:
        sh = self.shaping
        if sh.mode == "potential":
            base = self.scorer.scores(next_obs) - self.scorer.scores(obs)
        else:
            base = self.scorer.scores(next_obs, normalise=True)
        return ((sh.scale * base - sh.step_penalty) * sh.discount**self._t).astype(np.float32)

    def reset(self) -> np.ndarray:
        self._t[:] = 0
        return super().reset()

    def step_wait(self):  # type: ignore[no-untyped-def]
        obs, rew, dones, infos = super().step_wait()
        self._t += 1
        self._t[np.asarray(dones, bool)] = 0
        return obs, rew, dones, infos
