"""The new-behaviour arms of ``preflab bench studio_session --prefer backwards``: the same PPO
trained by SB3 directly on the target (reward = −x velocity), the untrained policy, and the
target metric (backwards speed) of any of them and of the studio run's saved policy."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import gymnasium as gym
import numpy as np
from stable_baselines3 import PPO
from stable_baselines3.common.base_class import BaseAlgorithm

from preflab.envs import make_env, make_vec_env

NOT_ARGS = ("rollout_buffer_class", "rollout_buffer_kwargs")
"""hyperparams.json entries that are not PPO(...) arguments here (SB3's defaults are used)."""


class BackwardsReward(gym.Wrapper[Any, Any, Any, Any]):
    """Replaces the env's reward with the target: −x velocity of the torso (m/s) per step."""

    def step(self, action: Any) -> tuple[Any, float, bool, bool, dict[str, Any]]:
        obs, _r, term, trunc, info = self.env.step(action)
        return obs, -float(info["x_velocity"]), term, trunc, info


def backwards_speed(
    agent: BaseAlgorithm, env_id: str, *, n_episodes: int, seed: int
) -> tuple[float, float]:
    """Mean and std over episodes of −(mean x velocity), deterministic actions."""
    env = make_env(env_id)
    speeds = []
    for k in range(n_episodes):
        obs, _ = env.reset(seed=seed + k)
        vel, done = [], False
        while not done:
            act, _ = agent.predict(obs, deterministic=True)
            obs, _r, term, trunc, info = env.step(act)
            vel.append(float(info["x_velocity"]))
            done = term or trunc
        speeds.append(-float(np.mean(vel)))
    env.close()
    return float(np.mean(speeds)), float(np.std(speeds))


def same_ppo(run_dir: Path, seed: int, n_envs: int) -> PPO:
    """PPO with the studio run's hyperparameters (``hyperparams.json``) on the target reward."""
    record = json.loads((run_dir / "hyperparams.json").read_text())
    hyper = {k: v for k, v in record["hyperparams"].items() if k not in NOT_ARGS}
    venv = make_vec_env(
        lambda: BackwardsReward(gym.make(record["env_id"])), n_envs=n_envs, seed=seed
    )
    return PPO("MlpPolicy", venv, seed=seed, device="cpu", **hyper)


def direct_arms(
    run_dir: Path, *, seed: int, steps: int, n_envs: int, episodes: int
) -> dict[str, Any]:
    """Backwards speed of the studio run's policy, the untrained policy and PPO trained on the
    target for ``steps`` env steps (same seed and hyperparameters)."""
    env_id = json.loads((run_dir / "hyperparams.json").read_text())["env_id"]
    studio = PPO.load(run_dir / "policy.zip", device="cpu")
    out = {"studio": backwards_speed(studio, env_id, n_episodes=episodes, seed=10_000 + seed)}
    agent = same_ppo(run_dir, seed, n_envs)
    out["untrained"] = backwards_speed(agent, env_id, n_episodes=episodes, seed=10_000 + seed)
    agent.learn(total_timesteps=steps)
    out["direct"] = backwards_speed(agent, env_id, n_episodes=episodes, seed=10_000 + seed)
    s, u, d = out["studio"][0], out["untrained"][0], out["direct"][0]
    return {
        "env_id": env_id,
        "steps": steps,
        **{f"{k}_speed": v[0] for k, v in out.items()},
        **{f"{k}_speed_std": v[1] for k, v in out.items()},
        "toward_target": (s - u) / (d - u) if d != u else float("nan"),
    }
