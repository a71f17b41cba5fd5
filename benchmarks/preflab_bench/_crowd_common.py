"""Helpers shared by the crowd benchmarks: segment pools and random pairs."""

from __future__ import annotations

import numpy as np
import torch
from stable_baselines3 import PPO

from preflab.envs import make_vec_env
from preflab.policy.rollout import collect_segments
from preflab.records import Segment
from preflab.seeding import derive_seed


def segment_pool(
    env_id: str,
    rng: np.random.Generator,
    *,
    ppo_steps: int,
    steps: int,
    segment_length: int = 50,
    ppo_n_steps: int = 512,
    **env_kwargs: object,
) -> list[Segment]:
    """Segments of a random policy and of a briefly trained PPO policy (true reward; rollouts
    of ``ppo_n_steps`` steps per env, of the 4 envs)."""
    torch.set_num_threads(1)
    venv = make_vec_env(env_id, 4, derive_seed(rng), **env_kwargs)
    segs = collect_segments(venv, None, steps // 4, segment_length, rng, env_id=env_id)
    if ppo_steps > 0:
        agent = PPO(
            "MlpPolicy", venv, seed=derive_seed(rng), verbose=0, device="cpu", n_steps=ppo_n_steps
        )
        agent.learn(ppo_steps)
        segs += collect_segments(venv, agent, steps // 4, segment_length, rng, env_id=env_id)
    venv.close()
    return segs


def random_pairs(n: int, k: int, rng: np.random.Generator) -> np.ndarray:
    i = rng.integers(0, n, size=k)
    j = (i + rng.integers(1, n, size=k)) % n
    return np.stack([i, j], axis=1)
