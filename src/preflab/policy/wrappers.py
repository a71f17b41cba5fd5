"""A run's learned reward in any gymnasium env, for your own training script.

``LearnedReward(env, RUN_DIR)`` replaces the env's reward with the reward the run's policy was
trained on (:class:`preflab.policy.shaping.PolicyReward`, the loop's own code: members
normalised and averaged in ``direct`` mode; σ(s_{t+1}) − σ(s_t) of a state-only model in
``potential`` mode). The env's own reward stays in ``info["true_reward"]``::

    env = LearnedReward(gymnasium.make("Pendulum-v1"), "runs/pendulum")
    PPO("MlpPolicy", env).learn(100_000)
"""

from __future__ import annotations

from pathlib import Path
from typing import Any, Literal

import gymnasium as gym
import numpy as np

from preflab.envs import flatten_actions, model_obs
from preflab.errors import ConfigError
from preflab.policy.shaping import PolicyReward, PolicyRewardConfig
from preflab.reward.ensemble import RewardEnsemble
from preflab.reward.modelfiles import load_reward_model


class LearnedReward(gym.Wrapper[Any, Any, Any, Any]):
    """``env`` with a learned reward (see the module docstring)."""

    def __init__(
        self,
        env: gym.Env[Any, Any],
        model: str | Path | RewardEnsemble,
        *,
        mode: Literal["direct", "potential"] = "direct",
        discount: float = 1.0,
        step_penalty: float = 0.0,
    ) -> None:
        super().__init__(env)
        ensemble = model if isinstance(model, RewardEnsemble) else load_reward_model(model)
        if mode == "potential" and ensemble.config.use_actions:
            raise ConfigError(
                "mode='potential' needs a state-only reward model (trained with "
                "--reward.no-use-actions); this one uses actions: use mode='direct'"
            )
        config = PolicyRewardConfig(mode=mode, discount=discount, step_penalty=step_penalty)
        self.reward_fn = PolicyReward(config, model=ensemble)
        self.reward_fn.fitted = True
        self._obs: np.ndarray | None = None
        self._t = 0

    def reset(self, **kwargs: Any) -> tuple[Any, dict[str, Any]]:
        obs, info = self.env.reset(**kwargs)
        self._obs = model_obs(np.asarray(obs)[None], self.observation_space)
        self._t = 0
        return obs, info

    def step(self, action: Any) -> tuple[Any, float, bool, bool, dict[str, Any]]:
        if self._obs is None:
            raise gym.error.ResetNeeded("call reset() before step()")
        obs, true_r, term, trunc, info = self.env.step(action)
        nxt = model_obs(np.asarray(obs)[None], self.observation_space)
        acts = flatten_actions(np.asarray(action)[None], self.action_space)
        r = self.reward_fn.step(self._obs, acts, nxt, np.array([self._t]))
        info = {**info, "true_reward": float(true_r)}
        self._obs = nxt
        self._t += 1
        return obs, float(r[0]), term, trunc, info
