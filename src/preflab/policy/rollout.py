"""Rollouts to segments: run a policy (or random actions) in a VecEnv and cut fixed-length slices."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import numpy as np
from stable_baselines3.common.vec_env import VecEnv

from preflab.envs import action_dim, flatten_actions, model_obs, obs_shape
from preflab.errors import ConfigError
from preflab.pixels.frames import compact
from preflab.records import Segment, check_finite


@dataclass(frozen=True, kw_only=True)
class SegmentBuffers:
    """Per-env buffers of the segments in progress, written in place by :func:`cut_segments`.

    The arrays belong to the caller (a :class:`preflab.policy.reward_wrapper.SegmentRecorder`
    keeps them as its own attributes, so a checkpoint of the recorder holds them); this is a
    view of them for one call.
    """

    obs: np.ndarray
    """(n_envs, L, *obs_shape) observations: float32 (D,) rows or uint8 (C, H, W) images."""
    acts: np.ndarray
    """(n_envs, L, act_dim) float32 flat actions."""
    rewards: np.ndarray
    """(n_envs, L) float32 true rewards."""
    pos: np.ndarray
    """(n_envs,) int64 steps of the current segment recorded so far."""
    ep_step: np.ndarray
    """(n_envs,) int64 steps of the current episode so far."""
    episode: np.ndarray
    """(n_envs,) int64 id of the current episode (env e counts from e * 1_000_000)."""
    states: np.ndarray | None = None
    """(n_envs, L, S) float64 simulator states, or None when segments carry no states."""

    @staticmethod
    def allocate(
        n_envs: int, segment_length: int, obs_shape: tuple[int, ...], act_dim: int
    ) -> SegmentBuffers:
        """Empty buffers (no states) for ``n_envs`` envs and segments of ``segment_length``."""
        if segment_length < 1:
            raise ConfigError(f"segment_length must be ≥ 1, got {segment_length}")
        return SegmentBuffers(
            obs=np.zeros(
                (n_envs, segment_length, *obs_shape),
                np.uint8 if len(obs_shape) == 3 else np.float32,
            ),
            acts=np.zeros((n_envs, segment_length, act_dim), np.float32),
            rewards=np.zeros((n_envs, segment_length), np.float32),
            pos=np.zeros(n_envs, np.int64),
            ep_step=np.zeros(n_envs, np.int64),
            episode=np.arange(n_envs, dtype=np.int64) * 1_000_000,
        )


def cut_segments(
    buf: SegmentBuffers,
    obs: np.ndarray,
    acts: np.ndarray,
    rewards: np.ndarray,
    *,
    states: np.ndarray | None = None,
    env_id: str = "",
    round: int = 0,
) -> list[Segment]:
    """Record one step of every env into ``buf`` and return the segments it completed, in env
    order: the one place PrefLab cuts segments.

    ``obs`` are the observations before the step (n_envs, *obs_shape), ``acts`` the flat
    actions, ``rewards`` the true rewards, ``states`` the (n_envs, S) simulator states before
    the step (kept when ``buf.states`` is not None). A segment's ``start`` is its first step in
    its episode; pixel frame stacks keep each frame once (``compact``). Call
    :func:`end_episodes` after it so that no segment crosses an episode boundary.
    """
    pos = buf.pos
    rows = np.arange(pos.shape[0])
    length = buf.obs.shape[1]
    buf.obs[rows, pos] = obs
    buf.acts[rows, pos] = acts
    buf.rewards[rows, pos] = rewards
    if buf.states is not None:
        buf.states[rows, pos] = states
    pos += 1  # in place: the arrays are the caller's
    ep_step = buf.ep_step
    ep_step += 1
    out: list[Segment] = []
    for e in np.flatnonzero(pos == length):
        o, a = buf.obs[e], buf.acts[e].copy()
        if o.ndim == 4:  # pixels: a frame stack is kept once per frame, not once per slot
            o = compact(o)  # new frames when it is a sliding stack (no copy of the slots)
        if np.may_share_memory(o, buf.obs):
            o = o.copy()
        st = buf.states[e].copy() if buf.states is not None else None
        out.append(_segment(buf, int(e), o, a, buf.rewards[e].copy(), st, length, env_id, round))
        pos[e] = 0
    return out


def pad_segments(
    buf: SegmentBuffers,
    rows: np.ndarray,
    fill_obs: np.ndarray,
    *,
    env_id: str = "",
    round: int = 0,
) -> list[Segment]:
    """The segments in progress of the envs ``rows`` (those with at least one step) padded to
    full length with ``fill_obs``, zero actions, zero reward and the last state repeated (an
    episode that a termination cut short); their buffers start anew."""
    out: list[Segment] = []
    for e in rows:
        n = int(buf.pos[e])
        if n == 0:
            continue
        o, a, r = buf.obs[e].copy(), buf.acts[e].copy(), buf.rewards[e].copy()
        o[n:] = fill_obs
        a[n:] = 0.0
        r[n:] = 0.0
        st = None
        if buf.states is not None:
            st = buf.states[e].copy()
            st[n:] = st[n - 1]  # the body stays where it fell
        out.append(_segment(buf, e, o, a, r, st, n, env_id, round))
        buf.pos[e] = 0
    return out


def end_episodes(buf: SegmentBuffers, done: np.ndarray) -> None:
    """Envs ``done`` (bool per env) start a new episode; their unfinished segments go."""
    buf.pos[done] = 0
    buf.episode[done] += 1
    buf.ep_step[done] = 0


def _segment(
    buf: SegmentBuffers,
    e: int,
    o: np.ndarray,
    a: np.ndarray,
    r: np.ndarray,
    states: np.ndarray | None,
    steps: int,
    env_id: str,
    round: int,
) -> Segment:
    return Segment(
        id=Segment.content_id(o, a),
        obs=o,
        acts=a,
        true_rewards=r,
        env_id=env_id,
        episode=int(buf.episode[e]),
        start=int(buf.ep_step[e] - steps),
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
    buf = SegmentBuffers.allocate(
        n_envs, segment_length, obs_shape(obs_space), action_dim(act_space)
    )
    obs = venv.reset()
    segments: list[Segment] = []
    for _ in range(n_steps):
        if agent is None:
            acts = np.stack([sample_action(act_space, rng) for _ in range(n_envs)])
        else:
            acts, _ = agent.predict(obs, deterministic=deterministic)
        next_obs, rew, dones, infos = venv.step(acts)
        assert isinstance(obs, np.ndarray)  # obs_shape refused dict and tuple spaces above
        flat_o = model_obs(obs, obs_space)  # flat float rows, or uint8 images (n, C, H, W)
        if flat_o.dtype != np.uint8:
            check_finite("environment observations", flat_o)
        true_r = np.array([float(infos[e].get("true_reward", rew[e])) for e in range(n_envs)])
        flat_a = flatten_actions(acts, act_space)
        segments += cut_segments(buf, flat_o, flat_a, true_r, env_id=env_id, round=round)
        end_episodes(buf, np.asarray(dones, bool))
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
