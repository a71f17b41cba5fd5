"""Speed of the exploration view: DTW + tree + ensemble disagreement + suggestions.

Target (issue 3): tree and suggestions for 200 behaviours < 2 s, for 1,000 < 20 s.
Behaviours are HalfCheetah-v5 random-action segments (17-dim observations) of random
length 30–60 steps; the ensemble is 3 × (64, 64). Writes
``benchmarks/results/groupwise_speed.md``.
Run: ``nice -n 10 python -m preflab_bench.groupwise_speed``.
"""

from __future__ import annotations

import argparse
import os
import sys
import time
from datetime import UTC, datetime
from pathlib import Path

import numpy as np
import torch

from preflab.envs import make_env
from preflab.policy.rollout import sample_action
from preflab.records import Segment
from preflab.reward import RewardConfig, RewardEnsemble
from preflab.selection.exploration import build_exploration
from preflab.selection.features import FeatureConfig
from preflab.selection.groupwise import GroupwiseConfig
from preflab_bench._report import RESULTS


def random_segments(env_id: str, n: int, rng: np.random.Generator) -> list[Segment]:
    """n random-action segments of random length 30–60 from consecutive episodes (actions
    drawn from a generator seeded like the environment)."""
    seed = int(rng.integers(1 << 30))
    env = make_env(env_id, seed=seed)
    act_rng = np.random.default_rng(seed)
    out: list[Segment] = []
    obs, _ = env.reset()
    while len(out) < n:
        length = int(rng.integers(30, 61))
        o, a, r = [], [], []
        for _ in range(length):
            act = sample_action(env.action_space, act_rng)
            nxt, rew, term, trunc, _ = env.step(act)
            o.append(obs)
            a.append(act)
            r.append(rew)
            obs = nxt
            if term or trunc:
                obs, _ = env.reset()
                break
        if len(o) >= 30:
            oa, aa = np.asarray(o, np.float32), np.asarray(a, np.float32)
            out.append(
                Segment(
                    id=f"{Segment.content_id(oa, aa)}-{len(out)}",
                    obs=oa,
                    acts=aa,
                    true_rewards=np.asarray(r, np.float32),
                    env_id=env_id,
                )
            )
    env.close()
    return out


def main(argv: list[str]) -> int:
    ap = argparse.ArgumentParser(
        prog="python -m preflab_bench.groupwise_speed", description=__doc__.split("\n")[0]
    )
    ap.add_argument("--sizes", nargs="+", type=int, default=[200, 1000])
    ap.add_argument("--repeats", type=int, default=3)
    ap.add_argument("--env", default="HalfCheetah-v5")
    ap.add_argument("--out", type=Path, default=RESULTS)
    args = ap.parse_args(argv)
    torch.set_num_threads(1)
    rng = np.random.default_rng(0)
    segs = random_segments(args.env, max(args.sizes), rng)
    obs_dim, act_dim = segs[0].obs.shape[1], segs[0].acts.shape[1]
    ens = RewardEnsemble(obs_dim, act_dim, RewardConfig(members=3, hidden=(64, 64)), seed=0)
    rows = []
    for n in args.sizes:
        for window in (None, 10):
            cfg = GroupwiseConfig(features=FeatureConfig(window=window))
            times, parts, cpus = [], [], []
            for _ in range(args.repeats):
                t0, c0 = time.perf_counter(), time.process_time()
                view = build_exploration(segs[:n], ens, config=cfg, levels=3)
                view.to_json()
                times.append(time.perf_counter() - t0)
                cpus.append(time.process_time() - c0)
                parts.append(view.timings)
            k = int(np.argsort(times)[len(times) // 2])
            target = 2.0 if n <= 200 else 20.0 if n <= 1000 else float("nan")
            rows.append(
                (n, window, float(np.median(times)), parts[k], target, float(np.median(cpus)))
            )
            print(
                f"n={n:5d} window={window!s:>4}: {np.median(times):6.2f} s  {parts[k]}", flush=True
            )
    load = os.getloadavg()
    lines = [
        "# Exploration view speed (DTW + tree + disagreement + suggestions)",
        "",
        f"Command: `python -m preflab_bench.groupwise_speed {' '.join(argv)}`  ",
        f"Date: {datetime.now(UTC).strftime('%Y-%m-%d %H:%M UTC')} · "
        f"{args.env} random-action segments "
        f"({obs_dim}-dim observations, 30–60 steps) · ensemble 3 × (64, 64) · torch threads 1 · "
        f"median of {args.repeats} · load average during the run "
        f"{load[0]:.1f} / {load[1]:.1f} / {load[2]:.1f} "
        "on 2 cores (shared machine: other jobs were running)",
        "",
        "CPU s = process CPU time summed over threads (DTW runs on 2 OpenMP threads); "
        "on an idle machine "
        "wall ≈ CPU s / 2 for the DTW part.",
        "",
        "| behaviours | DTW window | total s (wall) | CPU s | DTW s | tree s | variance s | "
        "suggestions s | "
        "target s | met (wall) |",
        "|---|---|---|---|---|---|---|---|---|---|",
    ]
    for n, window, total, p, target, cpu in rows:
        lines.append(
            f"| {n} | {window or 'none'} | {total:.2f} | {cpu:.2f} | {p.get('dtw', 0):.2f} | "
            f"{p.get('tree', 0):.3f} | "
            f"{p.get('variance', 0):.2f} | {p.get('suggestions', 0):.3f} | {target:g} | "
            f"{'yes' if total < target else 'no'} |"
        )
    args.out.mkdir(parents=True, exist_ok=True)
    (args.out / "groupwise_speed.md").write_text("\n".join(lines) + "\n")
    print("\n".join(lines))
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
