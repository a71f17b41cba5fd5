"""Reproduction of paper 000's simulation study (Table 1) at CPU size.

Three simulated decision makers (pairwise, groupwise, interactive; ``preflab.groupwise``)
train a reward model and a policy through the core loop (``preflab.loop.train``) on GridWorld
(a small dense-reward grid, defined here), MountainCarContinuous-v0, Reacher-v5 and Hopper-v5.
Every decision maker makes the same number of comparisons; group comparisons expand to more
labels. Writes ``benchmarks/results/groupwise.md`` (+ ``groupwise_runs.json``) with

1. a Table-1-like table: mean ± std final true return, labels, label error rate;
2. the IQR-normalised final return over all environments with paired tests;
3. the label error rate of the three ways of comparing at equal noise on a fixed pool
   (no training; many repetitions), which isolates the effect of grouping on errors.

Run: ``nice -n 10 python -m preflab.bench.groupwise`` (``--quick`` for a smoke run).
"""

from __future__ import annotations

import argparse
import json
import logging
import sys
import tempfile
import time
from dataclasses import dataclass, replace
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import gymnasium as gym
import numpy as np
import torch
from gymnasium import spaces
from scipy import stats

from preflab.bench._report import RESULTS
from preflab.config import TrainConfig
from preflab.envs import make_vec_env
from preflab.groupwise import DecisionConfig, DecisionMaker
from preflab.groupwise.selector import GroupwiseSelector
from preflab.loop import train
from preflab.reward.ensemble import RewardConfig
from preflab.reward.trainer import FitConfig
from preflab.rollout import collect_segments

DMS = ("pairwise", "groupwise", "interactive")
GRID_ID = "PrefLab/GroupGrid-v0"


class GroupGridEnv(gym.Env):
    """An 8×8 grid: reach the goal corner. Dense reward 1 − manhattan/14 per step, 50 steps.

    Observation: agent (x, y) and goal (x, y), divided by 7; actions: 0 right, 1 down,
    2 left, 3 up. The start cell is random; the goal is (7, 7). Random policy ≈ 17, best ≈ 45.
    """

    metadata = {"render_modes": []}  # noqa: RUF012

    def __init__(self, size: int = 8, horizon: int = 50) -> None:
        self.size, self.horizon = size, horizon
        self.observation_space = spaces.Box(0.0, 1.0, (4,), np.float32)
        self.action_space = spaces.Discrete(4)
        self._pos = np.zeros(2, np.int64)
        self._goal = np.array([size - 1, size - 1])
        self._t = 0

    def _obs(self) -> np.ndarray:
        return np.concatenate([self._pos, self._goal]).astype(np.float32) / (self.size - 1)

    def reset(self, *, seed: int | None = None, options: dict[str, Any] | None = None):
        super().reset(seed=seed)
        self._pos = self.np_random.integers(0, self.size // 2, 2)
        self._t = 0
        return self._obs(), {}

    def step(self, action):
        move = ((1, 0), (0, 1), (-1, 0), (0, -1))[int(action)]
        self._pos = np.clip(self._pos + move, 0, self.size - 1)
        self._t += 1
        dist = np.abs(self._goal - self._pos).sum()
        reward = 1.0 - dist / (2 * (self.size - 1))
        return self._obs(), float(reward), False, self._t >= self.horizon, {}


if GRID_ID not in gym.registry:
    gym.register(id=GRID_ID, entry_point=GroupGridEnv)


@dataclass(frozen=True, kw_only=True)
class EnvSpec:
    """Budget of one environment."""

    env_id: str
    """Gymnasium id."""
    total_steps: int
    """Environment steps per run."""
    steps_per_round: int
    """Steps between feedback rounds."""
    comparisons: int
    """Comparisons (queries) per run, the same for every decision maker."""
    segment_length: int = 25
    """Steps per behaviour."""
    algo: str = "ppo"
    """Policy learner."""
    agent_kwargs: str = "{}"
    """Extra SB3 arguments."""


SPECS: dict[str, EnvSpec] = {
    "GridWorld": EnvSpec(
        env_id=GRID_ID,
        total_steps=8_192,
        steps_per_round=1_024,
        comparisons=40,
        agent_kwargs='{"n_steps": 1024, "gamma": 0.95}',
    ),
    "MountainCar": EnvSpec(
        env_id="MountainCarContinuous-v0",
        total_steps=8_192,
        steps_per_round=2_048,
        comparisons=40,
        segment_length=50,
    ),
    "Reacher": EnvSpec(
        env_id="Reacher-v5",
        total_steps=10_240,
        steps_per_round=2_048,
        comparisons=40,
        segment_length=50,
    ),
    "Hopper": EnvSpec(
        env_id="Hopper-v5", total_steps=10_240, steps_per_round=2_048, comparisons=40
    ),
}


def noise_scale(spec: EnvSpec, seed: int) -> float:
    """Std of true segment returns under random actions: the unit of the DM's noise."""
    venv = make_vec_env(spec.env_id, 1, seed=10_000 + seed)
    segs = collect_segments(
        venv, None, 2_000, spec.segment_length, np.random.default_rng(seed), env_id=spec.env_id
    )
    venv.close()
    return float(np.std([s.true_return for s in segs])) or 1.0


def run_one(
    name: str,
    spec: EnvSpec,
    dm_kind: str,
    seed: int,
    noise_frac: float,
    max_discordance: float,
    pool: int,
    workdir: Path,
) -> dict[str, Any]:
    """One training run of one decision maker; returns summary + DM counters."""
    sigma = noise_frac * noise_scale(spec, seed)
    cfg = TrainConfig(
        env_id=spec.env_id,
        algo=spec.algo,
        seed=seed,
        total_steps=spec.total_steps,
        total_labels=spec.comparisons,
        initial_label_frac=0.25,
        initial_steps=spec.steps_per_round,
        steps_per_round=spec.steps_per_round,
        schedule="hyperbolic",
        segment_length=spec.segment_length,
        pool_size=pool,
        agent_kwargs=spec.agent_kwargs,
        reward=RewardConfig(members=3, hidden=(64, 64)),
        fit=FitConfig(epochs=10),
        first_fit_epochs=30,
        eval_episodes=3,
    )
    dm = DecisionMaker(
        dm_kind,
        DecisionConfig(noise_std=sigma, max_discordance=max_discordance),
        rng=np.random.default_rng(1_000 + seed),
    )
    t0 = time.perf_counter()
    summary = train(cfg, run_dir=workdir / f"{name}-{dm_kind}-{seed}", source=dm, selector=dm)
    return {
        "env": name,
        "dm": dm_kind,
        "seed": seed,
        "noise_std": sigma,
        "true_return": summary.true_return,
        "n_labels": summary.n_labels,
        "reward_accuracy": summary.reward_accuracy,
        "wall_s": time.perf_counter() - t0,
        **{f"dm_{k}": v for k, v in dm.stats.as_dict().items()},
    }


# ----- analysis ------------------------------------------------------------------------------
def iqr_normalise(rows: list[dict[str, Any]]) -> dict[tuple[str, str, int], float]:
    """Per environment: (x − Q1) / (Q3 − Q1) over all runs of that environment."""
    out = {}
    for env in sorted({r["env"] for r in rows}):
        vals = np.array([r["true_return"] for r in rows if r["env"] == env])
        q1, q3 = np.percentile(vals, [25, 75])
        scale = (q3 - q1) or (np.std(vals) or 1.0)
        for r in rows:
            if r["env"] == env:
                out[(env, r["dm"], r["seed"])] = (r["true_return"] - q1) / scale
    return out


def paired(norm: dict[tuple[str, str, int], float], a: str, b: str) -> dict[str, float]:
    keys = sorted(
        {(e, s) for (e, d, s) in norm if d == a} & {(e, s) for (e, d, s) in norm if d == b}
    )
    xa = np.array([norm[(e, a, s)] for e, s in keys])
    xb = np.array([norm[(e, b, s)] for e, s in keys])
    res = {
        "n": len(keys),
        "mean_a": float(xa.mean()) if len(xa) else float("nan"),
        "mean_b": float(xb.mean()) if len(xb) else float("nan"),
    }
    if len(keys) >= 2 and np.any(xa != xb):
        t = stats.ttest_rel(xa, xb)
        w = stats.wilcoxon(xa, xb)
        res |= {
            "t": float(t.statistic),
            "p_t": float(t.pvalue),
            "p_wilcoxon": float(w.pvalue),
            "wins": int((xa > xb).sum()),
        }
    return res


def static_error_rates(
    spec: EnvSpec, noise_frac: float, max_discordance: float, n_rep: int, seed: int
) -> dict[str, dict[str, float]]:
    """Label error rates of the three comparison kinds on one fixed pool of random segments.

    Same noise σ for all. Pairwise: random pairs (an untrained ensemble gives random
    suggestions, so disagreement reduces to random); groupwise: tree-group pairs ranked with an
    all-equal variance (random); interactive: the DM's own spread strategy.
    """
    rng = np.random.default_rng(seed)
    venv = make_vec_env(spec.env_id, 1, seed=seed)
    segs = collect_segments(
        venv, None, 200 * spec.segment_length, spec.segment_length, rng, env_id=spec.env_id
    )
    venv.close()
    segs = segs[:200]
    sigma = noise_frac * float(np.std([s.true_return for s in segs]))
    by_id = {s.id: s for s in segs}
    out = {}
    for kind in DMS:
        dm = DecisionMaker(
            kind,
            DecisionConfig(noise_std=sigma, max_discordance=max_discordance),
            rng=np.random.default_rng(seed + 1),
            selector=GroupwiseSelector() if kind == "groupwise" else None,
        )
        for _ in range(n_rep):
            qs = dm.select(segs, None, 20, rng)
            dm.submit(qs, by_id)
        dm.collect()
        out[kind] = dm.stats.as_dict()
    return out


def _fmt(x: float, nd: int = 1) -> str:
    return "nan" if not np.isfinite(x) else f"{x:.{nd}f}"


def write_report(
    rows: list[dict[str, Any]], static: dict[str, Any], meta: dict[str, Any], path: Path
) -> str:
    lines = [
        "# Groupwise comparison: CPU-sized reproduction of paper 000, Table 1",
        "",
        f"Command: `{meta['command']}`  ",
        f"Date: {meta['date']} · wall time {meta['wall_min']:.1f} min · torch threads 1 · nice 10",
        "",
        *meta.get("provenance", []),
        "Budgets per run (every decision maker makes the same number of comparisons): "
        + "; ".join(
            f"{k}: {s.env_id}, PPO {s.total_steps} steps, {s.comparisons} comparisons, "
            f"segments of {s.segment_length} steps, rounds of {s.steps_per_round} steps"
            for k, s in meta["specs"].items()
            if k in meta["envs"]
        )
        + ".",
        f"Seeds {meta['seeds']}; candidate pool {meta['pool']} segments; "
        "reward ensemble 3 × (64, 64); "
        f"DM noise σ = {meta['noise_frac']} × std of random-policy segment returns "
        "(Eq. 1, Gaussian); "
        f"overlap rule: skip a group comparison when > {meta['max_discordance']:.0%} "
        "of its cross pairs "
        "are perceived against the decision.",
        "",
        "## Final true return (mean ± std over seeds), labels, label error rate",
        "",
        "| Environment | " + " | ".join(f"{d} return | {d} labels | {d} err %" for d in DMS) + " |",
        "|---|" + "---|" * (3 * len(DMS)),
    ]
    for env in meta["envs"]:
        cells = []
        for d in DMS:
            rs = [r for r in rows if r["env"] == env and r["dm"] == d]
            if not rs:
                cells += ["–", "–", "–"]
                continue
            ret = np.array([r["true_return"] for r in rs])
            lab = np.array([r["dm_labels"] for r in rs])
            err = sum(r["dm_label_errors"] for r in rs) / max(1, sum(r["dm_labels"] for r in rs))
            cells += [
                f"{ret.mean():.1f} ± {ret.std():.1f}",
                f"{lab.mean():.0f}",
                f"{100 * err:.1f}",
            ]
        lines.append(f"| {env} | " + " | ".join(cells) + " |")
    lines += ["", "Comparisons answered / skipped by the overlap rule (sum over seeds):", ""]
    lines += ["| Environment | " + " | ".join(DMS) + " |", "|---|" + "---|" * len(DMS)]
    for env in meta["envs"]:
        cells = []
        for d in DMS:
            rs = [r for r in rows if r["env"] == env and r["dm"] == d]
            cells.append(
                f"{sum(r['dm_comparisons'] for r in rs)} / {sum(r['dm_skipped'] for r in rs)}"
            )
        lines.append(f"| {env} | " + " | ".join(cells) + " |")
    norm = iqr_normalise(rows)
    lines += [
        "",
        "## IQR-normalised final return over all environments and seeds",
        "",
        "Per environment, returns of all runs are mapped by (x − Q1)/(Q3 − Q1). Paired by "
        "(environment, seed).",
        "",
        "| comparison | pairs | mean A | mean B | A vs B % | t | p (t) | p (Wilcoxon) | A wins |",
        "|---|---|---|---|---|---|---|---|---|",
    ]
    for a, b in (
        ("interactive", "pairwise"),
        ("groupwise", "pairwise"),
        ("interactive", "groupwise"),
    ):
        res = paired(norm, a, b)
        rel = (
            100 * (res["mean_a"] - res["mean_b"]) / abs(res["mean_b"])
            if res.get("mean_b")
            else float("nan")
        )
        lines.append(
            f"| {a} vs {b} | {res['n']} | {_fmt(res['mean_a'], 3)} | {_fmt(res['mean_b'], 3)} | "
            f"{_fmt(rel)} | {_fmt(res.get('t', float('nan')), 2)} | "
            f"{_fmt(res.get('p_t', float('nan')), 3)} | "
            f"{_fmt(res.get('p_wilcoxon', float('nan')), 3)} | {res.get('wins', '–')} |"
        )
    if static:
        lines += [
            "",
            "## Label error rate at equal noise on a fixed pool (no training)",
            "",
            f"{meta['static_rep']} × 20 comparisons per kind on 200 random-policy segments per "
            "environment, same σ; groups are tree nodes of 2–8 behaviours.",
            "",
            "| Environment | "
            + " | ".join(f"{d} labels | {d} err % | {d} skipped" for d in DMS)
            + " |",
            "|---|" + "---|" * (3 * len(DMS)),
        ]
        for env, res in static.items():
            cells = []
            for d in DMS:
                s = res[d]
                cells += [f"{s['labels']}", f"{100 * s['label_error_rate']:.1f}", f"{s['skipped']}"]
            lines.append(f"| {env} | " + " | ".join(cells) + " |")
    lines += [
        "",
        "## Runs",
        "",
        "| env | dm | seed | return | labels | err % | reward acc | wall s |",
        "|---|---|---|---|---|---|---|---|",
    ]
    for r in rows:
        lines.append(
            f"| {r['env']} | {r['dm']} | {r['seed']} | {r['true_return']:.1f} | {r['dm_labels']} | "
            f"{100 * r['dm_label_error_rate']:.1f} | {_fmt(r['reward_accuracy'], 3)} | "
            f"{r['wall_s']:.0f} |"
        )
    text = "\n".join(lines) + "\n"
    path.write_text(text)
    return text


def main(argv: list[str]) -> int:
    ap = argparse.ArgumentParser(
        prog="python -m preflab.bench.groupwise", description=__doc__.split("\n")[0]
    )
    ap.add_argument("--envs", nargs="+", default=list(SPECS), choices=list(SPECS))
    ap.add_argument("--dms", nargs="+", default=list(DMS), choices=list(DMS))
    ap.add_argument("--seeds", nargs="+", type=int, default=[0, 1])
    ap.add_argument("--noise-frac", type=float, default=0.5)
    ap.add_argument("--max-discordance", type=float, default=0.25)
    ap.add_argument("--pool", type=int, default=150)
    ap.add_argument("--static-rep", type=int, default=10)
    ap.add_argument("--quick", action="store_true", help="tiny budgets (smoke test)")
    ap.add_argument("--out", type=Path, default=RESULTS)
    ap.add_argument("--tag", default="", help="suffix of the output files")
    ap.add_argument(
        "--from-json",
        nargs="+",
        type=Path,
        default=None,
        help="write the report from runs JSON files of earlier (e.g. parallel) invocations",
    )
    args = ap.parse_args(argv)
    logging.basicConfig(level=logging.WARNING)
    torch.set_num_threads(1)
    specs = dict(SPECS)
    if args.quick:
        specs = {
            k: replace(s, total_steps=3 * s.steps_per_round, comparisons=12)
            for k, s in specs.items()
        }
    args.out.mkdir(parents=True, exist_ok=True)
    stem = "groupwise" + (f"_{args.tag}" if args.tag else "")
    t0 = time.perf_counter()
    rows: list[dict[str, Any]] = []
    if args.from_json:
        for f in args.from_json:
            rows += json.loads(f.read_text())
        args.envs = [e for e in SPECS if any(r["env"] == e for r in rows)]
        args.seeds = sorted({r["seed"] for r in rows})
    with tempfile.TemporaryDirectory(prefix="preflab-groupwise-") as tmp:
        for env in [] if args.from_json else args.envs:
            for seed in args.seeds:
                for dm in args.dms:
                    r = run_one(
                        env,
                        specs[env],
                        dm,
                        seed,
                        args.noise_frac,
                        args.max_discordance,
                        args.pool,
                        Path(tmp),
                    )
                    rows.append(r)
                    print(
                        f"{env:12s} {dm:12s} seed {seed}: return {r['true_return']:8.1f}  labels "
                        f"{r['dm_labels']:4d}  err {100 * r['dm_label_error_rate']:5.1f}%  "
                        f"skipped {r['dm_skipped']:3d}  {r['wall_s']:.0f}s",
                        flush=True,
                    )
                    (args.out / f"{stem}_runs.json").write_text(json.dumps(rows, indent=1))
    static = (
        {
            env: static_error_rates(
                specs[env], args.noise_frac, args.max_discordance, args.static_rep, 7
            )
            for env in args.envs
        }
        if args.static_rep > 0
        else {}
    )
    provenance = []
    if args.from_json:
        provenance = [
            "Training runs merged from "
            + ", ".join(f"`{f.name}`" for f in args.from_json)
            + " (the exact commands are at the top of the matching `.md` files; they ran in "
            f"parallel); summed run time {sum(r['wall_s'] for r in rows) / 60:.1f} min. Wall time "
            "above is this merge plus the fixed-pool error table.",
            "",
        ]
    meta = {
        "provenance": provenance,
        "command": "python -m preflab.bench.groupwise " + " ".join(argv),
        "date": datetime.now(UTC).strftime("%Y-%m-%d %H:%M UTC"),
        "wall_min": (time.perf_counter() - t0) / 60,
        "specs": specs,
        "envs": args.envs,
        "seeds": args.seeds,
        "noise_frac": args.noise_frac,
        "max_discordance": args.max_discordance,
        "pool": args.pool,
        "static_rep": args.static_rep,
    }
    print(write_report(rows, static, meta, args.out / f"{stem}.md"))
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))


__all__ = ["SPECS", "EnvSpec", "GroupGridEnv", "iqr_normalise", "main", "paired"]
