"""``preflab.runs.callbacks.PreferenceLearning``: PrefLab's rounds inside a user's own
``model.learn``: the label budget is spent, the model trains on the learned reward (on-policy:
each rollout relabelled; off-policy: the replay buffer relabelled at each fit), and the run
directory is a finished run like ``preflab train``'s."""

from __future__ import annotations

import dataclasses
import json
from pathlib import Path

import numpy as np
import pytest
from stable_baselines3 import PPO, SAC

from preflab import load_reward_model
from preflab.config import TrainConfig
from preflab.errors import ConfigError
from preflab.runs.callbacks import PreferenceLearning


def small(algo: str) -> TrainConfig:
    return dataclasses.replace(TrainConfig.smoke(), algo=algo, total_steps=800, total_labels=16)


def test_a_users_ppo_learns_from_preferences_in_its_own_learn_call(tmp_path: Path) -> None:
    config = small("ppo")
    model = PPO("MlpPolicy", "Pendulum-v1", n_steps=100, batch_size=50, seed=0)
    cb = PreferenceLearning(config, tmp_path / "run")
    model.learn(config.total_steps, callback=cb)
    result = cb.result
    assert result is not None and result.n_labels == config.total_labels
    assert result.rounds >= 3 and result.env_steps == config.total_steps
    summary = json.loads((tmp_path / "run" / "summary.json").read_text())
    assert summary["n_labels"] == config.total_labels
    rows = (tmp_path / "run" / "metrics.csv").read_text().splitlines()
    assert len(rows) == 1 + result.rounds
    # the last rollout's rewards are the learned reward, not Pendulum's (always <= 0)
    buf = model.rollout_buffer
    ensemble = load_reward_model(tmp_path / "run")
    assert ensemble is not None
    assert np.any(buf.rewards > 0), "the rollout kept the env's own (non-positive) rewards"


def test_a_users_sac_has_its_replay_buffer_relabelled(tmp_path: Path) -> None:
    config = small("sac")
    model = SAC(  # a small network: what is tested is the buffer, not the learning
        "MlpPolicy",
        "Pendulum-v1",
        # gradient steps from step 600 (200 of them; from 100, 700): SAC still trains on its
        # buffer after it was relabelled, and every step is relabelled at each fit as before
        learning_starts=600,
        buffer_size=2000,
        batch_size=64,
        policy_kwargs={"net_arch": [32, 32]},
        seed=0,
    )
    cb = PreferenceLearning(config, tmp_path / "run")
    model.learn(config.total_steps, callback=cb)
    assert cb.result is not None and cb.result.n_labels == config.total_labels
    assert cb.loop is not None
    buf = model.replay_buffer
    n = buf.pos
    obs = buf.observations[:n, 0]
    acts = buf.actions[:n, 0]
    want = cb.loop.reward(obs, model.policy.unscale_action(acts), buf.next_observations[:n, 0])
    # the steps since the last fit carry the same learned reward as the relabelled ones
    np.testing.assert_allclose(buf.rewards[:n, 0], want, rtol=1e-4, atol=1e-5)


def test_a_model_with_another_number_of_envs_is_refused(tmp_path: Path) -> None:
    model = PPO("MlpPolicy", "Pendulum-v1", n_steps=64, batch_size=64, seed=0)
    cb = PreferenceLearning(dataclasses.replace(small("ppo"), n_envs=2), tmp_path / "run")
    with pytest.raises(ConfigError, match="n_envs=1"):
        model.learn(200, callback=cb)
    assert not (tmp_path / "run").exists(), "a refused start leaves no run directory"
