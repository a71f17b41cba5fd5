"""The policy learners PrefLab knows by name, the libraries that run them, and which of them
are on-policy."""

from __future__ import annotations

from typing import Literal, get_args

Algo = Literal["ppo", "sac", "td3", "ddpg", "a2c", "trpo", "dqn", "tqc", "crossq"]
"""A learner's name (``--algo``)."""
ALGOS: tuple[str, ...] = get_args(Algo)
"""Every learner's name."""
ON_POLICY_ALGOS: tuple[str, ...] = ("ppo", "a2c", "trpo")
"""Learners that train on their own fresh rollouts (no replay buffer); the rest are off-policy."""
CONTINUOUS_ONLY: tuple[str, ...] = ("sac", "td3", "ddpg", "tqc", "crossq")
"""Learners whose actions must be continuous (a Box action space)."""
ACTOR_CRITIC_OFF_POLICY: tuple[str, ...] = CONTINUOUS_ONLY
"""Off-policy actor-critics: the learners PEBBLE's unsupervised pre-training can drive."""

Backend = Literal["sb3", "sbx"]
"""The library that runs the learner (``--backend``): Stable-Baselines3 (with sb3-contrib for
TRPO, TQC and CrossQ) on torch, or SBX (Stable-Baselines in JAX, CPU)."""
BACKENDS: tuple[str, ...] = get_args(Backend)
"""Every backend's name."""
SBX_ALGOS: tuple[str, ...] = ("sac", "td3", "ddpg", "ppo", "tqc", "crossq")
"""The learners SBX has (its DQN lacks the whole-run ε schedule PrefLab's DQN keeps)."""


def is_on_policy(algo: str) -> bool:
    """True for on-policy learners (PPO, A2C, TRPO): the one test of on- vs off-policy by name."""
    return algo in ON_POLICY_ALGOS
