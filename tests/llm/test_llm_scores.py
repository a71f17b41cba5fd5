"""State scores, potential / direct rewards, and the reward wrapper."""

from __future__ import annotations

import numpy as np
import pytest
import torch
from stable_baselines3.common.env_util import make_vec_env
from stable_baselines3.common.vec_env import DummyVecEnv

from preflab.errors import ConfigError, DataError
from preflab.llm import (
    RewardShaping,
    ScoreConfig,
    ScoreRewardVecEnv,
    direct_rewards,
    fit_state_scores,
    fit_state_scores_from_labels,
    potential_rewards,
    progress,
    sample_transitions,
    state_segments,
    true_preference,
)
from preflab.records import Label

torch.set_num_threads(1)


def test_potential_rewards_hand_computed() -> None:
    s = np.array([0.0, 1.0, 3.0, 2.5])
    np.testing.assert_allclose(potential_rewards(s), [1.0, 2.0, -0.5])
    np.testing.assert_allclose(potential_rewards(s, step_penalty=0.1), [0.9, 1.9, -0.6])
    np.testing.assert_allclose(potential_rewards(s, discount=0.5), [1.0, 1.0, -0.125])
    np.testing.assert_allclose(potential_rewards(s, discount=0.5, start=1), [0.5, 0.5, -0.0625])
    # batched along the last axis; telescoping: the sum is σ(s_T) − σ(s_0)
    batch = np.stack([s, s[::-1]])
    r = potential_rewards(batch)
    assert r.shape == (2, 3)
    np.testing.assert_allclose(r.sum(-1), [2.5, -2.5])
    # equal scores (an uncertain pair) give exactly zero reward
    np.testing.assert_array_equal(potential_rewards(np.full(5, 0.7)), np.zeros(4))


def test_direct_rewards_hand_computed() -> None:
    s = np.array([1.0, 3.0])
    np.testing.assert_allclose(direct_rewards(s, mean=2.0, std=2.0), [-0.5, 0.5])
    np.testing.assert_allclose(
        direct_rewards(s, mean=2.0, std=2.0, step_penalty=0.5, discount=0.5), [-1.0, -0.0]
    )


def test_reward_errors() -> None:
    with pytest.raises(DataError, match="at least two"):
        potential_rewards(np.array([1.0]))
    with pytest.raises(DataError, match="NaN"):
        potential_rewards(np.array([1.0, np.nan]))
    with pytest.raises(ConfigError, match="discount"):
        potential_rewards(np.zeros(3), discount=1.5)
    with pytest.raises(ConfigError, match="mode"):
        RewardShaping(mode="both")  # type: ignore[arg-type]
    with pytest.raises(ConfigError, match="step_penalty"):
        RewardShaping(step_penalty=-1)
    with pytest.raises(DataError, match=r"one shape"):
        fit_state_scores(np.zeros((3, 2)), np.zeros((2, 2)), np.zeros(3), np.random.default_rng(0))


def test_scores_recover_a_known_ordering_and_flatten_uncertain_pairs() -> None:
    # 1-D states on a line; pairs of neighbours. Right half: confident "right is better";
    # left half: 50 % confidence. Scores rise on the right and stay flat on the left.
    rng = np.random.default_rng(0)
    x = np.linspace(-1, 1, 41)
    a = np.repeat(x[:-1], 5)[:, None]
    b = np.repeat(x[1:], 5)[:, None]
    p = np.where(a[:, 0] >= 0, 0.0, 0.5)  # P(a ≻ b): 0 → b (right neighbour) better
    sc = fit_state_scores(
        a, b, p, rng, ScoreConfig(epochs=100, hidden=(32, 32), l2=1e-4, batch_size=16)
    )
    s = sc.scores(x[:, None])
    right, left = s[x >= 0], s[x <= -0.1]
    assert np.all(np.diff(right) > 0)
    span = s.max() - s.min()
    assert (left.max() - left.min()) < 0.05 * span  # the paper's "uninformative" region


def test_learned_scores_rank_grid_transitions() -> None:
    env = "PrefLab/NoLock-v0"
    rng = np.random.default_rng(1)
    a, b = sample_transitions(env, 1500, rng)
    p = true_preference(a, b, env)
    sc = fit_state_scores(a, b, p, rng, ScoreConfig(epochs=15))
    ta, tb = sample_transitions(env, 500, np.random.default_rng(2))
    t = true_preference(ta, tb, env)
    m = t != 0.5
    acc = ((sc.scores(ta) > sc.scores(tb))[m] == (t[m] == 1)).mean()
    assert acc > 0.85
    # within one layout, scores follow the true progress (levels across layouts are not
    # identified: consecutive pairs never compare two layouts)
    same = sample_transitions(env, 1, np.random.default_rng(3))[0]
    assert np.isfinite(sc.scores(same)).all() and progress(same, env).shape == (1,)


def test_fit_from_labels_on_state_segments() -> None:
    obs = np.array([[0.0], [1.0], [2.0]], np.float32)
    segs = state_segments(obs)
    labels = [
        Label(a=segs[1].id, b=segs[0].id, p=1.0),
        Label(a=segs[2].id, b=segs[1].id, p=1.0),
    ] * 30
    sc = fit_state_scores_from_labels(
        segs, labels, np.random.default_rng(0), ScoreConfig(epochs=40)
    )
    s = sc.scores(obs)
    assert s[0] < s[1] < s[2]


def test_score_reward_vecenv_potential_and_discount() -> None:
    env = "PrefLab/NoLock-v0"
    rng = np.random.default_rng(0)
    a, b = sample_transitions(env, 300, rng)
    sc = fit_state_scores(a, b, true_preference(a, b, env), rng, ScoreConfig(epochs=3))
    venv = make_vec_env(env, n_envs=2, seed=0, vec_env_cls=DummyVecEnv)
    wrapped = ScoreRewardVecEnv(
        venv, sc, RewardShaping(mode="potential", step_penalty=0.1, discount=0.9)
    )
    obs = wrapped.reset()
    for t in range(3):
        acts = np.array([0, 1])  # turning never ends an episode
        nxt, rew, dones, infos = wrapped.step(acts)
        expect = (sc.scores(nxt) - sc.scores(obs) - 0.1) * 0.9**t
        np.testing.assert_allclose(rew, expect, rtol=1e-5, atol=1e-6)
        assert "true_reward" in infos[0] and not dones.any()
        obs = nxt
    direct = ScoreRewardVecEnv(
        make_vec_env(env, n_envs=2, seed=0, vec_env_cls=DummyVecEnv),
        sc,
        RewardShaping(mode="direct"),
    )
    direct.reset()
    nxt, rew, _, _ = direct.step(np.array([0, 0]))
    np.testing.assert_allclose(rew, sc.scores(nxt, normalise=True), rtol=1e-5)
