"""Probe: is the goal the maximum of the MultiLock score model σ? (paper 004, issue #11 part 4)

With the potential-difference reward alone, a return telescopes to about σ(last state) − σ(first
state), so the policy heads for σ's maximum; unless that is the goal it never succeeds. This
probe fits σ exactly as ``preflab bench llm_fig7`` does (``score_fit``, 64×64 members,
6,000 pairs from ``sample_transitions``, identical pairs replaced; noisy-ranker labels as the
mean of N answers) and, per evaluation layout of the bench (seeds 10,000 + 100·seed + i),
solves the σ-shaped MDP exactly: value iteration over every (cell, direction, stage) with
reward σ(s') − σ(s), discount 0.99 · γ_r (γ_r = 0.99: the reward discount γ_r^t scales every
reward after t alike, so it only adds to the discount), then follows the greedy policy from the
layout's start for n_max steps. It reports the share of layouts where σ's optimal policy
reaches the goal (an upper bound for PPO on that σ; the exact −cost-to-go scores 1) and where
it stops otherwise (by stage; "next to the goal" = in front of it, facing it).

Arms: ``paper`` (one member, uniform pairs, raw inputs), ``abs`` (|x| appended to σ's inputs),
``target`` (40% of the pairs in front of their stage's key, door or goal), ``both``; with
``--members``. Usage:
PYTHONPATH=src python benchmarks/probes/sigma_planning.py --seeds 0 1 2 --accuracy 0.6 --queries 10
"""

from __future__ import annotations

import argparse
from collections import Counter
from dataclasses import dataclass
from functools import cache

import gymnasium as gym
import numpy as np
import torch
from llm_sigma import ENV, LAY, pairs  # the ordering probe's pairs (run from this folder)

import preflab.envs  # noqa: F401  (registers the grid worlds)
from preflab.env_families.grids import DIR_VEC, LockGridEnv
from preflab.llm.progress import progress
from preflab.llm.ranker import noisy_confidences
from preflab.llm.sampling import randomize_grid_state, stage_cells
from preflab.reward import LabelBatch, RewardEnsemble, RewardTrainer, SegmentBatch
from preflab_bench.llm_fig7 import fig7_config

DISCOUNT = 0.99 * 0.99
ARMS = {"paper": (0.0, False), "abs": (0.0, True), "target": (0.4, False), "both": (0.4, True)}


def fit_sigma(
    a: np.ndarray, b: np.ndarray, p: np.ndarray, members: int, abs_inputs: bool, seed: int
) -> RewardEnsemble:
    """σ as the bench fits it: one-state segments, Bradley–Terry on the soft labels."""
    cfg = fig7_config(
        ENV, "potential", seed, pairs=len(a), steps=1, eval_episodes=1, members=members,
        abs_inputs=abs_inputs,
    )  # fmt: skip
    ens = RewardEnsemble(LAY.obs_dim, 0, cfg.reward, seed=seed)
    segs = SegmentBatch.from_arrays(np.concatenate([a, b])[:, None, :])
    idx = np.arange(len(a))
    labels = LabelBatch.from_arrays(idx, idx + len(a), p)
    RewardTrainer(ens, cfg.fit).fit(segs, labels, np.random.default_rng([seed, 3]))
    return ens


def place(env: LockGridEnv, seed: int, stage: int, cell: tuple[int, int], d: int) -> np.ndarray:
    """Reset layout ``seed`` and put the agent at ``cell`` facing ``d`` in ``stage``."""
    env.reset(seed=seed)
    randomize_grid_state(env, np.random.default_rng(0), phase=stage)
    env.agent_pos, env.agent_dir, env.step_count = cell, d, 0
    return env.gen_obs()


@dataclass(frozen=True)
class LayoutMDP:
    """Every (cell, direction, stage) of one layout, its observation and successor per action."""

    obs: np.ndarray
    """(states + 1, obs_dim): the last row is the goal (absorbing: the episode ends there)."""
    nxt: np.ndarray
    """(states, 4) successor index per action."""
    start: int
    """The layout's start state."""
    stops: list[str]
    """Per state: 'next to the goal' when it faces the goal, else 'stage k'."""


@cache
def layout_mdp(seed: int) -> LayoutMDP:
    """The MDP of evaluation layout ``seed`` (built once, shared by every σ)."""
    env = gym.make(ENV).unwrapped
    assert isinstance(env, LockGridEnv)
    index: dict[tuple[tuple[int, int], int, int], int] = {}
    for stage in range(2 * LAY.n_locks + 1):
        place(env, seed, stage, (1, 1), 0)
        goal_cell = tuple(int(v) for v in env._goal)
        for cell in (c for c in stage_cells(env, stage) if c != goal_cell):
            for d in range(4):
                index[(cell, d, stage)] = len(index)
    goal = len(index)
    obs = np.zeros((goal + 1, LAY.obs_dim), np.float32)
    nxt = np.zeros((goal, 4), int)
    for (cell, d, stage), i in index.items():
        obs[i] = place(env, seed, stage, cell, d)
        for act in range(4):
            place(env, seed, stage, cell, d)
            o, _r, terminated, _t, _i = env.step(act)
            if terminated:
                nxt[i, act], obs[goal] = goal, o
            else:
                s = env.grid_state()
                nxt[i, act] = index[(s.agent, s.direction, s.phase)]
    env.reset(seed=seed)
    start = index[(tuple(int(v) for v in env.agent_pos), int(env.agent_dir), 0)]
    goal_cell = tuple(int(v) for v in env._goal)
    env.close()
    stops = [
        "next to the goal"
        if (x + DIR_VEC[d][0], y + DIR_VEC[d][1]) == goal_cell
        else f"stage {stage}"
        for ((x, y), d, stage) in index
    ]
    return LayoutMDP(obs=obs, nxt=nxt, start=start, stops=stops)


def plan(ens: RewardEnsemble, seed: int) -> str:
    """Where σ's optimal policy on layout ``seed`` ends: 'goal', 'next to the goal' or a stage."""
    mdp = layout_mdp(seed)
    goal = len(mdp.nxt)
    sigma = ens.predict(mdp.obs, normalise=False).mean(0)
    reward = sigma[mdp.nxt] - sigma[:goal, None]
    value = np.zeros(goal + 1)
    for _ in range(5000):
        new = np.append((reward + DISCOUNT * value[mdp.nxt]).max(1), 0.0)
        if np.max(np.abs(new - value)) < 1e-9:
            break
        value = new
    s = mdp.start
    for _ in range(LAY.max_steps):
        s2 = mdp.nxt[s, int(np.argmax(reward[s] + DISCOUNT * value[mdp.nxt[s]]))]
        if s2 == goal:
            return "goal"
        s = s2
    return mdp.stops[s]


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--seeds", type=int, nargs="+", default=[0, 1, 2])
    ap.add_argument("--accuracy", type=float, default=0.6)
    ap.add_argument("--queries", type=int, default=10)
    ap.add_argument("--members", type=int, nargs="+", default=[1, 5])
    ap.add_argument("--arms", nargs="+", default=list(ARMS), choices=list(ARMS))
    ap.add_argument("--layouts", type=int, default=30, help="evaluation layouts per seed")
    args = ap.parse_args()
    torch.set_num_threads(1)
    acc = "exact" if args.accuracy == 1.0 else f"{args.accuracy:.0%} × {args.queries}"
    print(
        "| seed | rankings | σ | members | σ's optimal policy reaches the goal | where it stops |"
    )
    print("| --- | --- | --- | --- | --- | --- |")
    for seed in args.seeds:
        for arm in args.arms:
            at_target, abs_inputs = ARMS[arm]
            a, b = pairs(seed, at_target)
            pa, pb = progress(a, ENV), progress(b, ENV)
            truth = np.where(pa > pb, 1.0, np.where(pa < pb, 0.0, 0.5))
            p = noisy_confidences(
                truth, args.accuracy, args.queries, np.random.default_rng([seed, 7])
            )
            for members in args.members:
                ens = fit_sigma(a, b, p, members, abs_inputs, seed)
                ends = Counter(plan(ens, 10_000 + 100 * seed + i) for i in range(args.layouts))
                where = ", ".join(f"{k} {v}" for k, v in sorted(ends.items()) if k != "goal")
                print(
                    f"| {seed} | {acc} | {arm} | {members} | {ends['goal'] / args.layouts:.2f} "
                    f"| {where or '—'} |",
                    flush=True,
                )


if __name__ == "__main__":
    main()
