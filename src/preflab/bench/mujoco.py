"""PrefLab on MuJoCo locomotion at a fixed label budget vs the same RL algorithm on the true reward.

Christiano et al. (2017) report that 700 synthetic labels nearly match RL on the true reward.
For each env and seed this runs PrefLab (oracle teacher, ``--labels`` labels) and the same
algorithm, hyperparameters and env steps on the true reward, and reports the ratio of final
true returns (target ≥ 0.8) and of wall times. Budgets are CPU-sized; see the table header.
"""

from __future__ import annotations

import argparse
import json
import statistics
import tempfile
import time
from pathlib import Path
from typing import Any

import torch

from preflab.bench.pendulum import RESULTS, true_reward_run
from preflab.config import TrainConfig
from preflab.loop import train


def main(argv: list[str]) -> int:
    ap = argparse.ArgumentParser(prog="preflab bench mujoco", description=__doc__)
    ap.add_argument("--envs", nargs="+", default=["HalfCheetah-v5", "Hopper-v5"])
    ap.add_argument("--algo", default="ppo")
    ap.add_argument("--seeds", type=int, nargs="+", default=[0])
    ap.add_argument("--steps", type=int, default=200_000)
    ap.add_argument("--labels", type=int, default=700)
    ap.add_argument("--n-envs", type=int, default=4)
    ap.add_argument("--out", type=Path, default=RESULTS / "mujoco.md")
    args = ap.parse_args(argv)
    torch.set_num_threads(1)
    rows: list[dict[str, Any]] = []
    for env_id in args.envs:
        for seed in args.seeds:
            cfg = TrainConfig(
                env_id=env_id,
                algo=args.algo,
                seed=seed,
                total_steps=args.steps,
                total_labels=args.labels,
                n_envs=args.n_envs,
                initial_steps=4096,
                steps_per_round=8192,
                segment_length=25,
                initial_label_frac=0.1,
                pool_size=800,
                eval_episodes=10,
            )
            with tempfile.TemporaryDirectory() as d:
                pref = train(cfg, run_dir=Path(d) / "run")
            true = true_reward_run(
                args.algo,
                seed,
                args.steps,
                args.n_envs,
                cfg.net_arch,
                env_id=env_id,
                steps_per_round=cfg.steps_per_round,
            )
            rows.append(
                {
                    "env": env_id,
                    "seed": seed,
                    "preflab": pref.true_return,
                    "true": true["true_return"],
                    "preflab_wall": pref.wall_s,
                    "true_wall": true["wall_s"],
                    "labels": pref.n_labels,
                    "reward_corr": pref.reward_corr,
                    "steps": pref.env_steps,
                }
            )
            args.out.with_suffix(".json").write_text(json.dumps(rows, indent=2))
            print(rows[-1])
    lines = [
        f"# MuJoCo: PrefLab ({args.labels} oracle labels) vs {args.algo.upper()} on the true reward",
        "",
        f"Command: `preflab bench mujoco --envs {' '.join(args.envs)} --algo {args.algo} --seeds "
        f"{' '.join(map(str, args.seeds))} --steps {args.steps} --labels {args.labels} --n-envs {args.n_envs}`  ",
        f"Date: {time.strftime('%Y-%m-%d %H:%M UTC', time.gmtime())}; 2 shared cores (read ratios, not seconds). "
        "Segments of 25 steps, feedback every 8,192 steps, 10 deterministic evaluation episodes.",
        "",
        "| env | seed | labels | env steps | PrefLab return | true-reward return | return ratio | learned-vs-true corr | wall ratio |",
        "|---|---:|---:|---:|---:|---:|---:|---:|---:|",
    ]
    for r in rows:
        ratio = r["preflab"] / r["true"] if r["true"] > 0 else float("nan")
        lines.append(
            f"| {r['env']} | {r['seed']} | {r['labels']} | {r['steps']} | {r['preflab']:.1f} | {r['true']:.1f} "
            f"| {ratio:.2f} | {r['reward_corr']:.2f} | {r['preflab_wall'] / r['true_wall']:.2f} |"
        )
    for env_id in args.envs:
        rs = [r for r in rows if r["env"] == env_id]
        p, t = statistics.mean(r["preflab"] for r in rs), statistics.mean(r["true"] for r in rs)
        lines.append(
            f"\n{env_id}: mean PrefLab {p:.1f} vs true reward {t:.1f} → ratio {p / t:.2f} (target ≥ 0.80)"
        )
    args.out.write_text("\n".join(lines) + "\n")
    print("\n".join(lines))
    return 0
