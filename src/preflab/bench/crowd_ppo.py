"""Crowd-PrefPPO: PPO from crowd preferences aggregated by SML, by majority, or an oracle.

One crowd of 15 simulated users (stochastic preference model, Crowd-PrefRL's ranges) answers
every query of the core loop (``preflab.runs.train``) through ``CrowdSource``; labels come
from ``SMLAggregator()`` or ``MajorityAggregator()``; the oracle run uses the
loop's perfect synthetic teacher. Same seed, same budget for the three. As in the paper's
Fig. 3a, the crowd is the one (of ``--candidates`` random crowds) where SML is expected to
beat majority most, screened on pairs of random-policy segments. Reports the final
true return, label error of the aggregated labels against the oracle, and the learned
reward's agreement with the true reward. Writes benchmarks/results/crowd_ppo.md.
Run: ``nice -n 10 python -m preflab.bench.crowd_ppo`` (``--quick`` for a smoke run).
"""

from __future__ import annotations

import argparse
import logging
import tempfile
import time
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

import numpy as np
import torch

from preflab.aggregate import CrowdAggregator, Feedback, majority, sml
from preflab.bench._crowd_common import random_pairs, segment_pool
from preflab.bench._report import RESULTS, header
from preflab.config import TrainConfig
from preflab.crowd import (
    CrowdConfig,
    CrowdSource,
    answer_pairs,
    error_rates,
    sample_users,
    truth_labels,
)
from preflab.records import Label, Query, Segment
from preflab.reporting import md_table
from preflab.runs import train

log = logging.getLogger(__name__)


class ScoredCrowd(CrowdSource):
    """A CrowdSource that remembers the oracle answer of every pair it was asked (for scoring)."""

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self.truth: dict[tuple[str, str], float] = {}

    def submit(self, queries: Sequence[Query], segments: Mapping[str, Segment]) -> None:
        for q in queries:
            ra, rb = segments[q.a[0]].true_return, segments[q.b[0]].true_return
            self.truth[(q.a[0], q.b[0])] = 1.0 if ra > rb else 0.0 if rb > ra else 0.5
        super().submit(queries, segments)


class ScoredAggregator(CrowdAggregator):
    """Records the error of the labels it returns against the crowd's oracle answers."""

    def __init__(self, method: str, crowd: ScoredCrowd) -> None:
        super().__init__(method)
        self.crowd = crowd
        self.errors: list[float] = []
        self.user_errors = np.zeros(0)

    def labels(self, feedback: Feedback) -> list[Label]:
        labels = super().labels(feedback)
        queries = feedback.queries
        scored = [
            (lab.p, self.crowd.truth[(lab.a, lab.b)])
            for lab in labels
            if self.crowd.truth.get((lab.a, lab.b), 0.5) != 0.5
        ]
        if scored:
            self.errors.append(float(np.mean([p != t for p, t in scored])))
        tab = self.last_table
        if tab is not None and tab.votes.shape[1]:
            t = np.array(
                [
                    {1.0: 1, 0.0: -1}.get(
                        self.crowd.truth.get((queries[q].a[0], queries[q].b[0]), 0.5), 0
                    )
                    for q in tab.query_ids
                ]
            )
            self.user_errors = error_rates(tab.votes.toarray(), t)
        return labels


def pick_crowd(
    env_id: str, cfg: CrowdConfig, n_candidates: int, rng: np.random.Generator
) -> tuple[list, float]:
    """The paper's Fig. 3a choice: among candidate crowds, the one where SML is expected to beat
    majority most, judged on pairs of random-policy segments (not the run's own queries)."""
    segs = segment_pool(env_id, rng, ppo_steps=0, steps=8_000)
    rewards = np.stack([s.true_rewards for s in segs]).astype(np.float64)
    pairs = random_pairs(len(segs), 1000, rng)
    ra, rb = rewards[pairs[:, 0]], rewards[pairs[:, 1]]
    truth = truth_labels(ra, rb)
    best, best_gain = None, -np.inf
    for _ in range(n_candidates):
        users = sample_users(cfg, rng)
        votes = answer_pairs(users, ra, rb, rng, return_scale=cfg.return_scale)
        gain = float((majority(votes) != truth).mean() - (sml(votes).labels != truth).mean())
        if gain > best_gain:
            best, best_gain = users, gain
    assert best is not None
    return best, best_gain


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(
        prog="preflab bench crowd_ppo", description=__doc__.split("\n\n")[0]
    )
    p.add_argument("--env", default="HalfCheetah-v5")
    p.add_argument("--steps", type=int, default=25_000)
    p.add_argument("--labels", type=int, default=200)
    p.add_argument("--steps-per-round", type=int, default=4_096)
    p.add_argument("--users", type=int, default=15)
    p.add_argument("--return-scale", type=float, default=30.0)
    p.add_argument("--seeds", type=int, nargs="+", default=[0])
    p.add_argument(
        "--candidates",
        type=int,
        default=30,
        help="crowds screened for the largest expected SML gain (1 = a random crowd)",
    )
    p.add_argument("--out", type=Path, default=RESULTS, help="directory for the tables and figures")
    p.add_argument("--smoke", action="store_true", help="smallest budgets (the test suite)")
    p.add_argument("--quick", action="store_true")
    args = p.parse_args(argv)
    logging.basicConfig(level=logging.WARNING)
    torch.set_num_threads(1)
    if args.quick:
        args.steps, args.labels, args.steps_per_round = 6_000, 60, 2_048
    if args.smoke:
        args.quick, args.candidates, args.users = True, 1, 5
        args.steps, args.labels, args.steps_per_round = 1_024, 8, 256
    t0 = time.time()
    rows = []
    crowd_cfg = CrowdConfig(n_users=args.users, return_scale=args.return_scale)
    for seed in args.seeds:
        users, gain = pick_crowd(
            args.env, crowd_cfg, args.candidates, np.random.default_rng(1000 + seed)
        )
        log.warning("seed %d: crowd picked with expected SML gain %.3f over majority", seed, gain)
        cfg = TrainConfig(
            env_id=args.env,
            algo="ppo",
            seed=seed,
            total_steps=args.steps,
            total_labels=args.labels,
            initial_steps=2_000 if not args.smoke else 256,
            steps_per_round=args.steps_per_round,
            segment_length=50,
            n_envs=4,
            selector="disagreement",
            eval_episodes=5 if not args.smoke else 1,
            net_arch=(64, 64),
        )
        for method in ("sml", "majority", "oracle"):
            with tempfile.TemporaryDirectory() as run_dir:
                if method == "oracle":
                    summary = train(cfg, run_dir=run_dir)
                    err = float("nan")
                    user_err = "0"
                else:
                    crowd = ScoredCrowd(crowd_cfg, np.random.default_rng(2000 + seed), users=users)
                    agg = ScoredAggregator(method, crowd)
                    summary = train(cfg, run_dir=run_dir, source=crowd, aggregator=agg)
                    err = agg.errors[-1] if agg.errors else float("nan")
                    ue = agg.user_errors
                    user_err = (
                        f"{ue.mean():.3f} (best {ue.min():.3f}, worst {ue.max():.3f})"
                        if ue.size
                        else ""
                    )
            rows.append(
                [
                    seed,
                    f"{gain:+.3f}",
                    method,
                    f"{summary.true_return:.1f} ± {summary.true_return_std:.1f}",
                    summary.n_labels,
                    f"{err:.3f}" if np.isfinite(err) else "0 (oracle)",
                    user_err,
                    f"{summary.reward_accuracy:.3f}",
                    f"{summary.reward_corr:.3f}",
                    f"{summary.wall_s:.0f}",
                ]
            )
            log.warning("seed %d %s: %s (%.0f s)", seed, method, rows[-1], time.time() - t0)
    budgets = (
        f"{args.env}, PPO (preflab preset, 4 envs, (64, 64)), {args.steps} env steps, "
        f"{args.labels} labels, "
        f"feedback every {args.steps_per_round} steps, disagreement selection, 50-step segments, "
        f"crowd of {args.users} users (γ ∈ [0.98, 1], β ∈ [0.1, 10], ε ∈ [0, 0.2], return_scale "
        f"{args.return_scale}), seeds {args.seeds}"
    )
    text = header(
        "Crowd-PrefPPO — SML vs majority vs oracle labels", "preflab.bench.crowd_ppo", argv, budgets
    )
    text += md_table(
        [
            "seed",
            "screened gain MAJ−SML",
            "labels from",
            "final true return",
            "labels",
            "label error (final)",
            "user error mean (best, worst)",
            "reward pair accuracy",
            "reward corr",
            "wall s",
        ],
        rows,
    )
    text += f"\nWall time {time.time() - t0:.0f} s.\n"
    args.out.mkdir(parents=True, exist_ok=True)
    (args.out / "crowd_ppo.md").write_text(text)
    print(text)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
