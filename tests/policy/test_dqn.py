"""DQN for discrete actions: a tiny CartPole run, replay relabelling, ε over the whole run."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pytest

from preflab.config import TrainConfig
from preflab.config.checks import check_run
from preflab.envs import flatten_actions, make_vec_env
from preflab.errors import ConfigError
from preflab.policy.agents import RunDQN, make_agent, relabel_replay_buffer
from preflab.policy.presets import preset
from preflab.runs import train


def _config(**kw: object) -> TrainConfig:
    base = dict(env_id="CartPole-v1", algo="dqn", agent_kwargs="{}")
    return TrainConfig.smoke(**(base | kw))


def test_tiny_cartpole_run(tmp_path: Path) -> None:
    result = train(_config(), run_dir=tmp_path / "run")
    assert result.algo == "dqn" and result.n_labels > 0
    assert result.env_steps == 600  # train_freq divides a round: no overshoot
    assert np.isfinite(result.true_return) and result.true_return >= 8  # CartPole's floor
    agent = result.agent
    assert isinstance(agent, RunDQN)
    assert agent.replay_buffer is not None and agent.replay_buffer.pos == 600
    record = json.loads((tmp_path / "run" / "hyperparams.json").read_text())
    assert record["hyperparams"]["train_freq"] == [200, "step"]
    assert record["hyperparams"]["exploration_final_eps"] == 0.04


def test_replay_buffer_is_relabelled_with_the_learned_reward() -> None:
    venv = make_vec_env("CartPole-v1", 2, seed=0)
    agent = make_agent("dqn", venv, seed=0, net_arch=[8], **preset("dqn", 2, 200))
    agent.learn(total_timesteps=100)
    buf = agent.replay_buffer
    assert buf is not None
    n = buf.pos

    def reward_fn(obs: np.ndarray, acts: np.ndarray, nxt: np.ndarray) -> np.ndarray:
        return (obs[:, 0] + 2.0 * acts[:, 1] - nxt[:, 2]).astype(np.float32)

    assert relabel_replay_buffer(agent, reward_fn) == n * 2
    obs = buf.observations[:n].reshape(n * 2, -1)
    nxt = buf.next_observations[:n].reshape(n * 2, -1)
    acts = flatten_actions(buf.actions[:n].reshape(n * 2, -1), venv.action_space)
    assert acts.shape == (n * 2, 2)  # one-hot of the discrete action
    np.testing.assert_allclose(buf.rewards[:n].reshape(-1), reward_fn(obs, acts, nxt), rtol=1e-6)
    venv.close()


def test_exploration_decays_over_the_run_not_each_learn_call() -> None:
    venv = make_vec_env("CartPole-v1", 1, seed=0)
    hyper = preset("dqn", 1, 100) | {"exploration_fraction": 0.5, "exploration_final_eps": 0.0}
    agent = make_agent("dqn", venv, seed=0, net_arch=[8], run_steps=1000, **hyper)
    agent.learn(total_timesteps=100)  # one "round" of a 1000-step run: 10% through
    assert agent.exploration_rate == pytest.approx(1.0 - 0.1 / 0.5, abs=0.01)
    agent.learn(total_timesteps=100, reset_num_timesteps=False)
    assert agent.exploration_rate == pytest.approx(1.0 - 0.2 / 0.5, abs=0.01)
    venv.close()


def test_dqn_on_continuous_actions_is_refused() -> None:
    with pytest.raises(ConfigError, match="DQN needs discrete"):
        check_run(TrainConfig.smoke(algo="dqn"))
