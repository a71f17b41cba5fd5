"""The public API: typed results, load_run for inference, env factories and existing models."""

from __future__ import annotations

from pathlib import Path

import gymnasium as gym
import numpy as np
from stable_baselines3 import PPO

import preflab
from preflab.config import TrainConfig
from preflab.loop import RunResult
from preflab.runs import train


def test_train_returns_a_typed_result_and_load_run_restores_it(tmp_path: Path) -> None:
    result = train(TrainConfig.smoke(), run_dir=tmp_path / "run")
    assert isinstance(result, RunResult)
    assert result.run_dir == tmp_path / "run" and result.n_labels == 12
    assert result.env_steps == 600 and result.rounds == 3
    back = preflab.load_run(tmp_path / "run")
    obs = np.random.default_rng(0).normal(size=(32, 3)).astype(np.float32)
    acts = np.random.default_rng(1).uniform(-2, 2, size=(32, 1)).astype(np.float32)
    np.testing.assert_allclose(
        back.reward_model.reward(obs, acts), result.reward_model.reward(obs, acts), rtol=1e-6
    )
    a1, _ = result.agent.predict(obs, deterministic=True)
    a2, _ = back.agent.predict(obs, deterministic=True)
    np.testing.assert_allclose(a1, a2, rtol=1e-6)
    assert back.true_return == result.true_return


def test_env_factory_runs_a_wrapped_env(tmp_path: Path) -> None:
    seen: list[int] = []

    def factory() -> gym.Env:
        seen.append(1)
        return gym.wrappers.TimeLimit(gym.make("Pendulum-v1").unwrapped, max_episode_steps=100)

    result = train(TrainConfig.smoke(), run_dir=tmp_path / "run", env=factory)
    assert seen and result.env_steps == 600


def test_an_existing_sb3_model_keeps_training(tmp_path: Path) -> None:
    model = PPO("MlpPolicy", "Pendulum-v1", n_steps=200, batch_size=50, seed=0, device="cpu")
    before = [p.detach().clone() for p in model.policy.parameters()]
    result = train(TrainConfig.smoke(), run_dir=tmp_path / "run", env=model)
    assert result.agent is model
    assert any(
        not np.allclose(b.numpy(), p.detach().numpy())
        for b, p in zip(before, model.policy.parameters(), strict=True)
    )
