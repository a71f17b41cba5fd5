"""Early termination: fixed-horizon envs, absorbing-state segments, the learned absorbing tail."""

from __future__ import annotations

import tempfile
from pathlib import Path

import gymnasium as gym
import numpy as np
import pytest
import torch
from gymnasium import spaces
from stable_baselines3.common.vec_env import DummyVecEnv

from preflab.config import TrainConfig
from preflab.errors import ConfigError
from preflab.policy.reward_wrapper import SegmentRecorder
from preflab.policy.termination import (
    AbsorbingIndicator,
    AbsorbingTail,
    TerminationConfig,
    absorbing_obs,
    tail_factor,
    with_termination,
)
from preflab.records import Label, Segment
from preflab.reward.batch import LabelBatch, SegmentBatch
from preflab.reward.ensemble import RewardConfig, RewardEnsemble
from preflab.reward.trainer import FitConfig, RewardTrainer
from preflab.runs import start_loop
from preflab.testing.factories import make_segment


class FallEnv(gym.Env):
    """obs = [step]; reward 1 per step; terminates (falls) after ``fall_at`` steps."""

    observation_space = spaces.Box(-np.inf, np.inf, (1,), np.float32)
    action_space = spaces.Box(-1.0, 1.0, (1,), np.float32)

    def __init__(self, fall_at: int) -> None:
        self.fall_at = fall_at
        self.t = 0

    def reset(self, *, seed=None, options=None):  # type: ignore[no-untyped-def]
        super().reset(seed=seed)
        self.t = 0
        return np.array([0.0], np.float32), {}

    def step(self, action):  # type: ignore[no-untyped-def]
        self.t += 1
        return np.array([self.t], np.float32), 1.0, self.t >= self.fall_at, False, {}


def _venv(fall_at: int, limit: int, *, absorbing: bool) -> DummyVecEnv:
    def build() -> gym.Env:
        env: gym.Env = gym.wrappers.TimeLimit(FallEnv(fall_at), max_episode_steps=limit)
        return AbsorbingIndicator(env) if absorbing else env

    return DummyVecEnv([build])


def _run(rec: SegmentRecorder, n: int) -> list[Segment]:
    rec.reset()
    for _ in range(n):
        rec.step(np.zeros((1, 1), np.float32))
    return rec.pop_segments()


def test_terminated_episode_yields_padded_segment_with_indicator() -> None:
    rec = SegmentRecorder(
        _venv(7, 100, absorbing=True), 5, env_id="fall", capture_states=False, absorbing=True
    )
    segs = _run(rec, 7)  # one episode: 7 steps, then the fall
    assert [s.start for s in segs] == [0, 5]
    full, cut = segs
    np.testing.assert_array_equal(full.obs[:, 1], 0.0)  # alive: indicator 0
    np.testing.assert_array_equal(full.obs[:, 0], [0, 1, 2, 3, 4])
    # steps 5 and 6 as lived, then 3 absorbing steps: obs zeros + indicator 1, no action, no reward
    np.testing.assert_array_equal(cut.obs[:2], [[5, 0], [6, 0]])
    np.testing.assert_array_equal(cut.obs[2:], np.tile(absorbing_obs(2), (3, 1)))
    np.testing.assert_array_equal(cut.acts[2:], 0.0)
    np.testing.assert_array_equal(cut.true_rewards, [1, 1, 0, 0, 0])
    assert cut.id == Segment.content_id(cut.obs, cut.acts)


def test_default_recorder_still_drops_cut_segments() -> None:
    rec = SegmentRecorder(_venv(7, 100, absorbing=False), 5, env_id="fall", capture_states=False)
    assert [s.start for s in _run(rec, 7)] == [0]


def test_time_limit_is_not_absorbing() -> None:
    """An episode cut by the time limit (truncated) is not a fall: no padded segment."""
    rec = SegmentRecorder(
        _venv(1000, 7, absorbing=True), 5, env_id="fall", capture_states=False, absorbing=True
    )
    assert [s.start for s in _run(rec, 7)] == [0]


def test_tail_factor_is_the_discounted_sum_to_the_time_limit() -> None:
    g, horizon = 0.9, 10
    for t in (0, 3, 8, 9):
        want = sum(g**k for k in range(1, horizon - t))
        assert tail_factor(g, horizon, np.array([t]))[0] == pytest.approx(want)
    assert tail_factor(1.0, horizon, np.array([4]))[0] == 5


def test_tail_paid_on_termination_only() -> None:
    """AbsorbingTail adds r̂_abs·Σγ^k on the falling step, nothing on other or truncated steps."""

    def reward_fn(obs: np.ndarray, acts: np.ndarray, nxt: np.ndarray) -> np.ndarray:
        return np.where(obs[:, -1] > 0.5, -2.0, 0.0)  # absorbing −2, alive 0

    for fall_at, limit in ((4, 10), (1000, 4)):
        tail = AbsorbingTail(_venv(fall_at, limit, absorbing=True), reward_fn, horizon=10)
        tail.gamma = 0.5
        tail.reset()
        rews = [float(tail.step(np.zeros((1, 1), np.float32))[1][0]) for _ in range(4)]
        if fall_at == 4:  # the 4th step (t = 3) falls
            assert rews == pytest.approx([1, 1, 1, 1 - 2.0 * tail_factor(0.5, 10, [3])[0]])
        else:
            assert rews == [1, 1, 1, 1]


def test_learned_absorbing_reward_below_alive_when_labels_prefer_survival() -> None:
    """Oracle labels on padded segments (survival preferred) give r̂(absorbing) < r̂(alive)."""
    torch.manual_seed(0)
    rng = np.random.default_rng(0)
    T, d = 10, 3
    segs = []
    for k in range(60):
        obs = np.concatenate([rng.normal(size=(T, d)), np.zeros((T, 1))], 1).astype(np.float32)
        acts = rng.uniform(-1, 1, (T, 1)).astype(np.float32)
        rew = np.ones(T, np.float32)
        if k % 2:  # fell after n steps
            n = int(rng.integers(1, T))
            obs[n:] = absorbing_obs(d + 1)
            acts[n:] = 0.0
            rew[n:] = 0.0
        segs.append(make_segment(obs=obs, acts=acts, true_rewards=rew, env_id="x"))
    batch = SegmentBatch.from_segments(segs)
    labels = []
    for _ in range(300):
        i, j = rng.choice(len(segs), 2, replace=False)
        ri, rj = segs[i].true_return, segs[j].true_return
        labels.append(Label(a=segs[i].id, b=segs[j].id, p=0.5 if ri == rj else float(ri > rj)))
    ens = RewardEnsemble(d + 1, 1, RewardConfig(members=2, hidden=(32,)), seed=0)
    RewardTrainer(ens, FitConfig(epochs=30)).fit(
        batch, LabelBatch.from_labels(labels, batch.index()), rng
    )
    ens.fit_reward_stats(batch)
    alive = np.concatenate([rng.normal(size=(200, d)), np.zeros((200, 1))], 1).astype(np.float32)
    r_alive = ens.reward(alive, rng.uniform(-1, 1, (200, 1)).astype(np.float32))
    r_abs = ens.reward(absorbing_obs(d + 1)[None], np.zeros((1, 1), np.float32))[0]
    assert r_abs < np.quantile(r_alive, 0.1)


def test_with_termination_builds_the_right_env() -> None:
    assert with_termination("Hopper-v5", TerminationConfig()) == "Hopper-v5"
    env = with_termination("Hopper-v5", TerminationConfig(fixed_horizon=True, absorbing=True))()  # type: ignore[operator]
    assert env.observation_space.shape == (12,)
    assert env.unwrapped._terminate_when_unhealthy is False
    with pytest.raises(ConfigError, match="terminate_when_unhealthy"):
        with_termination("Pendulum-v1", TerminationConfig(fixed_horizon=True))()  # type: ignore[operator]


def test_loop_with_absorbing_keeps_falls() -> None:
    """A tiny Hopper run with absorbing states: padded segments in the pool, indicator in obs."""
    cfg = TrainConfig.smoke(
        env_id="Hopper-v5",
        termination=TerminationConfig(absorbing=True),
        segment_length=40,
        initial_steps=400,
        total_steps=800,
        steps_per_round=400,
    )
    with tempfile.TemporaryDirectory() as d:
        loop = start_loop(cfg, Path(d) / "run")
        result = loop.run()
        assert loop.tail is not None and loop.tail.gamma == pytest.approx(loop.agent.gamma)
        fell = [s for s in loop.pool if s.obs[-1, -1] == 1.0]
        assert fell, "random Hopper falls within 40 steps; some segments must be padded"
        assert all(s.obs.shape == (40, 12) for s in loop.pool)
        assert result.n_labels > 0


def test_absorbing_refused_with_replay_relabelling() -> None:
    with tempfile.TemporaryDirectory() as d, pytest.raises(ConfigError, match="on-policy"):
        start_loop(
            TrainConfig.smoke(
                env_id="Hopper-v5", algo="sac", termination=TerminationConfig(absorbing=True)
            ),
            Path(d) / "run",
        )
