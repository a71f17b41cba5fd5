"""Why Crowd-PrefRL Fig. 5's per-group label errors are ~10x the paper's here (issue 63, item 2).

``crowd_fig5`` scores each group's SML labels against the group's objective summed over the
whole trajectory (undiscounted), while the paper's users (and ours) judge by a *discounted*
return, Σ_t γ^(H−1−t) r_t with γ ∈ [0.98, 1], over trajectories of 100–1,000 steps: a user with
γ = 0.98 gives the first step of a 114-step trajectory a weight of 0.98^113 ≈ 0.10 and of a
507-step one ≈ 0.00004. Where a pair's order by the end of the trajectories differs from its
order by the whole, the *whole* group leans the same wrong way; more users cannot remove that
error, only a different truth or shorter trajectories can.

This bench replays ``crowd_fig5``'s runs (same seed → the same PPO agent, trajectories, pairs,
users and votes; the replayed SML group errors are printed beside the registered ones to show it)
and splits each true group's label error into:

* **observed**: SML over the group's own members (the true groups, not the mixture's);
* **population floor**: the label of the group's *expected* vote, sign Σ_u E[vote_u] with
  E[vote_u] = (1 − 2ε_u)(2σ(β_u Δ_u / scale) − 1) and Δ_u the user's discounted difference — what
  any aggregator of these users tends to as each answers more often; its error against the
  undiscounted truth is systematic;
* **floor without myopia**: the same with γ = 1 for every user (what the error would be if users
  judged the whole trajectory);
* **order flips at γ = 0.99**: the share of pairs whose discounted order (the middle of the
  paper's γ range) differs from the undiscounted one.

Writes ``OUT/crowd_fig5_explained.md`` and ``OUT/crowd_fig5_explained_runs.jsonl`` (one row per
seed and checkpoint, with its command). Exploratory: an explanation, not an entry; no verdict.
Run: ``preflab bench crowd_fig5_explain --seeds 1 3`` (each seed trains PPO to 100k steps,
~12 min on 2 cores).
"""

from __future__ import annotations

import argparse
import copy
import logging
import time
from pathlib import Path
from typing import Any

import numpy as np
import torch
from stable_baselines3 import PPO
from stable_baselines3.common.env_util import make_vec_env
from stable_baselines3.common.vec_env import DummyVecEnv

from preflab.aggregate import sml
from preflab.crowd import CrowdConfig, User, answer_pairs, sample_users, truth_labels
from preflab.crowd.users import discounted_returns
from preflab.rundir.reporting import append_jsonl, md_table, read_jsonl
from preflab.seeding import derive_seed
from preflab_bench._crowd_common import random_pairs
from preflab_bench._report import RESULTS, command, header, write_report
from preflab_bench.crowd_fig5 import (
    checkpoint_study,
    front_pad,
    make_mo_hopper,
    rollouts,
    smoke_ppo,
)

log = logging.getLogger(__name__)


def expected_votes(
    users: list[User], ra: np.ndarray, rb: np.ndarray, *, return_scale: float = 1.0
) -> np.ndarray:
    """(users, pairs) E[vote] ∈ (−1, 1) under the stochastic preference model with mistakes:
    P(a) = σ(β Δ / scale) with Δ the user's discounted return difference, flipped w.p. ε."""
    diff = discounted_returns(users, ra) - discounted_returns(users, rb)
    beta = np.array([u.beta for u in users])[:, None]
    eps = np.array([u.epsilon for u in users])[:, None]
    p_a = 1.0 / (1.0 + np.exp(-np.clip(beta * diff / return_scale, -500, 500)))
    return (1.0 - 2.0 * eps) * (2.0 * p_a - 1.0)


def floor_error(
    users: list[User], ra: np.ndarray, rb: np.ndarray, truth: np.ndarray, *, return_scale: float
) -> float:
    """Error against ``truth`` (±1; ties skipped) of the sign of the users' summed expected vote."""
    label = np.sign(expected_votes(users, ra, rb, return_scale=return_scale).sum(0))
    decided = truth != 0
    return float((label[decided] != truth[decided]).mean()) if decided.any() else 0.0


def order_flips(ra: np.ndarray, rb: np.ndarray, gamma: float) -> float:
    """Share of decided pairs whose order by Σ γ^(H−1−t) r_t differs from the undiscounted one."""
    one = User(id="g", beta=1.0, gamma=gamma, epsilon=0.0)
    disc = np.sign((discounted_returns([one], ra) - discounted_returns([one], rb))[0])
    truth = truth_labels(ra, rb)
    decided = truth != 0
    return float((disc[decided] != truth[decided]).mean()) if decided.any() else 0.0


def explain_checkpoint(
    trajs: list[np.ndarray],
    rng: np.random.Generator,
    n_pairs: int,
    n_users: int,
    n_minority: int,
    return_scale: float,
) -> dict[str, Any]:
    """Replay ``checkpoint_study``'s draws from a copy of ``rng`` and split each true group's error
    (``rng`` then advances exactly as ``checkpoint_study`` advances it)."""
    replay = copy.deepcopy(rng)
    registered = checkpoint_study(trajs, rng, n_pairs, n_users, n_minority, return_scale)
    pairs = random_pairs(len(trajs), n_pairs, replay)
    h = max(len(t) for t in trajs)
    ra = {g: front_pad(trajs, pairs[:, 0], g, h) for g in (0, 1)}
    rb = {g: front_pad(trajs, pairs[:, 1], g, h) for g in (0, 1)}
    users = sample_users(CrowdConfig(n_users=n_users, n_minority=n_minority), replay)
    votes = answer_pairs(users, ra, rb, replay, return_scale=return_scale)
    groups = np.array([u.group for u in users])
    out: dict[str, Any] = {
        "mean_len": float(np.mean([len(t) for t in trajs])),
        "registered_group_err": [
            [int(n), int(obj), round(float(e), 3)] for _g, n, obj, e in registered["group_err"]
        ],
        "groups": [],
    }
    for g, name in ((0, "forward"), (1, "height")):
        idx = np.flatnonzero(groups == g)
        members = [users[i] for i in idx]
        truth = truth_labels(ra[g], rb[g])
        observed = sml(votes[idx], diagonal="auto").labels
        decided = truth != 0
        no_myopia = [
            User(id=u.id, beta=u.beta, gamma=1.0, epsilon=u.epsilon, group=u.group) for u in members
        ]
        out["groups"].append(
            {
                "objective": name,
                "users": int(idx.size),
                "observed": float((observed[decided] != truth[decided]).mean()),
                "floor": floor_error(members, ra[g], rb[g], truth, return_scale=return_scale),
                "floor_gamma1": floor_error(
                    no_myopia, ra[g], rb[g], truth, return_scale=return_scale
                ),
                "flips_099": order_flips(ra[g], rb[g], 0.99),
            }
        )
    return out


def run_seed(args: argparse.Namespace, seed: int) -> dict[int, dict[str, Any]]:
    """``crowd_fig5.study`` for one seed, with each checkpoint explained."""
    torch.set_num_threads(1)
    rng = np.random.default_rng(seed)
    venv = make_vec_env(make_mo_hopper, n_envs=1, seed=derive_seed(rng), vec_env_cls=DummyVecEnv)
    agent = PPO(
        "MlpPolicy", venv, seed=derive_seed(rng), verbose=0, device="cpu", **smoke_ppo(args)
    )
    done, out = 0, {}
    for ck in sorted(args.checkpoints):
        agent.learn(ck - done, reset_num_timesteps=False)
        done = ck
        trajs = rollouts(agent, args.trajectories, seed=10_000 + ck)
        out[ck] = explain_checkpoint(
            trajs, rng, args.pairs, args.users, args.minority, args.return_scale
        )
    return out


def parse(argv: list[str] | None) -> argparse.Namespace:
    p = argparse.ArgumentParser(
        prog="preflab bench crowd_fig5_explain", description=__doc__.split("\n\n")[0]
    )
    p.add_argument("--seeds", type=int, nargs="+", default=[1, 3])
    p.add_argument("--checkpoints", type=int, nargs="+", default=[25_000, 100_000])
    p.add_argument("--trajectories", type=int, default=100)
    p.add_argument("--pairs", type=int, default=100)
    p.add_argument("--users", type=int, default=150)
    p.add_argument("--minority", type=int, default=40)
    p.add_argument("--return-scale", type=float, default=1.0)
    p.add_argument("--out", type=Path, default=RESULTS)
    p.add_argument("--smoke", action="store_true", help="smallest budgets (the test suite)")
    p.add_argument("--report", action="store_true", help="rebuild the report from the run log only")
    args = p.parse_args(argv)
    if args.smoke:
        args.checkpoints, args.trajectories, args.pairs, args.seeds = [256], 10, 40, [1]
    args.argv = argv
    return args


def report(rows: list[dict[str, Any]]) -> str:
    table = []
    for r in rows:
        for g in r["groups"]:
            table.append(
                [
                    r["seed"],
                    r["steps"],
                    f"{r['mean_len']:.0f}",
                    f"{g['objective']} ({g['users']})",
                    f"{g['observed']:.3f}",
                    f"{g['floor']:.3f}",
                    f"{g['floor_gamma1']:.3f}",
                    f"{g['flips_099']:.2f}",
                    f"`{r['command']}`",
                ]
            )
    return md_table(
        [
            "seed",
            "PPO steps",
            "mean traj. length",
            "true group (users)",
            "SML error, observed",
            "population floor",
            "floor with γ = 1",
            "order flips at γ = 0.99",
            "command",
        ],
        table,
    )


def reading(rows: list[dict[str, Any]]) -> str:
    """What the rows show, in numbers computed from them (no hand-written figures)."""
    groups = [g for r in rows for g in r["groups"]]
    if not groups:
        return ""
    gap = max(abs(g["observed"] - g["floor"]) for g in groups)
    no_myopia = max(g["floor_gamma1"] for g in groups)
    lo = min(g["observed"] for g in groups)
    hi = max(g["observed"] for g in groups)
    replayed = all(
        sorted(round(g["observed"], 3) for g in r["groups"])
        == sorted(e for _n, _o, e in r["registered_group_err"])
        for r in rows
        if len(r["registered_group_err"]) == 2
    )
    return (
        "## What this shows\n\n"
        f"- The true groups' SML label errors range {lo:.3f}–{hi:.3f}; each is within "
        f"{gap:.3f} of its **population floor**, the error of the group's expected vote: the "
        "error is systematic (the whole group leans the same way), not noise more users would "
        "average out.\n"
        f"- With γ = 1 for every user the floor is at most {no_myopia:.3f}: the error comes from "
        "the users' myopia (γ ∈ [0.98, 1] over trajectories of hundreds of steps) against a "
        "truth that sums the whole trajectory. The share of pairs whose order flips at "
        "γ = 0.99 tracks the floor.\n"
        "- Where the mixture found exactly the two true groups, the replay gives the registered "
        "group errors"
        + (" exactly (same agent, pairs, users, votes)" if replayed else " — NOT exactly: check")
        + ".\n"
        "- The paper's ≈ 0 % and ≈ 1 % are reachable with its user model only if its error is "
        "scored against the users' own discounted returns, or with γ = 1 or trajectories "
        "short enough that γ^H ≈ 1; its text does not say which. Scored as here (undiscounted "
        "objective sums), Fig. 5's per-group errors are not reachable with the paper's γ range "
        "on full MO-Hopper trajectories.\n"
    )


def main(argv: list[str] | None = None) -> int:
    args = parse(argv)
    logging.basicConfig(level=logging.INFO)
    jsonl = args.out / "crowd_fig5_explained_runs.jsonl"
    cmd = command("crowd_fig5_explain", argv)
    for seed in [] if args.report else args.seeds:
        t0 = time.time()
        for ck, r in run_seed(args, seed).items():
            append_jsonl(
                jsonl,
                {
                    "seed": seed,
                    "steps": ck,
                    **r,
                    "wall_s": round(time.time() - t0, 1),
                    "command": cmd,
                },
            )
        log.info("seed %d done (%.0f s)", seed, time.time() - t0)
    rows = read_jsonl(jsonl)
    text = (
        header(
            "Crowd-PrefRL Fig. 5: where the per-group label errors come from",
            "crowd_fig5_explain",
            argv,
            f"as crowd_fig5: PPO checkpoints {args.checkpoints}, {args.trajectories} trajectories, "
            f"{args.pairs} pairs, {args.users} users ({args.minority} height), "
            f"return_scale={args.return_scale}; seeds {args.seeds}",
        )
        + "\n**Exploratory** (an explanation, not a plan entry; no verdict).\n\n"
        + report(rows)
        + "\n"
        + reading(rows)
    )
    write_report(text, args.out / "crowd_fig5_explained.md")
    return 0
