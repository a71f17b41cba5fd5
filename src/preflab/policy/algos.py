"""The policy learners PrefLab knows by name, and which of them are on-policy."""

from __future__ import annotations

from typing import Literal, get_args

Algo = Literal["ppo", "sac", "td3", "ddpg", "a2c", "trpo", "dqn"]
"""A learner's name (``--algo``)."""
ALGOS: tuple[str, ...] = get_args(Algo)
"""Every learner's name."""
ON_POLICY_ALGOS: tuple[str, ...] = ("ppo", "a2c", "trpo")
"""Learners that train on their own fresh rollouts (no replay buffer); the rest are off-policy."""


def is_on_policy(algo: str) -> bool:
    """True for on-policy learners (PPO, A2C, TRPO): the one test of on- vs off-policy by name."""
    return algo in ON_POLICY_ALGOS
