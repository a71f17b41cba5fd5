"""``preflab.policy.wrappers.LearnedReward``: a finished run's learned reward inside a plain gymnasium
env, equal to the reward model's own output, with the env's reward kept in the info."""

from __future__ import annotations

from pathlib import Path

import gymnasium as gym
import numpy as np
import pytest

from preflab import load_reward_model
from preflab.errors import ConfigError
from preflab.policy.wrappers import LearnedReward


def test_the_wrapped_env_pays_the_runs_learned_reward(finished: Path) -> None:
    model = load_reward_model(finished)
    env = LearnedReward(gym.make("Pendulum-v1"), finished)
    raw = gym.make("Pendulum-v1")
    obs, _ = env.reset(seed=3)
    raw.reset(seed=3)
    rng = np.random.default_rng(0)
    for _ in range(20):
        act = rng.uniform(-2, 2, (1,)).astype(np.float32)
        nxt, r, *_rest, info = env.step(act)
        raw_nxt, raw_r, *_ = raw.step(act)
        want = model.reward(np.asarray(obs, np.float32)[None], act[None])[0]
        assert r == pytest.approx(float(want), rel=1e-5, abs=1e-6)
        assert info["true_reward"] == pytest.approx(raw_r)
        np.testing.assert_allclose(nxt, raw_nxt)
        obs = nxt


def test_step_before_reset_and_potential_on_an_action_model_are_refused(finished: Path) -> None:
    env = LearnedReward(gym.make("Pendulum-v1"), finished)
    with pytest.raises(gym.error.ResetNeeded):
        env.step(np.zeros(1, np.float32))
    with pytest.raises(ConfigError, match="state-only"):
        LearnedReward(gym.make("Pendulum-v1"), finished, mode="potential")
