"""The reward the policy sees: the learned reward direct, as a potential difference, or live ratings.

* **direct** (Christiano et al.): r_t = r̂(s_t, a_t) as the loop computes it (members
  normalised, averaged), times γ_r^t, minus ``step_penalty``.
* **potential** (paper 004): r_t = σ(s_{t+1}) − σ(s_t) from the reward model's state-only
  output σ (raw Bradley–Terry scale, mean over members, so a pair judged 50/50 gives no
  reward), times γ_r^t, minus ``step_penalty``. t is the step index within the episode
  (0 at the first step). Needs ``RewardConfig(use_actions=False)``.
* **disagreement bonus** (RUNE, Liang et al. 2022; direct mode): r_t + β_k · std_m r̂_m(s_t, a_t),
  the ensemble's disagreement as an exploration bonus with β_k = β₀ (1 − ρ)^k at the run's
  env step k. A replay buffer relabelled at a fit holds the β of that moment (RUNE adds the
  bonus when it samples a batch); between fits new steps get the current β.
* **live** (Pref-GUIDE's human-in-the-loop phase): for the first ``live_steps`` env steps the
  reward is the source's live rating of each step (:class:`LiveRating`); afterwards the same
  run continues on the learned reward (the post-human phase).

Everything runs through :class:`preflab.policy.reward_wrapper.LearnedRewardVecEnv`, which keeps
one episode-step counter per env and calls :meth:`PolicyReward.step` with it. On-policy agents
normally get zero rewards from the env and the whole rollout relabelled at once
(:mod:`preflab.policy.rollout_relabel`, "deferred"); that callback sees no next observations and
no episode steps, so potential mode and γ_r < 1 use per-step rewards instead
(``PolicyReward.deferrable`` is False). A replay buffer does not keep episode steps either, so
γ_r < 1 with an off-policy agent needs ``relabel=False``.
"""

from __future__ import annotations

import logging
from collections.abc import Callable
from dataclasses import dataclass
from typing import TYPE_CHECKING, Literal, Protocol, runtime_checkable

import numpy as np

from preflab.errors import ConfigError, DataError
from preflab.policy.algos import is_on_policy

if TYPE_CHECKING:
    from preflab.reward.ensemble import RewardEnsemble

log = logging.getLogger(__name__)

RewardFn = Callable[[np.ndarray, np.ndarray, np.ndarray], np.ndarray]


@dataclass(frozen=True, kw_only=True)
class PolicyRewardConfig:
    """How the learned reward (or a live rating) becomes the policy's per-step reward."""

    mode: Literal["direct", "potential"] = "direct"
    """'direct': the learned reward r̂(s, a); 'potential': σ(s_{t+1}) − σ(s_t) of a state-only
    reward model (Lin et al., noisy LLM feedback; needs --reward.no-use-actions)."""
    discount: float = 1.0
    """γ_r: the reward of episode step t is multiplied by γ_r^t (1 = no discount)."""
    step_penalty: float = 0.0
    """Constant subtracted from every step's reward (≥ 0)."""
    live_steps: int = 0
    """Env steps at the start of the run during which the policy's reward is the source's live
    rating (Pref-GUIDE's human-in-the-loop phase; the source must rate live). 0 = none."""
    disagreement_bonus: float = 0.0
    """RUNE's β₀: add β₀ (1 − ρ)^k × the reward members' standard deviation at env step k
    (direct mode only; RUNE uses 0.05). 0 = off."""
    bonus_decay: float = 0.0
    """RUNE's ρ: per-env-step decay of the disagreement bonus's weight (RUNE uses 1e-3 to
    1e-5); 0 keeps β₀."""

    def __post_init__(self) -> None:
        if self.mode not in ("direct", "potential"):
            raise ConfigError(
                f"policy_reward.mode must be 'direct' or 'potential', got {self.mode!r}"
            )
        if not 0.0 < self.discount <= 1.0:
            raise ConfigError(
                f"policy_reward.discount γ_r must be in (0, 1], got {self.discount}; "
                "use 1 for no discount"
            )
        if not (np.isfinite(self.step_penalty) and self.step_penalty >= 0):
            raise ConfigError(
                f"policy_reward.step_penalty must be finite and ≥ 0, got {self.step_penalty}"
            )
        if self.live_steps < 0:
            raise ConfigError(f"policy_reward.live_steps must be ≥ 0, got {self.live_steps}")
        if not (np.isfinite(self.disagreement_bonus) and self.disagreement_bonus >= 0):
            raise ConfigError(
                "policy_reward.disagreement_bonus β₀ must be finite and ≥ 0 (0 = off), got "
                f"{self.disagreement_bonus}"
            )
        if not 0.0 <= self.bonus_decay < 1.0:
            raise ConfigError(
                f"policy_reward.bonus_decay ρ must be in [0, 1), got {self.bonus_decay}"
            )
        if self.disagreement_bonus > 0 and self.mode != "direct":
            raise ConfigError(
                "policy_reward.disagreement_bonus (RUNE) works with mode='direct' only; "
                "drop --policy-reward.disagreement-bonus or use --policy-reward.mode direct"
            )


@runtime_checkable
class LiveRating(Protocol):
    """A source that rates every step the agent takes, as it happens (simulated evaluators)."""

    def rate(self, true_rewards: np.ndarray, episodes: np.ndarray, steps: np.ndarray) -> np.ndarray:
        """Rate the step each env just took: ``true_rewards`` (n_envs,) hidden env rewards (for
        simulated raters), ``episodes`` / ``steps`` (n_envs,) the recorder's episode id and
        episode step of that transition (so ratings can be matched to recorded segments).
        Returns (n_envs,) the reward for the policy (e.g. the mean rating)."""
        ...


@dataclass(frozen=True)
class RewardRouting:
    """How the policy's reward reaches the agent (decided by :func:`route_policy_reward`)."""

    on_policy: bool
    """The learner trains on its own fresh rollouts (PPO, A2C, TRPO)."""
    absorbing: bool
    """The learned absorbing reward's tail is paid on falls (``termination.absorbing``)."""


def route_policy_reward(
    config: PolicyRewardConfig,
    *,
    algo: str,
    use_actions: bool,
    relabel: bool,
    absorbing: bool,
) -> RewardRouting:
    """The one place that decides on- or off-policy delivery and the absorbing tail, and
    refuses (ConfigError) what cannot work with the reward model or the agent. Whether an
    on-policy rollout is relabelled at once is :attr:`PolicyReward.deferrable` on top of it."""
    if config.mode == "potential" and use_actions:
        raise ConfigError(
            "policy_reward.mode='potential' needs a state-only reward model σ(s), but "
            "the reward model uses actions; add --reward.no-use-actions (from Python: "
            "reward=RewardConfig(use_actions=False))"
        )
    on_policy = is_on_policy(algo)
    if not on_policy and relabel and config.discount < 1.0:
        raise ConfigError(
            f"policy_reward.discount={config.discount} with the off-policy agent {algo!r} and "
            "relabel=True: the replay buffer does not keep episode steps, so relabelled rewards "
            "cannot be discounted; add --no-relabel or --policy-reward.discount 1"
        )
    if not on_policy and relabel and config.live_steps > 0:
        raise ConfigError(
            f"policy_reward.live_steps={config.live_steps} with the off-policy agent {algo!r} "
            "and relabel=True would overwrite the live ratings in the replay buffer at every "
            "reward fit; add --no-relabel (the buffer is relabelled once when the live phase "
            "ends)"
        )
    if absorbing and not on_policy and relabel:
        raise ConfigError(
            "--termination.absorbing pays the absorbing tail at collection time, which "
            "replay-buffer relabelling would erase; use an on-policy algo (ppo, a2c, trpo) "
            "or --no-relabel"
        )
    return RewardRouting(on_policy=on_policy, absorbing=absorbing)


class PolicyReward:
    """The policy's reward function (a :data:`RewardFn`), built from :class:`PolicyRewardConfig`:
    the one owner of the reward model the policy sees and of whether it has been fit.

    ``model`` is the learned reward (members normalised and averaged in direct mode; σ in
    potential mode); until ``fitted`` is set the reward is zero. ``live`` is the live rating
    source while the live phase lasts (None afterwards).
    """

    def __init__(
        self,
        config: PolicyRewardConfig,
        *,
        model: RewardEnsemble,
        live: LiveRating | None = None,
        clock: Callable[[], int] | None = None,
    ) -> None:
        if config.live_steps > 0 and live is None:
            raise ConfigError(
                f"policy_reward.live_steps={config.live_steps} needs a source that rates live "
                "(preflab.policy.shaping.LiveRating, e.g. preflab.sources.raters.SimulatedRaters); "
                "people in the studio rate through the store, so use live_steps=0 with them"
            )
        self.config = config
        self.model = model
        self.fitted = False
        """Whether ``model`` has been fit (the loop sets it after the first fit)."""
        self.live: LiveRating | None = live if config.live_steps > 0 else None
        self.clock = clock
        """The run's env steps so far (the disagreement bonus decays with them; None = 0)."""

    def bonus_weight(self) -> float:
        """RUNE's β_k = β₀ (1 − ρ)^k at the run's env step k (0 when the bonus is off)."""
        c = self.config
        if c.disagreement_bonus == 0:
            return 0.0
        k = self.clock() if self.clock is not None else 0
        return float(c.disagreement_bonus * (1.0 - c.bonus_decay) ** k)

    @property
    def deferrable(self) -> bool:
        """Whether an on-policy rollout may be relabelled at once after collection (it can when
        the reward needs neither the next observation nor the episode step)."""
        return self.config.mode == "direct" and self.config.discount == 1.0

    def end_live(self) -> None:
        """The live phase is over: the policy's reward is the learned one from now on."""
        self.live = None

    def end_live_if_due(self, env_steps: int) -> bool:
        """End the live phase once ``env_steps`` ≥ ``live_steps``; True when it ends now."""
        if self.live is None or env_steps < self.config.live_steps:
            return False
        self.end_live()
        log.info("live phase over after %d env steps", env_steps)
        return True

    def base(self, obs: np.ndarray, acts: np.ndarray, next_obs: np.ndarray) -> np.ndarray:
        """The undiscounted, unpenalised reward of a batch of transitions: (n,)."""
        n = obs.shape[0]
        if self.live is not None:  # during the live phase the learned reward is not used
            return np.zeros(n, np.float32)
        if self.config.mode == "direct":
            if not self.fitted:
                return np.zeros(n, np.float64)
            beta = self.bonus_weight()
            if beta == 0:
                return np.asarray(self.model.reward(obs, acts), np.float64).reshape(-1)
            r, spread = self.model.reward_and_disagreement(obs, acts)
            return np.asarray(r + beta * spread, np.float64).reshape(-1)
        if not self.fitted:
            return np.zeros(n, np.float64)
        both: np.ndarray = self.model.predict(
            np.concatenate([obs, next_obs]), normalise=False
        ).mean(0)
        diff: np.ndarray = both[n:] - both[:n]
        return diff.astype(np.float64)

    def step(
        self, obs: np.ndarray, acts: np.ndarray, next_obs: np.ndarray, t: np.ndarray
    ) -> np.ndarray:
        """r = base · γ_r^t − step_penalty for transitions at episode steps ``t`` (n,)."""
        r = self.base(obs, acts, next_obs)
        tt = np.asarray(t, np.float64).reshape(-1)
        if tt.shape != r.shape:
            raise DataError(f"need one episode step per transition ({r.shape[0]}), got {tt.shape}")
        if self.live is not None:
            return np.zeros(r.shape, np.float32)
        c = self.config
        if c.discount == 1.0 and c.step_penalty == 0.0:  # the common case: r · 1 − 0 is r
            return r.astype(np.float32)
        return (r * c.discount**tt - c.step_penalty).astype(np.float32)

    def __call__(self, obs: np.ndarray, acts: np.ndarray, next_obs: np.ndarray) -> np.ndarray:
        """Reward of transitions whose episode step is unknown (relabelling): γ_r must be 1 or
        the rewards are those of t = 0 (see :func:`check_policy_reward`)."""
        return self.step(obs, acts, next_obs, np.zeros(obs.shape[0]))
