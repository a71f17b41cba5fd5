"""VecEnv wrappers: replace the env reward by a learned one; record rollouts as segments."""

from __future__ import annotations

import logging
from collections.abc import Callable
from typing import Any

import numpy as np
from stable_baselines3.common.vec_env import DummyVecEnv, VecEnv, VecEnvWrapper
from stable_baselines3.common.vec_env.base_vec_env import VecEnvObs

from preflab.envs import action_dim, flatten_actions, model_obs, obs_shape
from preflab.errors import ConfigError, DataError
from preflab.media.capture import CaptureFn, capture_for
from preflab.policy.rollout import SegmentBuffers, cut_segments, end_episodes, pad_segments
from preflab.policy.shaping import PolicyReward
from preflab.records import Segment

log = logging.getLogger(__name__)

RewardFn = Callable[[np.ndarray, np.ndarray, np.ndarray], np.ndarray]
"""reward_fn(obs, acts, next_obs) -> (n,) rewards, batched; obs are flat float32 rows (n, D), or
uint8 (n, C, H, W) for image observations (:func:`preflab.envs.model_obs`)."""


class LearnedRewardVecEnv(VecEnvWrapper):
    """Replaces the env reward with ``reward_fn`` (one batched call per step over all envs).

    The true reward stays in ``info['true_reward']``; SB3's Monitor (inside the envs) keeps
    reporting true episode returns in ``info['episode']``. ``episode_steps`` counts each env's
    step within its episode (0 at the first step); a :class:`preflab.policy.shaping.PolicyReward`
    receives it (γ_r^t, potential differences) and, during a live phase, hands the step to its
    live rating source instead (which needs ``venv`` to be the :class:`SegmentRecorder`).
    """

    def __init__(
        self, venv: VecEnv, reward_fn: RewardFn | PolicyReward, *, defer: bool = False
    ) -> None:
        super().__init__(venv)
        self.reward_fn = reward_fn
        self.episode_steps = np.zeros(self.num_envs, np.int64)
        # defer: hand back zero rewards; an on-policy agent's whole rollout is then relabelled in
        # one call by preflab.policy.rollout_relabel.RolloutRelabel instead of step by step.
        self.defer = defer
        self._last_obs: np.ndarray | None = None
        self._acts: np.ndarray | None = None

    def reset(self) -> np.ndarray:
        obs = _array(self.venv.reset())
        self._last_obs = model_obs(obs, self.observation_space)
        self.episode_steps[:] = 0
        return obs

    def step_async(self, actions: np.ndarray) -> None:
        self._acts = flatten_actions(actions, self.action_space)
        self.venv.step_async(actions)

    def _next_obs(
        self, flat: np.ndarray, dones: np.ndarray, infos: list[dict[str, Any]]
    ) -> np.ndarray:
        """The observation each env reached: the terminal one on done steps (before auto-reset)."""
        nxt = np.array(flat, copy=True)
        for i in np.flatnonzero(dones):
            term = infos[i].get("terminal_observation")
            if term is not None:
                nxt[i] = model_obs(np.asarray(term)[None], self.observation_space)[0]
        return nxt

    def step_wait(self):  # type: ignore[no-untyped-def]
        shaped = self.reward_fn if isinstance(self.reward_fn, PolicyReward) else None
        live = shaped.live if shaped is not None else None
        if live is not None:
            if not isinstance(self.venv, SegmentRecorder):
                raise ConfigError(
                    "a live rating phase needs the SegmentRecorder directly below "
                    "LearnedRewardVecEnv (ratings are matched to recorded segments)"
                )
            episodes, steps = self.venv.next_keys()
        obs, rew, dones, infos = self.venv.step_wait()
        flat = model_obs(_array(obs), self.observation_space)
        assert self._last_obs is not None and self._acts is not None, "step before reset"
        checked = True
        if live is not None:
            learned = np.asarray(
                live.rate(np.asarray(rew, np.float64), episodes, steps), np.float32
            ).reshape(-1)
        elif self.defer:  # zeros for now (made here: nothing to check)
            learned = np.zeros(self.num_envs, np.float32)
            checked = False
        else:
            nxt = self._next_obs(flat, dones, infos)
            learned = np.asarray(
                shaped.step(self._last_obs, self._acts, nxt, self.episode_steps)
                if shaped is not None
                else self.reward_fn(self._last_obs, self._acts, nxt),
                np.float32,
            ).reshape(-1)
        if checked and (learned.shape[0] != self.num_envs or not np.all(np.isfinite(learned))):
            raise DataError(
                f"reward_fn must return {self.num_envs} finite rewards, got {learned!r}"
            )
        for i, info in enumerate(infos):
            info["true_reward"] = float(rew[i])
        self._last_obs = flat
        self.episode_steps += 1
        self.episode_steps[np.asarray(dones, bool)] = 0
        return obs, learned, dones, infos


class SegmentRecorder(VecEnvWrapper):
    """Records every transition the agent takes and cuts it into fixed-length segments.

    Per-env buffers are preallocated arrays written with one vectorised assignment per step.
    Segments never cross an episode boundary. ``pop_segments`` drains the finished ones. The
    recorded reward is the env's (true) reward at this layer, so place it below any
    reward-replacing wrapper.

    With ``capture_states`` (default) it also keeps the simulator state of every env before
    every step (``Segment.states``, for rendering) when the envs live in this process (a
    DummyVecEnv, possibly under VecEnv wrappers) and every env has a capture function
    (:mod:`preflab.media.capture`); otherwise segments get ``states=None``.
    """

    def __init__(
        self,
        venv: VecEnv,
        segment_length: int,
        *,
        env_id: str = "",
        round_fn: Callable[[], int] | None = None,
        capture_states: bool = True,
        absorbing: bool = False,
    ) -> None:
        super().__init__(venv)
        self.segment_length = segment_length
        # opt-in (preflab.policy.termination): keep segments cut short by a termination,
        # padded with the absorbing observation (last feature = indicator 1)
        self.absorbing = absorbing
        self.env_id = env_id
        self.round_fn = round_fn or (lambda: 0)
        # the buffers are plain attributes, so a checkpoint of the recorder (loop.py) holds them
        buf = SegmentBuffers.allocate(
            venv.num_envs,
            segment_length,
            obs_shape(venv.observation_space),  # (D,) flat, (C, H, W) uint8 images
            action_dim(venv.action_space),
        )
        self._obs_buf, self._act_buf, self._rew_buf = buf.obs, buf.acts, buf.rewards
        self._pos, self._ep_step, self._episode = buf.pos, buf.ep_step, buf.episode
        self._done: list[Segment] = []
        self._last_obs: np.ndarray | None = None
        self._acts: np.ndarray | None = None
        self.steps = 0
        self._capture = _state_capture(venv) if capture_states else None
        self._state_buf: np.ndarray | None = None
        self._last_state: np.ndarray | None = None

    @property
    def captures_states(self) -> bool:
        """True when segments carry simulator states."""
        return self._capture is not None

    def _read_states(self) -> None:
        """Simulator state of every env now (after a reset or an auto-reset: the next start).

        States are only for rendering: a capture that fails, or envs whose states differ in
        size, switch capture off (with a warning) instead of stopping training."""
        cap = self._capture
        if cap is None:
            return
        try:
            if self._last_state is None:
                first = [np.asarray(fn(u), np.float64).reshape(-1) for u, fn in cap]
                dims = {f.shape[0] for f in first}
                if len(dims) != 1:
                    raise ValueError(f"the envs' states differ in size: {sorted(dims)}")
                self._last_state = np.stack(first)
                self._state_buf = np.zeros((len(cap), self.segment_length, dims.pop()), np.float64)
                return
            last = self._last_state
            for i, (u, fn) in enumerate(cap):
                last[i] = fn(u)
        except Exception as exc:
            log.warning(
                "state capture for %s failed (%s: %s); segments from now on have states=None "
                "and cannot be rendered unless frames are stored",
                self.env_id or "this env",
                type(exc).__name__,
                exc,
            )
            self._capture = None
            self._state_buf = None

    def reset(self) -> np.ndarray:
        obs = _array(self.venv.reset())
        self._last_obs = model_obs(obs, self.observation_space)
        self._read_states()
        self._pos[:] = 0
        return obs

    def step_async(self, actions: np.ndarray) -> None:
        self._acts = flatten_actions(actions, self.action_space)
        self.venv.step_async(actions)

    def step_wait(self):  # type: ignore[no-untyped-def]
        obs, rew, dones, infos = self.venv.step_wait()
        assert self._last_obs is not None and self._acts is not None, "step before reset"
        if not np.all(np.isfinite(rew)):
            raise DataError(
                "the environment returned a NaN or infinite reward; check the environment"
            )
        self.steps += self.num_envs
        buf = SegmentBuffers(
            obs=self._obs_buf,
            acts=self._act_buf,
            rewards=self._rew_buf,
            pos=self._pos,
            ep_step=self._ep_step,
            episode=self._episode,
            states=self._state_buf if self._capture is not None else None,
        )
        round = self.round_fn()
        self._done += cut_segments(
            buf,
            self._last_obs,
            self._acts,
            rew,
            states=self._last_state,
            env_id=self.env_id,
            round=round,
        )
        done = np.asarray(dones, bool)
        if self.absorbing:
            # opt-in (preflab.policy.termination): keep segments a termination cut short,
            # padded with the absorbing observation
            from preflab.policy.termination import absorbing_obs, terminated_mask

            ended = np.flatnonzero(terminated_mask(done, infos))
            if len(ended):
                fill = absorbing_obs(self._obs_buf.shape[2])
                self._done += pad_segments(buf, ended, fill, env_id=self.env_id, round=round)
        end_episodes(buf, done)
        self._last_obs = model_obs(_array(obs), self.observation_space)
        self._read_states()
        return obs, rew, dones, infos

    def next_keys(self) -> tuple[np.ndarray, np.ndarray]:
        """(episode id, episode step) per env of the transition about to be recorded: the
        ``episode`` of the segment it will fall in, and ``start`` + its position there."""
        return self._episode.copy(), self._ep_step.copy()

    def pop_segments(self) -> list[Segment]:
        """Segments finished since the last call."""
        out, self._done = self._done, []
        return out


def _array(obs: VecEnvObs) -> np.ndarray:
    """A VecEnv's observations as one array (dict and tuple spaces are refused before a run
    starts: :func:`preflab.pixels.spaces.check_obs_space`)."""
    if not isinstance(obs, np.ndarray):
        raise DataError(
            f"expected array observations, got {type(obs).__name__}; flatten dict or tuple "
            "observation spaces first (gymnasium.wrappers.FlattenObservation)"
        )
    return obs


def _state_capture(venv: VecEnv) -> list[tuple[object, CaptureFn]] | None:
    """(unwrapped env, capture fn) per env when all envs are in-process and capturable."""
    inner: object = venv
    while not isinstance(inner, DummyVecEnv) and isinstance(inner, VecEnvWrapper):
        inner = inner.venv
    if not isinstance(inner, DummyVecEnv):
        return None  # envs in other processes (SubprocVecEnv): reading them costs a round trip
    out: list[tuple[object, CaptureFn]] = []
    for env in inner.envs:
        fn = capture_for(env)
        if fn is None:
            return None
        out.append((env.unwrapped, fn))
    return out
