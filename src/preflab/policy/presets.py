"""Default hyperparameters per algorithm (overridable with TrainConfig.agent_kwargs)."""

from __future__ import annotations

from typing import Any

from preflab.policy.algos import is_on_policy

PRESETS: dict[str, dict[str, Any]] = {
    # SB3's defaults (made for MuJoCo locomotion); n_steps is adjusted by ``preset``
    "ppo": {"n_steps": 2048, "batch_size": 64},
    "sac": {
        "learning_rate": 1e-3,
        "buffer_size": 200_000,
        "batch_size": 256,
        "learning_starts": 0,
        "train_freq": 1,
        "gradient_steps": 1,
        "gamma": 0.98,
        "tau": 0.02,
    },
    "td3": {"learning_rate": 1e-3, "learning_starts": 0, "gamma": 0.98},
    "ddpg": {"learning_rate": 1e-3, "learning_starts": 0, "gamma": 0.98},
    "a2c": {},
    "trpo": {"n_steps": 1024, "gamma": 0.99},
}


IMITATION_PENDULUM_PPO: dict[str, Any] = {
    "clip_range": 0.1,
    "ent_coef": 0.01,
    "gae_lambda": 0.95,
    "n_epochs": 10,
    "gamma": 0.97,
    "learning_rate": 2e-3,
    "batch_size": 64,
}
"""imitation's documented Pendulum-v1 PPO settings (n_steps = 2048 // n_envs), for like-for-like runs."""


def preset(
    algo: str,
    n_envs: int,
    steps_per_round: int | None = None,
    *,
    overrides: dict[str, Any] | None = None,
) -> dict[str, Any]:
    """A copy of the preset. On-policy rollouts (n_steps per env) are 2048 steps in all, or one
    feedback round when rounds are shorter, so that every round ends on a rollout boundary."""
    p = dict(PRESETS.get(algo, {})) | (overrides or {})
    if is_on_policy(algo) and "n_steps" in p:
        total = min(2048, steps_per_round or 2048)
        p["n_steps"] = max(8, total // n_envs)
        if "batch_size" in p:
            p["batch_size"] = min(p["batch_size"], p["n_steps"] * n_envs)
    return p
