"""Side-by-side benchmark on Pendulum-v1: PrefLab vs imitation's PreferenceComparisons.

One invocation runs, for every seed:
- ``imitation``: imitation 1.0.1 PreferenceComparisons, its documented Pendulum settings,
  200 labels, ``--imitation-timesteps`` (in its own venv, see preflab.bench.peer);
- ``preflab-ppo``: PrefLab with the same PPO settings (8 envs, same hyperparameters,
  32×32 policy and reward nets), the same 200 labels and as many PPO steps as imitation's agent took;
- ``sb3-ppo-true``: plain SB3 PPO on the true reward, same settings and steps (overhead baseline);
- ``preflab-sac``: PrefLab's default learner (SAC, PEBBLE-style relabelling) with only
  ``--sac-labels`` labels and ``--sac-steps`` env steps (label efficiency);
- ``sb3-sac-true``: plain SB3 SAC on the true reward with the same steps and hyperparameters.
Results (true return of a 10-episode deterministic evaluation, wall time of the training call,
env steps) and ratios go to ``benchmarks/results/pendulum.md``.
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

from preflab.bench._report import RESULTS
from preflab.bench.peer import DEFAULT_VENV, ensure_imitation_venv, run_imitation
from preflab.config import TrainConfig
from preflab.envs import make_vec_env
from preflab.evaluate import evaluate_policy
from preflab.loop import train
from preflab.policy.agents import make_agent
from preflab.policy.presets import IMITATION_PENDULUM_PPO, preset
from preflab.reward.ensemble import RewardConfig

PPO_ENVS = 8


def ppo_config(seed: int, steps: int, labels: int) -> TrainConfig:
    return TrainConfig(
        env_id="Pendulum-v1",
        algo="ppo",
        seed=seed,
        total_steps=steps,
        total_labels=labels,
        n_envs=PPO_ENVS,
        initial_steps=2048,
        steps_per_round=4096,
        initial_label_frac=0.1,
        net_arch=(32, 32),
        reward=RewardConfig(hidden=(32, 32)),
        agent_kwargs=json.dumps(IMITATION_PENDULUM_PPO),
        eval_episodes=10,
    )


def sac_config(seed: int, steps: int, labels: int) -> TrainConfig:
    return TrainConfig(
        env_id="Pendulum-v1",
        algo="sac",
        seed=seed,
        total_steps=steps,
        total_labels=labels,
        reward=RewardConfig(hidden=(32, 32)),
        eval_episodes=10,
    )


def true_reward_run(
    algo: str,
    seed: int,
    steps: int,
    n_envs: int,
    net_arch: tuple[int, ...],
    *,
    env_id: str = "Pendulum-v1",
    steps_per_round: int = 2048,
    overrides: dict[str, Any] | None = None,
) -> dict[str, Any]:
    """Plain SB3 on the env's true reward with PrefLab's preset hyperparameters (the baseline)."""
    venv = make_vec_env(env_id, n_envs, seed=seed)
    hyper = preset(algo, n_envs, steps_per_round, overrides=overrides)
    agent = make_agent(algo, venv, seed=seed, net_arch=list(net_arch), **hyper)
    t0 = time.perf_counter()
    agent.learn(total_timesteps=steps)
    wall = time.perf_counter() - t0
    mean, std = evaluate_policy(agent, env_id, n_episodes=10, seed=10_000 + seed)
    return {
        "true_return": mean,
        "true_return_std": std,
        "wall_s": wall,
        "env_steps": int(agent.num_timesteps),
        "n_labels": 0,
    }


def preflab_run(cfg: TrainConfig) -> dict[str, Any]:
    with tempfile.TemporaryDirectory() as d:
        return train(cfg, run_dir=Path(d) / "run").summary()


def _fmt(rows: list[dict[str, Any]], key: str) -> str:
    vals = [r[key] for r in rows]
    if len(vals) == 1:
        return f"{vals[0]:.1f}"
    return f"{statistics.mean(vals):.1f} ± {statistics.stdev(vals):.1f}"


def main(argv: list[str]) -> int:
    ap = argparse.ArgumentParser(
        prog="preflab bench pendulum",
        description=__doc__,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    ap.add_argument("--seeds", type=int, nargs="+", default=[0, 1, 2, 3, 4])
    ap.add_argument(
        "--timing-seeds",
        type=int,
        nargs="+",
        default=None,
        help="seeds for the PPO-vs-PPO and overhead runs (default: all seeds)",
    )
    ap.add_argument("--imitation-timesteps", type=int, default=50_000)
    ap.add_argument("--labels", type=int, default=200, help="labels for imitation and preflab-ppo")
    ap.add_argument("--sac-labels", type=int, default=100)
    ap.add_argument("--sac-steps", type=int, default=20_000)
    ap.add_argument("--skip-sac", action="store_true", help="only imitation and the PPO runs")
    ap.add_argument("--venv", type=Path, default=DEFAULT_VENV)
    ap.add_argument("--out", type=Path, default=RESULTS / "pendulum.md")
    args = ap.parse_args(argv)
    torch.set_num_threads(1)
    timing = args.timing_seeds if args.timing_seeds is not None else args.seeds
    py = ensure_imitation_venv(args.venv)
    rows: dict[str, list[dict[str, Any]]] = {
        k: [] for k in ("imitation", "preflab-ppo", "sb3-ppo-true", "preflab-sac", "sb3-sac-true")
    }
    raw = args.out.with_suffix(".json")
    for seed in args.seeds:
        imi = run_imitation(
            py,
            env_id="Pendulum-v1",
            seed=seed,
            labels=args.labels,
            timesteps=args.imitation_timesteps,
            n_envs=PPO_ENVS,
            eval_episodes=10,
        )
        rows["imitation"].append(
            {
                "true_return": imi["true_return_mean"],
                "true_return_std": imi["true_return_std"],
                "wall_s": imi["wall_s"],
                "env_steps": imi["env_steps"],
                "agent_steps": imi["agent_timesteps"],
                "n_labels": imi["labels"],
                "seed": seed,
            }
        )
        ppo_steps = int(imi["agent_timesteps"])
        if seed in timing:
            rows["preflab-ppo"].append(
                preflab_run(ppo_config(seed, ppo_steps, args.labels)) | {"seed": seed}
            )
            rows["sb3-ppo-true"].append(
                true_reward_run(
                    "ppo", seed, ppo_steps, PPO_ENVS, (32, 32), overrides=IMITATION_PENDULUM_PPO
                )
                | {"seed": seed}
            )
        if not args.skip_sac:
            rows["preflab-sac"].append(
                preflab_run(sac_config(seed, args.sac_steps, args.sac_labels)) | {"seed": seed}
            )
        if seed in timing and not args.skip_sac:
            rows["sb3-sac-true"].append(
                true_reward_run("sac", seed, args.sac_steps, 1, (64, 64)) | {"seed": seed}
            )
        raw.write_text(json.dumps(rows, indent=2, default=float))
        print(
            f"seed {seed} done: "
            + ", ".join(f"{k}={v[-1]['true_return']:.0f}" for k, v in rows.items() if v)
        )
    write_table(args, rows, timing)
    return 0


def write_table(
    args: argparse.Namespace, rows: dict[str, list[dict[str, Any]]], timing: list[int]
) -> None:
    def mean(name: str, key: str, seeds: list[int] | None = None) -> float:
        vals = [r[key] for r in rows[name] if seeds is None or r["seed"] in seeds]
        return statistics.mean(vals) if vals else float("nan")

    lines = [
        "# Pendulum-v1: PrefLab vs imitation 1.0.1 PreferenceComparisons (side by side)",
        "",
        f"Command: `preflab bench pendulum {' '.join(_argv_repr(args))}`  ",
        f"Date: {time.strftime('%Y-%m-%d %H:%M UTC', time.gmtime())}; machine: 2 cores, shared (timings are "
        "noisy: read the ratios, measured in the same invocation).  ",
        f"Seeds: {args.seeds} (timing runs: {timing}). True return = mean of 10 deterministic evaluation episodes "
        "on the true reward; wall = the training call only (no evaluation).",
        "",
        "| run | labels | env steps | true return (mean ± sd over seeds) | wall s (mean) |",
        "|---|---:|---:|---:|---:|",
    ]
    for name, rs in rows.items():
        if rs:
            lines.append(
                f"| {name} | {rs[0]['n_labels']} | {int(mean(name, 'env_steps'))} | {_fmt(rs, 'true_return')} "
                f"| {mean(name, 'wall_s'):.1f} |"
            )
    lines += [
        "",
        "Per seed:",
        "",
        "| run | seed | true return | wall s | env steps |",
        "|---|---:|---:|---:|---:|",
    ]
    for name, rs in rows.items():
        for r in rs:
            lines.append(
                f"| {name} | {r['seed']} | {r['true_return']:.1f} | {r['wall_s']:.1f} | {r['env_steps']} |"
            )
    ratio_ppo = mean("preflab-ppo", "wall_s") / mean("imitation", "wall_s", timing)
    over_ppo = mean("preflab-ppo", "wall_s") / mean("sb3-ppo-true", "wall_s")
    over_sac = mean("preflab-sac", "wall_s", timing) / mean("sb3-sac-true", "wall_s")
    lines += [
        "",
        "Ratios (same invocation):",
        "",
        f"- label efficiency: preflab-sac ({args.sac_labels} labels, {args.sac_steps} steps) mean true return "
        f"{mean('preflab-sac', 'true_return'):.1f} vs imitation ({args.labels} labels) "
        f"{mean('imitation', 'true_return'):.1f} → difference {mean('preflab-sac', 'true_return') - mean('imitation', 'true_return'):+.1f}",
        f"- wall time, PPO vs PPO (same settings, steps, labels): preflab-ppo / imitation = {ratio_ppo:.2f}",
        f"- reward-learning overhead, PPO: preflab-ppo / sb3-ppo-true = {over_ppo:.2f}",
        f"- reward-learning overhead, SAC: preflab-sac / sb3-sac-true = {over_sac:.2f}",
        f"- true return, preflab-ppo / imitation (same steps, labels): {mean('preflab-ppo', 'true_return'):.1f} vs "
        f"{mean('imitation', 'true_return', timing):.1f}",
    ]
    args.out.parent.mkdir(parents=True, exist_ok=True)
    args.out.write_text("\n".join(lines) + "\n")
    print("\n".join(lines))


def _argv_repr(args: argparse.Namespace) -> list[str]:
    out = ["--seeds", *map(str, args.seeds)]
    if args.timing_seeds is not None:
        out += ["--timing-seeds", *map(str, args.timing_seeds)]
    out += [
        "--imitation-timesteps",
        str(args.imitation_timesteps),
        "--labels",
        str(args.labels),
        "--sac-labels",
        str(args.sac_labels),
        "--sac-steps",
        str(args.sac_steps),
    ]
    if args.skip_sac:
        out.append("--skip-sac")
    if args.out != RESULTS / "pendulum.md":
        out += ["--out", str(args.out)]
    return out
