"""Default hyperparameters per algorithm (overridable with TrainConfig.agent_kwargs)."""

from __future__ import annotations

from typing import Any

PRESETS: dict[str, dict[str, Any]] = {
    # imitation's documented Pendulum settings for PPO (so side-by-side runs are like for like)
    "ppo": {"n_steps": 256, "batch_size": 64, "clip_range": 0.1, "ent_coef": 0.01, "gae_lambda": 0.95,
            "n_epochs": 10, "gamma": 0.97, "learning_rate": 2e-3},
    "sac": {"learning_rate": 1e-3, "buffer_size": 200_000, "batch_size": 256, "learning_starts": 0,
            "train_freq": 1, "gradient_steps": 1, "gamma": 0.98, "tau": 0.02},
    "td3": {"learning_rate": 1e-3, "learning_starts": 0, "gamma": 0.98},
    "ddpg": {"learning_rate": 1e-3, "learning_starts": 0, "gamma": 0.98},
    "a2c": {},
    "trpo": {"n_steps": 1024, "gamma": 0.99},
}


def preset(algo: str, n_envs: int) -> dict[str, Any]:
    """A copy of the preset; PPO's n_steps is per env, so it is divided by ``n_envs`` (≥ 8 kept)."""
    p = dict(PRESETS.get(algo, {}))
    if algo == "ppo":
        p["n_steps"] = max(8, 2048 // n_envs) if n_envs > 1 else 2048
    return p
