"""Evaluation: true returns of a policy; reward-model accuracy and correlation on held-out pairs."""

from __future__ import annotations

from typing import Any

import numpy as np
from scipy import stats

from preflab.envs import EnvSpec, is_atari_id, make_env
from preflab.reward.batch import SegmentBatch
from preflab.reward.ensemble import RewardEnsemble


def evaluate_policy(
    agent: Any,
    env_id: EnvSpec,
    *,
    n_episodes: int,
    seed: int,
    deterministic: bool = True,
    max_steps: int = 100_000,
) -> tuple[float, float]:
    """Mean and std of the true (env) return over ``n_episodes`` fresh episodes."""
    if isinstance(env_id, str) and is_atari_id(env_id):  # pixels: the training wrappers + stack
        from preflab.pixels.atari import evaluate_atari

        return evaluate_atari(
            agent, env_id, n_episodes=n_episodes, seed=seed, deterministic=deterministic
        )
    env = make_env(env_id)
    returns = []
    for k in range(n_episodes):
        obs, _ = env.reset(seed=seed + k)
        total, done, steps = 0.0, False, 0
        while not done and steps < max_steps:
            act, _ = agent.predict(obs, deterministic=deterministic)
            obs, r, term, trunc, _ = env.step(act)
            total += float(r)
            done = term or trunc
            steps += 1
        returns.append(total)
    env.close()
    return float(np.mean(returns)), float(np.std(returns))


def reward_agreement(
    ensemble: RewardEnsemble,
    batch: SegmentBatch,
    true_returns: np.ndarray,
    rng: np.random.Generator,
    n_pairs: int = 2000,
) -> tuple[float, float]:
    """(accuracy, correlation): share of random pairs whose preferred segment the ensemble's mean
    return ranks first (ties in truth excluded), and Pearson r of learned vs true returns."""
    n = len(batch)
    if n < 2:
        return float("nan"), float("nan")
    learned = ensemble.segment_returns(batch, normalise=True).mean(0)
    i = rng.integers(0, n, n_pairs)
    j = (i + rng.integers(1, n, n_pairs)) % n
    dt = true_returns[i] - true_returns[j]
    keep = dt != 0
    acc = (
        float(np.mean(np.sign(learned[i] - learned[j])[keep] == np.sign(dt[keep])))
        if keep.any()
        else float("nan")
    )
    corr = (
        float(stats.pearsonr(learned, true_returns)[0])
        if np.std(true_returns) > 0 and np.std(learned) > 0
        else float("nan")
    )
    return acc, corr
