"""The policy's reward from state scores through the one loop: potential differences σ(s')−σ(s)
times γ_r^t (checked by hand), the direct reward, and refusal of action-dependent models."""

from __future__ import annotations

import gymnasium as gym
import numpy as np
import pytest
import torch
from gymnasium import spaces
from stable_baselines3.common.vec_env import DummyVecEnv

from preflab.config import TrainConfig
from preflab.errors import ConfigError
from preflab.policy.reward_wrapper import LearnedRewardVecEnv
from preflab.policy.shaping import PolicyReward, PolicyRewardConfig
from preflab.reward import RewardConfig, RewardEnsemble
from preflab.runs import start_loop, train

torch.set_num_threads(1)


class Counter(gym.Env):
    """obs = [k²] at step k of an episode of 3 steps (terminates on the third)."""

    observation_space = spaces.Box(-np.inf, np.inf, (1,), np.float32)
    action_space = spaces.Discrete(2)

    def reset(self, *, seed=None, options=None):  # type: ignore[no-untyped-def]
        self.k = 0
        return np.array([0.0], np.float32), {}

    def step(self, action):  # type: ignore[no-untyped-def]
        self.k += 1
        return np.array([self.k**2], np.float32), 0.0, self.k == 3, False, {}


def linear_sigma(a: float, b: float) -> RewardEnsemble:
    """A one-member state-only model with σ(s) = a·s + b for s ≥ 0 (one leaky-ReLU unit)."""
    ens = RewardEnsemble(1, 0, RewardConfig(members=1, hidden=(1,), use_actions=False))
    with torch.no_grad():
        ens.weights[0].fill_(1.0)
        ens.biases[0].fill_(0.0)
        ens.weights[1].fill_(a)
        ens.biases[1].fill_(b)
    return ens


@pytest.mark.parametrize("gamma,penalty", [(1.0, 0.0), (0.5, 0.1)])
def test_potential_reward_is_the_score_difference_times_gamma_t(gamma, penalty) -> None:
    ens = linear_sigma(2.0, 0.5)
    pr = PolicyReward(
        PolicyRewardConfig(mode="potential", discount=gamma, step_penalty=penalty), model=ens
    )
    pr.fitted = True
    assert not pr.deferrable
    venv = LearnedRewardVecEnv(DummyVecEnv([Counter]), pr)
    venv.reset()
    got = [float(venv.step(np.array([0]))[1][0]) for _ in range(7)]
    # by hand: s_t = t², σ = 2s + 0.5, r_t = (σ(s_{t+1}) − σ(s_t))·γ^t − penalty = 2(2t+1)·γ^t − p;
    # the episode ends after 3 steps (the terminal obs 9 counts) and t restarts at 0
    one = [2.0 * (2 * t + 1) * gamma**t - penalty for t in range(3)]
    np.testing.assert_allclose(got, one + one + one[:1], rtol=1e-5)


def test_direct_reward_is_the_learned_reward_minus_the_penalty() -> None:
    # r̂(s) = 10·s: one member, its output and the mix standardised by the identity (no fit yet)
    pr = PolicyReward(PolicyRewardConfig(step_penalty=1.0), model=linear_sigma(10.0, 0.0))
    pr.fitted = True
    assert pr.deferrable
    venv = LearnedRewardVecEnv(DummyVecEnv([Counter]), pr)
    venv.reset()
    got = [float(venv.step(np.array([0]))[1][0]) for _ in range(3)]
    np.testing.assert_allclose(got, [10.0 * t * t - 1.0 for t in range(3)])


@pytest.mark.parametrize("mode", ["potential", "direct"])
def test_unfitted_reward_is_zero(mode: str) -> None:
    pr = PolicyReward(PolicyRewardConfig(mode=mode), model=linear_sigma(1.0, 0.0))  # type: ignore[arg-type]
    obs = np.arange(4, dtype=np.float32)[:, None]
    np.testing.assert_array_equal(pr(obs, obs, obs + 1), np.zeros(4))


def _cfg(**kw) -> TrainConfig:  # type: ignore[no-untyped-def]
    base = dict(
        env_id="PrefLab/NoLock-v0",
        algo="ppo",
        total_steps=96,
        total_labels=4,
        initial_steps=32,
        steps_per_round=64,
        segment_length=1,
        n_envs=2,
        eval_episodes=1,
        reward=RewardConfig(members=1, hidden=(8,), use_actions=False),
        policy_reward=PolicyRewardConfig(mode="potential", discount=0.99),
    )
    return TrainConfig(**(base | kw))


def test_potential_mode_with_actions_is_refused(tmp_path) -> None:
    cfg = _cfg(reward=RewardConfig(members=1, hidden=(8,), use_actions=True))
    with pytest.raises(ConfigError, match="use_actions=False"):
        train(cfg, run_dir=tmp_path / "run")


def test_loop_potential_mode_uses_per_step_rewards(tmp_path) -> None:
    loop = start_loop(_cfg(), tmp_path / "run")
    # on-policy relabelling of a whole rollout cannot see next states: rewards come per step
    assert loop.venv.defer is False and loop.callback is None
    direct = start_loop(_cfg(policy_reward=PolicyRewardConfig()), tmp_path / "run2")
    assert direct.venv.defer is True and direct.callback is not None


@pytest.mark.slow
def test_potential_rewards_from_exact_rankings_train_a_successful_agent(tmp_path) -> None:
    from preflab_bench.llm_fig7 import one_run

    (rec,) = one_run(
        "PrefLab/NoLock-v0",
        1.0,
        1,
        seed=0,
        modes=["potential"],
        pairs=2500,
        steps=20_000,
        eval_episodes=30,
        run_root=tmp_path,
    )
    # a uniformly random policy reaches the goal in 33% of NoLock episodes (60 steps)
    assert rec["success"] > 0.5
    assert np.isfinite(rec["return"])
