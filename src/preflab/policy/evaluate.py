"""Evaluation: true returns of a policy; reward-model accuracy and correlation on held-out pairs."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import numpy as np
import torch

from preflab.env_families import OTHER, family_of
from preflab.envs import EnvSpec, flatten_actions, make_env, model_obs
from preflab.errors import ConfigError
from preflab.records import Segment
from preflab.reward.batch import SegmentBatch
from preflab.reward.ensemble import RewardEnsemble

EVAL_SEED_OFFSET = 10_000
"""A run's evaluations reset episode k with ``EVAL_SEED_OFFSET + seed + k`` (``preflab eval``
and ``preflab record`` start from the same seeds by default)."""


@dataclass(frozen=True)
class Evaluation:
    """A policy's true returns over fresh episodes, and its success rate where the env says."""

    mean: float
    """Mean true (env) return."""
    std: float
    """Standard deviation of the return over the episodes."""
    success_rate: float | None = None
    """Share of episodes in which the task was solved at some step (``info['success']``, as
    Meta-World reports it); None for envs that report no success."""
    target_mean: float | None = None
    """Mean target return (the ``target`` function's score of each episode); None without one."""
    target_std: float | None = None
    """Its standard deviation over the episodes; None without a target."""


def evaluate_episodes(
    agent: Any,
    env_id: EnvSpec,
    *,
    n_episodes: int,
    seed: int,
    deterministic: bool = True,
    max_steps: int = 100_000,
    target: Callable[[Segment], float] | None = None,
) -> Evaluation:
    """True returns (and success) of ``agent`` over ``n_episodes`` episodes seeded ``seed + k``;
    with ``target``, also each episode's target return: ``target`` of the whole episode recorded
    as one segment (its observations and actions as the recorder keeps them)."""
    family = family_of(env_id) if isinstance(env_id, str) else OTHER
    own = family.evaluator()  # Atari: whole games with the training wrappers and frame stack
    if own is not None:
        assert isinstance(env_id, str)
        why = family.unsupported("eval_target", env_id) if target is not None else None
        if why:
            raise ConfigError(why)
        mean, std = own(
            agent, env_id, n_episodes=n_episodes, seed=seed, deterministic=deterministic
        )
        return Evaluation(mean=float(mean), std=float(std))
    env = make_env(env_id)
    returns: list[float] = []
    targets: list[float] = []
    solved: list[bool | None] = []
    for k in range(n_episodes):
        obs, _ = env.reset(seed=seed + k)
        total, done, steps, success = 0.0, False, 0, None
        seen: list[np.ndarray] = []
        acts: list[np.ndarray] = []
        rews: list[float] = []
        while not done and steps < max_steps:
            act, _ = agent.predict(obs, deterministic=deterministic)
            if target is not None:
                seen.append(model_obs(np.asarray(obs)[None], env.observation_space)[0])
                acts.append(flatten_actions(np.asarray(act)[None], env.action_space)[0])
            obs, r, term, trunc, info = env.step(act)
            total += float(r)
            rews.append(float(r))
            solved_now = family.step_success(info)  # Meta-World: info['success']
            if solved_now is not None:
                success = bool(success) or solved_now
            done = term or trunc
            steps += 1
        returns.append(total)
        solved.append(success)
        if target is not None and steps:
            episode = Segment(
                id=f"eval-{seed + k}",
                obs=np.stack(seen),
                acts=np.stack(acts),
                true_rewards=np.asarray(rews, np.float32),
                env_id=env_id if isinstance(env_id, str) else "",
                episode=k,
            )
            targets.append(float(target(episode)))
    env.close()
    known = [s for s in solved if s is not None]
    rate = float(np.mean(known)) if len(known) == len(solved) else None
    return Evaluation(
        mean=float(np.mean(returns)),
        std=float(np.std(returns)),
        success_rate=rate,
        target_mean=float(np.mean(targets)) if targets else None,
        target_std=float(np.std(targets)) if targets else None,
    )


def evaluate_policy(
    agent: Any,
    env_id: EnvSpec,
    *,
    n_episodes: int,
    seed: int,
    deterministic: bool = True,
    max_steps: int = 100_000,
) -> tuple[float, float]:
    """Mean and std of the true (env) return over ``n_episodes`` fresh episodes
    (:func:`evaluate_episodes`)."""
    e = evaluate_episodes(
        agent,
        env_id,
        n_episodes=n_episodes,
        seed=seed,
        deterministic=deterministic,
        max_steps=max_steps,
    )
    return e.mean, e.std


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
        float(np.corrcoef(learned, true_returns)[0, 1])
        if np.std(true_returns) > 0 and np.std(learned) > 0
        else float("nan")
    )
    return acc, corr


# ----- per-episode returns (preflab eval) ---------------------------------------------------
@dataclass(frozen=True, kw_only=True)
class EpisodeReturn:
    """One evaluation episode of a policy."""

    seed: int
    """The seed of the episode's reset."""
    true_return: float
    """Sum of the env's own reward."""
    learned_return: float
    """Sum of the learned reward model's reward (:meth:`RewardEnsemble.reward`) over the same
    steps, on the scale the policy was trained on; NaN without a reward model."""
    steps: int
    """Steps until the episode ended (or ``max_steps``)."""


def episode_returns(
    agent: Any,
    env_id: EnvSpec,
    *,
    n_episodes: int,
    seed: int,
    deterministic: bool = True,
    reward_model: RewardEnsemble | None = None,
    max_steps: int = 100_000,
) -> list[EpisodeReturn]:
    """Each of ``n_episodes`` fresh episodes (episode ``k`` reset with ``seed + k``, as
    :func:`evaluate_policy`): its true return and the learned reward's return. A stochastic
    policy samples from a torch generator seeded with ``seed`` (torch's global RNG is left as it
    was), so every call gives the same episodes."""
    env = make_env(env_id)
    out: list[EpisodeReturn] = []
    try:
        with torch.random.fork_rng(devices=[]):
            torch.manual_seed(seed)
            for k in range(n_episodes):
                obs, _ = env.reset(seed=seed + k)
                observations, actions, total, done, steps = [], [], 0.0, False, 0
                while not done and steps < max_steps:
                    act, _ = agent.predict(obs, deterministic=deterministic)
                    observations.append(obs)
                    actions.append(act)
                    obs, r, term, trunc, _ = env.step(act)
                    total += float(r)
                    done = term or trunc
                    steps += 1
                learned = float("nan")
                if reward_model is not None and steps:
                    o = model_obs(np.asarray(observations), env.observation_space)
                    a = flatten_actions(np.asarray(actions), env.action_space)
                    learned = float(np.sum(reward_model.reward(o, a), dtype=np.float64))
                out.append(
                    EpisodeReturn(
                        seed=seed + k, true_return=total, learned_return=learned, steps=steps
                    )
                )
    finally:
        env.close()
    return out
