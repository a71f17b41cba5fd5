"""Rollouts to segments: run a policy (or random actions) in a VecEnv and cut fixed-length slices."""

from __future__ import annotations

from typing import Any

import numpy as np
from stable_baselines3.common.vec_env import VecEnv

from preflab.envs import flatten_actions, model_obs
from preflab.errors import ConfigError
from preflab.pixels.frames import compact
from preflab.records import Segment, check_finite


def collect_segments(
    venv: VecEnv,
    agent: Any | None,
    n_steps: int,
    segment_length: int,
    rng: np.random.Generator,
    *,
    round: int = 0,
    env_id: str = "",
    deterministic: bool = False,
) -> list[Segment]:
    """Run ``n_steps`` steps per env and return non-overlapping segments of ``segment_length``.

    ``agent`` is an SB3 algorithm (its ``predict``) or None for uniformly random actions drawn
    from ``rng``. Segments never cross an episode boundary. True rewards come from the
    environment (or ``info['true_reward']`` when the env's reward was replaced).
    """
    if segment_length < 1 or n_steps < segment_length:
        raise ConfigError(f"need 1 ≤ segment_length ≤ n_steps, got {segment_length} and {n_steps}")
    n_envs = venv.num_envs
    obs_space, act_space = venv.observation_space, venv.action_space
    obs = venv.reset()
    buf_obs: list[list[np.ndarray]] = [[] for _ in range(n_envs)]
    buf_act: list[list[np.ndarray]] = [[] for _ in range(n_envs)]
    buf_rew: list[list[float]] = [[] for _ in range(n_envs)]
    episode = np.arange(n_envs) * 1_000_000
    ep_step = np.zeros(n_envs, dtype=np.int64)
    start = np.zeros(n_envs, dtype=np.int64)
    segments: list[Segment] = []
    for _ in range(n_steps):
        if agent is None:
            acts = np.stack([sample_action(act_space, rng) for _ in range(n_envs)])
        else:
            acts, _ = agent.predict(obs, deterministic=deterministic)
        next_obs, rew, dones, infos = venv.step(acts)
        flat_o = model_obs(obs, obs_space)  # flat float rows, or uint8 images (n, C, H, W)
        flat_a = flatten_actions(acts, act_space)
        if flat_o.dtype != np.uint8:
            check_finite("environment observations", flat_o)
        for e in range(n_envs):
            true_r = float(infos[e].get("true_reward", rew[e]))
            if not buf_obs[e]:
                start[e] = ep_step[e]
            buf_obs[e].append(flat_o[e])
            buf_act[e].append(flat_a[e])
            buf_rew[e].append(true_r)
            ep_step[e] += 1
            if len(buf_obs[e]) == segment_length:
                o, a = np.stack(buf_obs[e]), np.stack(buf_act[e])
                if o.ndim == 4:  # pixels: keep a frame stack once per frame
                    o = compact(o)
                segments.append(
                    Segment(
                        id=Segment.content_id(o, a),
                        obs=o,
                        acts=a,
                        true_rewards=np.asarray(buf_rew[e], np.float32),
                        env_id=env_id,
                        episode=int(episode[e]),
                        start=int(start[e]),
                        round=round,
                    )
                )
                buf_obs[e], buf_act[e], buf_rew[e] = [], [], []
            if dones[e]:
                buf_obs[e], buf_act[e], buf_rew[e] = [], [], []
                episode[e] += 1
                ep_step[e] = 0
        obs = next_obs
    return segments


def sample_action(space: Any, rng: np.random.Generator) -> np.ndarray:
    """One uniformly random action of ``space`` drawn from ``rng``: the one random-action
    helper of PrefLab.

    Box: uniform in [low, high], an unbounded side taken as ±1. Discrete: uniform over
    ``start .. start + n - 1``. MultiDiscrete: uniform over ``0 .. nvec - 1`` per entry. For a
    bounded Box and a Discrete space the draws are those of gymnasium's ``space.sample()`` after
    ``space.seed(s)`` when ``rng`` is ``np.random.default_rng(s)``.
    """
    from gymnasium import spaces

    if isinstance(space, spaces.Box):
        low = np.where(np.isfinite(space.low), space.low, -1.0)
        high = np.where(np.isfinite(space.high), space.high, 1.0)
        return rng.uniform(low, high).astype(space.dtype)
    if isinstance(space, spaces.Discrete):
        return np.asarray(space.start + rng.integers(0, space.n))
    if isinstance(space, spaces.MultiDiscrete):
        return rng.integers(0, space.nvec)
    raise ConfigError(f"cannot sample random actions from {space}")


_sample = sample_action
"""Deprecated private name of :func:`sample_action` (still imported by ``loop.py``)."""
