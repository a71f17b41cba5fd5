"""Rollouts to segments: run a policy (or random actions) in a VecEnv and cut fixed-length slices."""

from __future__ import annotations

from typing import Any

import numpy as np
from stable_baselines3.common.vec_env import VecEnv

from preflab.envs import action_dim, flatten_actions, model_obs, obs_shape
from preflab.errors import ConfigError
from preflab.pixels.frames import compact
from preflab.records import Segment, check_finite


class SegmentCutter:
    """Cuts a stream of steps from ``n_envs`` envs into fixed-length segments: the one place
    segments are cut (used by :func:`collect_segments` and
    :class:`preflab.policy.reward_wrapper.SegmentRecorder`).

    Per-env buffers are preallocated arrays written with one vectorised assignment per step.
    A segment never crosses an episode boundary: :meth:`end_episodes` drops the part of a
    segment an episode end cut short (or :meth:`pad` keeps it, padded). Episode ids count from
    ``env * 1_000_000``; ``start`` is the segment's first step within its episode. Pixel
    observations (uint8 (C, H, W) frame stacks) keep each frame once (``compact``).
    """

    def __init__(
        self,
        n_envs: int,
        segment_length: int,
        obs_shape: tuple[int, ...],
        act_dim: int,
        *,
        env_id: str = "",
    ) -> None:
        if segment_length < 1:
            raise ConfigError(f"segment_length must be ≥ 1, got {segment_length}")
        self.segment_length = segment_length
        """Steps per segment."""
        self.obs_shape = tuple(obs_shape)
        """Per-step observation shape: (D,) flat, (C, H, W) uint8 images."""
        self.env_id = env_id
        """``Segment.env_id`` of the segments cut."""
        self._obs = np.zeros(
            (n_envs, segment_length, *obs_shape), np.uint8 if len(obs_shape) == 3 else np.float32
        )
        self._acts = np.zeros((n_envs, segment_length, act_dim), np.float32)
        self._rew = np.zeros((n_envs, segment_length), np.float32)
        self._states: np.ndarray | None = None
        self._with_states = False
        self.pos = np.zeros(n_envs, np.int64)
        """Steps of the current segment recorded so far, per env."""
        self.ep_step = np.zeros(n_envs, np.int64)
        """Steps of the current episode so far, per env."""
        self.episode = np.arange(n_envs, dtype=np.int64) * 1_000_000
        """Id of the current episode, per env."""
        self._rows = np.arange(n_envs)

    def restart(self) -> None:
        """Drop the segments in progress (the envs were reset)."""
        self.pos[:] = 0

    def add(
        self,
        obs: np.ndarray,
        acts: np.ndarray,
        rewards: np.ndarray,
        *,
        round: int,
        states: np.ndarray | None = None,
    ) -> list[Segment]:
        """Record one step of every env (observations before the step, flat actions, true
        rewards and optionally (n_envs, S) simulator states before the step); return the
        segments this step completed, in env order. Segments get ``states`` only when the step
        that completes them has states."""
        pos, rows = self.pos, self._rows
        self._obs[rows, pos] = obs
        self._acts[rows, pos] = acts
        self._rew[rows, pos] = rewards
        self._with_states = states is not None
        if states is not None:
            if self._states is None or self._states.shape[2] != states.shape[1]:
                self._states = np.zeros(
                    (len(rows), self.segment_length, states.shape[1]), np.float64
                )
            self._states[rows, pos] = states
        pos += 1
        self.ep_step += 1
        out: list[Segment] = []
        for e in np.flatnonzero(pos == self.segment_length):
            o, a = self._obs[e], self._acts[e].copy()
            if o.ndim == 4:  # pixels: a frame stack is kept once per frame, not once per slot
                o = compact(o)  # new frames when it is a sliding stack (no copy of the slots)
            if np.may_share_memory(o, self._obs):
                o = o.copy()
            out.append(
                self._segment(
                    e, o, a, self._rew[e].copy(), self._states_of(e), self.segment_length, round
                )
            )
            pos[e] = 0
        return out

    def pad(self, rows: np.ndarray, fill_obs: np.ndarray, *, round: int) -> list[Segment]:
        """Segments in progress of the envs ``rows`` (those with at least one step), padded to
        full length with ``fill_obs``, zero actions, zero reward and the last state repeated;
        their buffers start anew."""
        out: list[Segment] = []
        for e in rows:
            n = int(self.pos[e])
            if n == 0:
                continue
            o, a, r = self._obs[e].copy(), self._acts[e].copy(), self._rew[e].copy()
            o[n:] = fill_obs
            a[n:] = 0.0
            r[n:] = 0.0
            st = self._states_of(e)
            if st is not None:
                st[n:] = st[n - 1]  # the body stays where it fell
            out.append(self._segment(e, o, a, r, st, n, round))
            self.pos[e] = 0
        return out

    def end_episodes(self, done: np.ndarray) -> None:
        """Envs ``done`` (bool per env) start a new episode; their unfinished segments go."""
        self.pos[done] = 0
        self.episode[done] += 1
        self.ep_step[done] = 0

    def _states_of(self, e: int) -> np.ndarray | None:
        if not self._with_states or self._states is None:
            return None
        return self._states[e].copy()

    def _segment(
        self,
        e: int,
        o: np.ndarray,
        a: np.ndarray,
        r: np.ndarray,
        states: np.ndarray | None,
        steps: int,
        round: int,
    ) -> Segment:
        return Segment(
            id=Segment.content_id(o, a),
            obs=o,
            acts=a,
            true_rewards=r,
            env_id=self.env_id,
            episode=int(self.episode[e]),
            start=int(self.ep_step[e] - steps),
            round=round,
            states=states,
        )


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
    cutter = SegmentCutter(
        n_envs, segment_length, obs_shape(obs_space), action_dim(act_space), env_id=env_id
    )
    obs = venv.reset()
    segments: list[Segment] = []
    for _ in range(n_steps):
        if agent is None:
            acts = np.stack([sample_action(act_space, rng) for _ in range(n_envs)])
        else:
            acts, _ = agent.predict(obs, deterministic=deterministic)
        next_obs, rew, dones, infos = venv.step(acts)
        flat_o = model_obs(obs, obs_space)  # flat float rows, or uint8 images (n, C, H, W)
        if flat_o.dtype != np.uint8:
            check_finite("environment observations", flat_o)
        true_r = np.array([float(infos[e].get("true_reward", rew[e])) for e in range(n_envs)])
        segments += cutter.add(flat_o, flatten_actions(acts, act_space), true_r, round=round)
        cutter.end_episodes(np.asarray(dones, bool))
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
