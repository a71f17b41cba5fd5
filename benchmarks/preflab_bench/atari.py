"""Paper 002 on Atari: A2C from synthetic preferences vs A2C on the true reward, same frames.

Arms (each can run in its own process with ``--arm``; rows are appended to
``benchmarks/results/atari_runs.jsonl`` and ``atari.md`` is rebuilt from all rows):

- ``preflab-a2c``: PrefLab's loop (:meth:`preflab.config.TrainConfig.atari`): A2C (CnnPolicy,
  16 envs) trained only on the learned reward of a convolutional ensemble (appendix A.2), fit
  on labels from the synthetic oracle (true game score over 25-step clips; both clips without
  score = equal); disagreement selection;
- ``a2c-true``: the same A2C (same wrappers, envs, hyperparameters, frames) on the true,
  clipped reward;
- ``random``: the uniformly random policy (the zero of the target).

Curves are the true game score of whole games finished during training (SB3's Monitor, mean
of the last 10 games), against emulator frames (4 per agent step). The final policy is also
evaluated on ``--eval-episodes`` fresh games. The reward model's pair accuracy is measured on
held-out segments (recorded after training from the final policy and the random policy, never
labelled), over pairs whose true returns differ. Target of issue #13: the preference agent's
gain over random ≥ half of A2C-on-true-reward's gain with the same frames.
"""

from __future__ import annotations

import argparse
import json
import math
import tempfile
import time
from pathlib import Path
from typing import Any

import numpy as np
import torch
from stable_baselines3.common.callbacks import BaseCallback

from preflab.config import ATARI_SEGMENT_LENGTH, TrainConfig
from preflab.loop import PreferenceLoop
from preflab.pixels.atari import (
    evaluate_atari,
    make_atari_vec_env,
)
from preflab.policy.agents import make_agent
from preflab.policy.evaluate import reward_agreement
from preflab.policy.rollout import collect_segments
from preflab.reward.batch import SegmentBatch
from preflab.rundir.reporting import append_jsonl, md_table, read_jsonl
from preflab.runs import start_loop
from preflab_bench._report import RESULTS, command, header

RUNS = RESULTS / "atari_runs.jsonl"
PROGRESS = RESULTS / "atari_progress.jsonl"
"""Curve points as they come (a run stopped early still leaves its curve)."""
SUMMARY = RESULTS / "atari.md"
GAMES = {"pong": "ALE/Pong-v5", "beamrider": "ALE/BeamRider-v5", "enduro": "ALE/Enduro-v5"}


class _Curve(BaseCallback):
    """Every ``every`` agent steps: mean true score of the last 10 finished games."""

    def __init__(self, every: int, t0: float) -> None:
        super().__init__()
        self.every, self.t0, self.next = every, t0, every
        self.points: list[dict[str, float]] = []

    def _on_step(self) -> bool:
        if self.num_timesteps >= self.next:
            self.next += self.every
            self.points.append(_point(self.model, self.num_timesteps, self.t0))
            _log("a2c-true", self.points[-1])
        return True


def _log(arm: str, point: dict[str, Any]) -> None:
    append_jsonl(PROGRESS, {"arm": arm, "at": time.strftime("%H:%M:%S", time.gmtime())} | point)


def _point(agent: Any, steps: int, t0: float) -> dict[str, float]:
    ep = [e["r"] for e in agent.ep_info_buffer] if agent.ep_info_buffer else []
    return {
        "agent_steps": int(steps),
        "frames": 4 * int(steps),
        "score": float(np.mean(ep[-10:])) if ep else math.nan,
        "games": len(ep),
        "wall_s": time.perf_counter() - t0,
    }


class _RandomAgent:
    def __init__(self, space: Any, seed: int) -> None:
        self.space = space
        self.rng = np.random.default_rng(seed)

    def predict(self, obs: np.ndarray, deterministic: bool = True) -> tuple[np.ndarray, None]:
        del deterministic
        return self.rng.integers(0, self.space.n, size=(len(obs),)), None


def run_random(env_id: str, seed: int, episodes: int) -> dict[str, Any]:
    t0 = time.perf_counter()
    venv = make_atari_vec_env(env_id, 1, seed)
    space = venv.action_space
    venv.close()
    mean, std = evaluate_atari(
        _RandomAgent(space, seed), env_id, n_episodes=episodes, seed=20_000 + seed
    )
    return {
        "arm": "random",
        "eval_score": mean,
        "eval_std": std,
        "wall_s": time.perf_counter() - t0,
    }


def run_true(
    env_id: str, seed: int, steps: int, n_envs: int, every: int, episodes: int
) -> dict[str, Any]:
    venv = make_atari_vec_env(env_id, n_envs, seed, clip_reward=True)
    agent = make_agent("a2c", venv, seed=seed, net_arch=[])
    t0 = time.perf_counter()
    cb = _Curve(every, t0)
    agent.learn(total_timesteps=steps, callback=cb, progress_bar=False)
    wall = time.perf_counter() - t0
    cb.points.append(_point(agent, agent.num_timesteps, t0))
    mean, std = evaluate_atari(
        agent, env_id, n_episodes=episodes, seed=10_000 + seed, deterministic=False
    )
    return {
        "arm": "a2c-true",
        "curve": cb.points,
        "eval_score": mean,
        "eval_std": std,
        "agent_steps": int(agent.num_timesteps),
        "wall_s": wall,
    }


def run_pref(
    env_id: str,
    seed: int,
    steps: int,
    n_envs: int,
    every: int,
    labels: int,
    episodes: int,
    run_dir: Path,
) -> dict[str, Any]:
    config = TrainConfig.atari(
        env_id,
        seed=seed,
        n_envs=n_envs,
        total_steps=steps,
        steps_per_round=every,
        total_labels=labels,
        eval_episodes=episodes,
    )
    t0 = time.perf_counter()
    curve: list[dict[str, float]] = []

    def progress(row: dict[str, Any]) -> None:
        curve.append(
            {
                "agent_steps": int(row["env_steps"]),
                "frames": 4 * int(row["env_steps"]),
                "score": float(row["train_true_return"]),
                "n_labels": int(row["n_labels"]),
                "reward_accuracy_recent": float(row["reward_accuracy"]),
                "wall_s": time.perf_counter() - t0,
            }
        )
        _log("preflab-a2c", curve[-1])

    loop = start_loop(config, run_dir, progress=progress)
    # the final evaluation of the loop is deterministic; score the stochastic policy like a2c-true
    result = loop.run()
    mean, std = evaluate_atari(
        result.agent, env_id, n_episodes=episodes, seed=10_000 + seed, deterministic=False
    )
    acc, n_pairs = heldout_accuracy(loop, env_id, seed)
    return {
        "arm": "preflab-a2c",
        "curve": curve,
        "eval_score": mean,
        "eval_std": std,
        "eval_score_deterministic": result.true_return,
        "agent_steps": result.env_steps,
        "n_labels": result.n_labels,
        "heldout_pair_accuracy": acc,
        "heldout_pairs": n_pairs,
        "wall_s": result.wall_s,
        "run_dir": str(run_dir),
    }


def heldout_accuracy(loop: PreferenceLoop, env_id: str, seed: int) -> tuple[float, int]:
    """Pair accuracy of the final reward model on fresh, never-labelled segments."""
    rng = np.random.default_rng(30_000 + seed)
    venv = make_atari_vec_env(env_id, 8, 30_000 + seed)
    segs = collect_segments(venv, loop.agent, 400, ATARI_SEGMENT_LENGTH, rng, env_id=env_id)
    segs += collect_segments(venv, None, 200, ATARI_SEGMENT_LENGTH, rng, env_id=env_id)
    venv.close()
    truth = np.array([s.true_return for s in segs])
    batch = SegmentBatch.from_segments(segs)
    acc, _ = reward_agreement(loop.ensemble, batch, truth, rng, n_pairs=4000)
    n_distinct = int(sum(1 for i in range(len(truth)) for j in range(i) if truth[i] != truth[j]))
    return acc, n_distinct


def _final(row: dict[str, Any]) -> float:
    """Training-curve score at the end: mean of the last 3 points with games."""
    pts = [p["score"] for p in row.get("curve", []) if math.isfinite(p["score"])]
    return float(np.mean(pts[-3:])) if pts else math.nan


def summarise(argv: list[str] | None) -> str:
    rows = read_jsonl(RUNS) if RUNS.exists() else []
    latest: dict[tuple[str, str, int, int], dict[str, Any]] = {}
    for r in rows:
        latest[(r["game"], r["arm"], r["seed"], r.get("agent_steps_budget", 0))] = r
    out = [
        header(
            "Paper 002 on Atari: A2C from synthetic preferences vs A2C on the true reward",
            "atari",
            argv,
            "see each table row (frames = 4 × agent steps; 2 shared cores, torch 1 thread per arm)",
        )
    ]
    out.append(
        "Rows come from `benchmarks/results/atari_runs.jsonl` (latest row per game, arm, seed, "
        "budget). Score = true game score; `curve end` = mean of the last 3 curve points (mean "
        "of the last 10 training games each); `eval` = fresh games with the stochastic policy.\n\n"
    )
    table = []
    for (game, arm, seed, budget), r in sorted(latest.items()):
        table.append(
            [
                game,
                arm,
                seed,
                4 * budget if budget else "",
                _final(r) if arm != "random" else "",
                f"{r['eval_score']:.3g} ± {r.get('eval_std', math.nan):.2g}",
                r.get("n_labels", ""),
                r.get("heldout_pair_accuracy", ""),
                r.get("wall_s", math.nan),
                r.get("command", ""),
            ]
        )
    out.append(
        md_table(
            [
                "game",
                "arm",
                "seed",
                "frames",
                "curve end",
                "eval",
                "labels",
                "held-out pair acc",
                "wall s",
                "command",
            ],
            table,
        )
    )
    for (game, arm, seed, budget), r in sorted(latest.items()):
        if r.get("curve"):
            out.append(f"\n### Curve: {game} {arm} seed {seed} ({4 * budget} frames)\n\n")
            out.append(
                md_table(
                    ["frames", "score (last 10 games)", "labels", "wall s"],
                    [
                        [p["frames"], p["score"], p.get("n_labels", ""), p["wall_s"]]
                        for p in r["curve"]
                    ],
                )
            )
    # target check per (game, seed, budget)
    out.append("\n## Target (issue #13): preference gain ≥ ½ × true-reward gain over random\n\n")
    checks = []
    for (game, arm, seed, budget), r in sorted(latest.items()):
        if arm != "preflab-a2c":
            continue
        true = latest.get((game, "a2c-true", seed, budget))
        rnd = [v for (g, a, _s, _b), v in latest.items() if g == game and a == "random"]
        if true is None or not rnd:
            continue
        base = float(np.mean([v["eval_score"] for v in rnd]))
        gp, gt = r["eval_score"] - base, true["eval_score"] - base
        cp, ct = _final(r) - base, _final(true) - base
        noise = 2 * float(true.get("eval_std", 0.0)) / math.sqrt(3)
        if gt <= max(1.0, noise):
            verdict = (
                "not measurable: A2C on the true reward has not improved beyond noise "
                "at this budget (target NOT claimed)"
            )
        else:
            verdict = "met" if gp >= 0.5 * gt else "NOT met"
        checks.append([game, seed, 4 * budget, base, gp, gt, cp, ct, verdict])
    if not checks:  # say so in the table rather than leave it empty
        checks.append(
            [
                "—",
                "—",
                "—",
                "—",
                "—",
                "—",
                "—",
                "—",
                "no preference and true-reward arm pair recorded yet",
            ]
        )
    out.append(
        md_table(
            [
                "game",
                "seed",
                "frames",
                "random",
                "pref gain (eval)",
                "true gain (eval)",
                "pref gain (curve)",
                "true gain (curve)",
                "target",
            ],
            checks,
        )
    )
    return "".join(out)


def main(argv: list[str]) -> int:
    ap = argparse.ArgumentParser(
        prog="preflab bench atari",
        description=__doc__,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    ap.add_argument("--game", choices=sorted(GAMES), default="pong")
    ap.add_argument("--arm", choices=["all", "preflab-a2c", "a2c-true", "random"], default="all")
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument(
        "--frames",
        type=int,
        default=1_000_000,
        help="emulator frames per learning arm (4 per agent step)",
    )
    ap.add_argument("--labels", type=int, default=300)
    ap.add_argument("--n-envs", type=int, default=16)
    ap.add_argument(
        "--round-frames",
        type=int,
        default=80_000,
        help="frames between feedback rounds / curve points",
    )
    ap.add_argument("--eval-episodes", type=int, default=3)
    ap.add_argument("--torch-threads", type=int, default=1)
    ap.add_argument("--summarise", action="store_true", help="only rebuild atari.md from the jsonl")
    ap.add_argument(
        "--out-dir",
        type=Path,
        default=None,
        help="write atari_runs.jsonl, atari_progress.jsonl and atari.md here "
        "(default benchmarks/results)",
    )
    args = ap.parse_args(argv)
    if args.out_dir is not None:  # one place decides where this bench writes
        global RUNS, PROGRESS, SUMMARY
        RUNS, PROGRESS, SUMMARY = (
            args.out_dir / "atari_runs.jsonl",
            args.out_dir / "atari_progress.jsonl",
            args.out_dir / "atari.md",
        )
    if args.summarise:
        SUMMARY.write_text(summarise(argv))
        print(f"wrote {SUMMARY}")
        return 0
    torch.set_num_threads(args.torch_threads)
    env_id = GAMES[args.game]
    steps = args.frames // 4
    every = max(ATARI_SEGMENT_LENGTH * args.n_envs, args.round_frames // 4)
    arms = ["random", "a2c-true", "preflab-a2c"] if args.arm == "all" else [args.arm]
    RUNS.parent.mkdir(parents=True, exist_ok=True)
    for arm in arms:
        t0 = time.perf_counter()
        if arm == "random":
            row = run_random(env_id, args.seed, args.eval_episodes)
        elif arm == "a2c-true":
            row = run_true(env_id, args.seed, steps, args.n_envs, every, args.eval_episodes)
        else:
            run_dir = Path(tempfile.mkdtemp(prefix=f"atari-{args.game}-s{args.seed}-"))
            row = run_pref(
                env_id,
                args.seed,
                steps,
                args.n_envs,
                every,
                args.labels,
                args.eval_episodes,
                run_dir / "run",
            )
        row |= {
            "game": args.game,
            "env_id": env_id,
            "seed": args.seed,
            "agent_steps_budget": steps if arm != "random" else 0,
            "n_envs": args.n_envs,
            "torch_threads": args.torch_threads,
            "command": command("atari", argv),
            "total_s": time.perf_counter() - t0,
            "finished_at": time.strftime("%Y-%m-%d %H:%M UTC", time.gmtime()),
        }
        append_jsonl(RUNS, row)
        print(json.dumps({k: v for k, v in row.items() if k != "curve"}))
    SUMMARY.write_text(summarise(argv))
    print(f"wrote {SUMMARY}")
    return 0
