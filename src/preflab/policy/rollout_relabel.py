"""Relabel a whole on-policy rollout in one batched reward-model call (PPO, A2C, TRPO).

With ``LearnedRewardVecEnv(..., defer=True)`` the env hands the agent zero rewards; SB3 adds
its timeout bootstrap (γ·V(s_T) on truncated steps) to those zeros. At the end of each rollout
this callback adds r̂(s, a) for every stored step in one call and recomputes returns and
advantages, so the result equals per-step relabelling at a fraction of the calls.
"""

from __future__ import annotations

import numpy as np
import torch
from gymnasium import spaces
from stable_baselines3.common.callbacks import BaseCallback
from stable_baselines3.common.on_policy_algorithm import OnPolicyAlgorithm

from preflab.envs import flatten_actions, model_obs
from preflab.policy.reward_wrapper import RewardFn


class RolloutRelabel(BaseCallback):
    """SB3 callback: add the learned reward to a finished rollout buffer, then redo GAE."""

    def __init__(self, reward_fn: RewardFn) -> None:
        super().__init__()
        self.reward_fn = reward_fn

    def _on_step(self) -> bool:
        return True

    def _on_rollout_end(self) -> None:
        model = self.model
        assert isinstance(model, OnPolicyAlgorithm), "a rollout buffer is on-policy (PPO, A2C)"
        buf = model.rollout_buffer
        n_steps, n_envs = buf.rewards.shape
        space_o = model.observation_space
        shape_o = space_o.shape
        assert shape_o is not None, "SB3 buffers hold observations of a fixed shape"
        obs = model_obs(buf.observations.reshape(n_steps * n_envs, *shape_o), space_o)
        acts = buf.actions.reshape(n_steps * n_envs, -1)
        space = model.action_space
        if isinstance(space, spaces.Box):  # the env received clipped actions
            acts = np.clip(acts, space.low, space.high)
        acts = flatten_actions(acts, space)
        learned = np.asarray(self.reward_fn(obs, acts, obs), np.float32).reshape(n_steps, n_envs)
        buf.rewards += learned
        values = self.locals["values"]  # SB3's PPO: a tensor (maybe on the GPU); SBX's: an array
        if not isinstance(values, torch.Tensor):
            values = torch.as_tensor(np.asarray(values))
        buf.compute_returns_and_advantage(last_values=values, dones=self.locals["dones"])
