"""Early termination under a learned reward (Christiano et al. 2017 on Hopper / Walker2d).

The problem: the :class:`~preflab.policy.reward_wrapper.SegmentRecorder` drops the unfinished
segment at every episode end, so no labelled segment ever contains a fall; inside a segment the
healthy bonus is a constant that Bradley–Terry cannot see; after zero-mean normalisation the
policy has no reason to stay alive. Two opt-in remedies (both off by default):

* ``fixed_horizon``: build the env with ``terminate_when_unhealthy=False`` (MuJoCo locomotion),
  so every episode runs to the time limit and a fallen body is simply a segment with a low
  true reward (v5 envs pay the healthy bonus only while healthy). Compare it with RL on the true
  reward of the *same* env.
* ``absorbing`` (DAC-style absorbing states, Kostrikov et al. 2019): every observation gets one
  extra feature, the absorbing indicator (0 while alive). A segment that ends in a termination
  is kept and padded to full length with the absorbing observation (all zeros, indicator 1),
  zero actions and zero true reward, so the reward model sees falls and learns r̂(absorbing).
  The policy is not stepped through the absorbing states (they would eat the step budget):
  instead, on a terminating step (terminated, not truncated by the time limit) it receives the
  discounted tail of the learned absorbing reward it would have collected until the time limit,
  ``r̂_abs · Σ_{k=1}^{H−1−t} γ^k = r̂_abs · γ (1 − γ^{H−1−t}) / (1 − γ)`` (t = the step's index
  in its episode, H = the env's max_episode_steps, γ = the agent's discount). This equals DAC's
  "keep receiving r̂_abs until the time limit" in expected discounted return, since the
  terminal step is not bootstrapped.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import gymnasium as gym
import numpy as np
from gymnasium import spaces
from stable_baselines3.common.vec_env import VecEnv, VecEnvWrapper
from stable_baselines3.common.vec_env.base_vec_env import VecEnvObs, VecEnvStepReturn

from preflab.env_families import episode_limit
from preflab.envs import EnvSpec, make_env
from preflab.errors import ConfigError
from preflab.policy.termination_config import TerminationConfig

__all__ = [
    "AbsorbingIndicator",
    "AbsorbingTail",
    "TerminationConfig",
    "absorbing_obs",
    "horizon_of",
    "tail_factor",
    "terminated_mask",
    "with_termination",
]

RewardFn = Callable[[np.ndarray, np.ndarray, np.ndarray], np.ndarray]


class AbsorbingIndicator(gym.ObservationWrapper):
    """Appends the absorbing indicator (0.0: alive) to a flat Box observation."""

    def __init__(self, env: gym.Env) -> None:
        super().__init__(env)
        space = env.observation_space
        if not isinstance(space, spaces.Box) or len(space.shape) != 1:
            raise ConfigError(
                f"absorbing states need a flat Box observation space, got {space}; turn "
                "--termination.absorbing off for this environment"
            )
        self.observation_space = spaces.Box(
            np.append(space.low, 0.0).astype(space.dtype),
            np.append(space.high, 1.0).astype(space.dtype),
            dtype=space.dtype,
        )

    def observation(self, observation: Any) -> np.ndarray:
        obs = np.asarray(observation)
        return np.append(obs, np.zeros(1, obs.dtype))


def absorbing_obs(dim: int) -> np.ndarray:
    """The absorbing observation of a ``dim``-feature (indicator included) space: zeros, last 1."""
    out = np.zeros(dim, np.float32)
    out[-1] = 1.0
    return out


def with_termination(spec: EnvSpec, config: TerminationConfig) -> EnvSpec:
    """The env spec to build under ``config`` (``spec`` itself when nothing is switched on)."""
    if not config.active:
        return spec

    def build() -> gym.Env:
        if config.fixed_horizon:
            if callable(spec):
                raise ConfigError(
                    "fixed_horizon needs an env id (it passes terminate_when_unhealthy=False to "
                    "gymnasium.make); build the env that way in your factory instead"
                )
            try:
                env = make_env(spec, terminate_when_unhealthy=False)
            except TypeError as exc:
                raise ConfigError(
                    f"{spec} does not take terminate_when_unhealthy (fixed_horizon is for MuJoCo "
                    f"locomotion: Hopper, Walker2d, Ant, Humanoid): {exc}"
                ) from exc
        else:
            env = make_env(spec)
        return AbsorbingIndicator(env) if config.absorbing else env

    name = spec if isinstance(spec, str) else getattr(spec, "__name__", "env")
    build.__name__ = f"{name}[{'fixed_horizon ' if config.fixed_horizon else ''}" + (
        "absorbing]" if config.absorbing else "]"
    )
    return build


def terminated_mask(dones: np.ndarray, infos: list[dict[str, Any]]) -> np.ndarray:
    """Envs whose episode ended by termination (a fall), not by the time limit."""
    done = np.asarray(dones, bool)
    trunc = np.array([bool(i.get("TimeLimit.truncated", False)) for i in infos], bool)
    mask: np.ndarray = done & ~trunc
    return mask


def tail_factor(gamma: float, horizon: int, t: np.ndarray) -> np.ndarray:
    """Σ_{k=1}^{H−1−t} γ^k for a termination at episode step ``t`` (0-based)."""
    left: np.ndarray = np.maximum(horizon - 1 - np.asarray(t, np.int64), 0)
    if gamma >= 1.0:
        return left.astype(np.float64)
    tail: np.ndarray = gamma * (1.0 - gamma**left) / (1.0 - gamma)
    return tail


class AbsorbingTail(VecEnvWrapper):
    """Adds ``r̂_abs · tail_factor`` to the reward of every terminating step (above the
    learned-reward wrapper; an on-policy rollout relabel adds r̂(s, a) on top of it).

    ``gamma`` is set from the agent once it exists; ``reward_fn`` is the policy's reward (it
    returns zeros until the reward model is fitted)."""

    def __init__(self, venv: VecEnv, reward_fn: RewardFn, *, horizon: int) -> None:
        super().__init__(venv)
        self.reward_fn = reward_fn
        self.horizon = horizon
        self.gamma = 0.99
        self.episode_steps = np.zeros(self.num_envs, np.int64)
        obs_shape = venv.observation_space.shape
        assert obs_shape is not None, "absorbing states need a Box observation space"
        self._abs = absorbing_obs(int(np.prod(obs_shape)))
        self._zero_act = np.zeros(
            int(np.prod(venv.action_space.shape)) if venv.action_space.shape else 1, np.float32
        )

    def absorbing_reward(self) -> float:
        """The policy's (normalised) learned reward of the absorbing state."""
        o = self._abs[None]
        return float(np.asarray(self.reward_fn(o, self._zero_act[None], o)).reshape(-1)[0])

    def reset(self) -> VecEnvObs:
        self.episode_steps[:] = 0
        return self.venv.reset()

    def step_wait(self) -> VecEnvStepReturn:
        obs, rew, dones, infos = self.venv.step_wait()
        term = terminated_mask(dones, infos)
        if term.any():
            rew = np.array(rew, np.float32, copy=True)
            tail = self.absorbing_reward() * tail_factor(
                self.gamma, self.horizon, self.episode_steps[term]
            )
            rew[term] += tail.astype(np.float32)
            for i, v in zip(np.flatnonzero(term), tail, strict=True):
                infos[i]["absorbing_tail"] = float(v)
        self.episode_steps += 1
        self.episode_steps[np.asarray(dones, bool)] = 0
        return obs, rew, dones, infos


def horizon_of(venv: VecEnv) -> int:
    """The time limit of the envs in ``venv`` (:func:`preflab.env_families.episode_limit`)."""
    h = episode_limit(venv.get_attr("spec")[0])
    if not h:
        raise ConfigError(
            "absorbing states need a time limit (max_episode_steps) to know how long the "
            "absorbing reward lasts; register the env with one or wrap it in TimeLimit"
        )
    return h
