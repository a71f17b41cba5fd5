"""Potential-difference vs direct rewards from noisy multi-query rankings (paper 004, Fig. 7).

For each ranking accuracy × queries per pair × seed: sample consecutive state pairs of the
grid world, ask the synthetic noisy ranker N times per pair, fit σ on the confidences, then
train PPO (small MLP, compact observation) on (a) the potential difference σ(s_{t+1}) − σ(s_t)
with reward discount γ_r and (b) the direct reward, σ normalised minus a step penalty.
Reports the final success rate (deterministic policy, fresh layouts) and the true return.

Each run's result is appended to a JSON-lines file as soon as it finishes, so the grid can be
split across several invocations (``--accuracies``, ``--queries``, ``--modes``) and
``--report`` alone rebuilds the table from everything recorded.
"""

from __future__ import annotations

import argparse
import json
import sys
import time
from pathlib import Path

import gymnasium as gym
import numpy as np
import torch
from stable_baselines3 import PPO
from stable_baselines3.common.env_util import make_vec_env
from stable_baselines3.common.vec_env import DummyVecEnv

from preflab.bench._report import RESULTS, header, md_table
from preflab.llm import (
    RewardShaping,
    ScoreConfig,
    ScoreRewardVecEnv,
    fit_state_scores,
    noisy_confidences,
    sample_transitions,
    true_preference,
)

PPO_KW = dict(
    n_steps=128,
    batch_size=64,
    n_epochs=10,
    gamma=0.99,
    gae_lambda=0.9,
    ent_coef=0.01,
    learning_rate=1e-3,
    policy_kwargs=dict(net_arch=[64, 64]),
)
SHAPING = {
    "potential": RewardShaping(mode="potential", discount=0.99),
    "direct": RewardShaping(mode="direct", step_penalty=1.0),
}


def evaluate(model: PPO, env_id: str, n: int, seed: int) -> tuple[float, float]:
    env = gym.make(env_id)
    succ, ret = 0, 0.0
    for ep in range(n):
        o, _ = env.reset(seed=seed + ep)
        while True:
            act, _ = model.predict(o, deterministic=True)
            o, r, term, trunc, _ = env.step(act)
            ret += float(r)
            if term or trunc:
                break
        succ += int(term)
    env.close()
    return succ / n, ret / n


def one_run(
    env_id: str,
    accuracy: float,
    n_queries: int,
    seed: int,
    modes: list[str],
    pairs: int,
    steps: int,
    eval_episodes: int,
) -> list[dict]:
    rng = np.random.default_rng(seed)
    a, b = sample_transitions(env_id, pairs, rng)
    p = noisy_confidences(true_preference(a, b, env_id), accuracy, n_queries, rng)
    scorer = fit_state_scores(a, b, p, rng, ScoreConfig(epochs=20))
    out = []
    for mode in modes:
        t0 = time.perf_counter()
        venv = ScoreRewardVecEnv(
            make_vec_env(env_id, n_envs=8, seed=seed, vec_env_cls=DummyVecEnv),
            scorer,
            SHAPING[mode],
        )
        model = PPO("MlpPolicy", venv, seed=seed, verbose=0, device="cpu", **PPO_KW)
        model.learn(steps)
        success, ret = evaluate(model, env_id, eval_episodes, 10_000 + 100 * seed)
        venv.close()
        out.append(
            {
                "env": env_id,
                "accuracy": accuracy,
                "queries": n_queries,
                "seed": seed,
                "mode": mode,
                "success": success,
                "return": ret,
                "steps": steps,
                "pairs": pairs,
                "wall_s": time.perf_counter() - t0,
            }
        )
    return out


def report(path: Path, out: Path, argv: list[str] | None) -> str:
    recs = [json.loads(line) for line in path.read_text().splitlines() if line.strip()]
    keys = sorted(
        {(r["env"], r["accuracy"], r["queries"]) for r in recs}, key=lambda k: (k[0], -k[1], k[2])
    )
    rows = []
    for env, acc, nq in keys:
        row: list[object] = [env.split("/")[-1], "exact" if acc == 1.0 else f"{acc:.0%}", nq]
        for mode in ("potential", "direct"):
            rs = [
                r
                for r in recs
                if (r["env"], r["accuracy"], r["queries"], r["mode"]) == (env, acc, nq, mode)
            ]
            if rs:
                s = np.array([r["success"] for r in rs])
                row += [
                    f"{s.mean():.2f} ± {s.std():.2f} (n={len(rs)})",
                    float(np.mean([r["return"] for r in rs])),
                ]
            else:
                row += ["—", "—"]
        rows.append(row)
    steps = sorted({r["steps"] for r in recs})
    pairs = sorted({r["pairs"] for r in recs})
    md = header(
        "Noisy multi-query rankings: potential vs direct reward (paper 004, Fig. 7)",
        "preflab.bench.llm_fig7",
        argv,
        f"PPO {steps} env steps per run (8 envs, MLP 64×64, {PPO_KW['n_epochs']} epochs, batch "
        f"{PPO_KW['batch_size']}), {pairs} ranked state pairs per score model (20 epochs), eval "
        f"deterministic on fresh layouts; potential: γ_r = 0.99, no penalty; "
        f"direct: normalised σ − 1.0 "
        f"per step. Runs recorded in {path.name}",
    )
    md += md_table(
        [
            "env",
            "ranking accuracy",
            "queries/pair",
            "potential: success",
            "potential: return",
            "direct: success",
            "direct: return",
        ],
        rows,
    )
    out.write_text(md)
    return md


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(prog="preflab.bench.llm_fig7", description=__doc__)
    ap.add_argument("--env", default="PrefLab/Lock-v0")
    ap.add_argument("--accuracies", type=float, nargs="+", default=[1.0, 0.6])
    ap.add_argument("--queries", type=int, nargs="+", default=[1, 10])
    ap.add_argument("--modes", nargs="+", default=["potential", "direct"])
    ap.add_argument("--seeds", type=int, nargs="+", default=[0, 1])
    ap.add_argument("--pairs", type=int, default=3500)
    ap.add_argument("--steps", type=int, default=30_000)
    ap.add_argument("--eval-episodes", type=int, default=50)
    ap.add_argument("--runs", type=Path, default=RESULTS / "llm_fig7_runs.jsonl")
    ap.add_argument("--out", type=Path, default=RESULTS / "llm_fig7.md")
    ap.add_argument("--report", action="store_true", help="only rebuild the table from --runs")
    args = ap.parse_args(argv)
    torch.set_num_threads(1)
    if not args.report:
        args.runs.parent.mkdir(parents=True, exist_ok=True)
        for acc in args.accuracies:
            for nq in args.queries if acc < 1.0 else [1]:
                for seed in args.seeds:
                    for rec in one_run(
                        args.env,
                        acc,
                        nq,
                        seed,
                        args.modes,
                        args.pairs,
                        args.steps,
                        args.eval_episodes,
                    ):
                        with args.runs.open("a") as f:
                            f.write(json.dumps(rec) + "\n")
                        sys.stderr.write(f"{rec}\n")
    sys.stdout.write(report(args.runs, args.out, argv))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
