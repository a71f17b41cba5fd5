"""Relabelling a whole PPO rollout at once equals relabelling step by step (incl. timeouts)."""

import numpy as np
from stable_baselines3.common.callbacks import BaseCallback, CallbackList

from preflab.envs import make_vec_env
from preflab.policy.agents import make_agent
from preflab.policy.reward_wrapper import LearnedRewardVecEnv
from preflab.policy.rollout_relabel import RolloutRelabel


def reward_fn(obs: np.ndarray, acts: np.ndarray, _next: np.ndarray) -> np.ndarray:
    return (obs[:, 0] - 0.3 * obs[:, 2] + 0.5 * acts[:, 0]).astype(np.float32)


class Capture(BaseCallback):
    def _on_step(self) -> bool:
        return True

    def _on_rollout_end(self) -> None:
        buf = self.model.rollout_buffer
        self.rewards, self.returns = buf.rewards.copy(), buf.returns.copy()


def rollout(defer: bool) -> Capture:
    venv = LearnedRewardVecEnv(make_vec_env("Pendulum-v1", 2, seed=3), reward_fn, defer=defer)
    agent = make_agent("ppo", venv, seed=3, n_steps=256, batch_size=64, n_epochs=1)
    cap = Capture()
    cbs = [RolloutRelabel(reward_fn), cap] if defer else [cap]
    agent.learn(total_timesteps=256, callback=CallbackList(cbs))  # one rollout crossing a timeout
    return cap


def test_deferred_relabel_matches_per_step_rewards_and_returns() -> None:
    step, whole = rollout(defer=False), rollout(defer=True)
    np.testing.assert_allclose(whole.rewards, step.rewards, rtol=1e-5, atol=1e-5)
    np.testing.assert_allclose(whole.returns, step.returns, rtol=1e-5, atol=1e-4)
    assert np.abs(step.rewards).sum() > 0
