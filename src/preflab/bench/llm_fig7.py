"""Potential-difference vs direct rewards from noisy multi-query rankings (paper 004, Fig. 7).

Every run goes through the one loop (:func:`preflab.loop.PreferenceLoop`): a
:class:`~preflab.llm.TransitionSelector` samples ``--pairs`` consecutive state pairs of the grid
world (every stage of the task) and asks them all in round 0; the judge source answers each N
times (the synthetic :class:`~preflab.llm.NoisyRanker` with a chosen accuracy, or a real
:class:`~preflab.llm.LLMJudge` with ``--base-url``); :class:`~preflab.aggregate.ConfidenceAggregator`
turns the answers into soft labels; a state-only reward model σ (one member, trained on every
pair) is fit once; then PPO (small MLP, compact observation) trains on (a) the potential
difference σ(s_{t+1}) − σ(s_t) with reward discount γ_r = 0.99 (``policy_reward.mode =
'potential'``) or (b) the direct reward, σ normalised minus a step penalty of 1 (``'direct'``).
Reports the final success rate (deterministic policy, fresh layouts) and the true return.

Each run's result is appended to a JSON-lines file as soon as it finishes, so the grid can be
split across several invocations (``--accuracies``, ``--queries``, ``--modes``) and
``--report`` alone rebuilds the table from everything recorded.
"""

from __future__ import annotations

import argparse
import json
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

import gymnasium as gym
import numpy as np
import torch

from preflab.aggregate import ConfidenceAggregator
from preflab.bench._report import RESULTS, header, md_table
from preflab.config import TrainConfig
from preflab.llm import LLMJudge, NoisyRanker, TransitionSelector
from preflab.loop import PreferenceLoop
from preflab.policy.shaping import PolicyRewardConfig
from preflab.reward import FitConfig, RewardConfig

N_ENVS = 8
PPO_KW: dict[str, Any] = dict(
    batch_size=64,
    n_epochs=10,
    gamma=0.99,
    gae_lambda=0.9,
    ent_coef=0.01,
    learning_rate=1e-3,
)
"""PPO settings (n_steps = 2048 // 8 envs per rollout: the preset's on-policy rollout length)."""
SHAPING = {
    "potential": PolicyRewardConfig(mode="potential", discount=0.99),
    "direct": PolicyRewardConfig(mode="direct", step_penalty=1.0),
}
SCORE_FIT = FitConfig(
    epochs=20,
    batch_size=128,
    lr=1e-3,
    random_answer=0.0,
    bootstrap=False,
    holdout=0.0,
    l2_init=1e-4,
    adapt_l2=False,
    l2_limits=(0.0, 10.0),
)
"""σ's fit: 20 epochs on every pair (one member: nothing held out), fixed ℓ2, no ε term."""


def fig7_config(
    env_id: str, mode: str, seed: int, *, pairs: int, steps: int, eval_episodes: int
) -> TrainConfig:
    """The loop configuration of one run: all pairs in round 0, one PPO round of ``steps``."""
    initial = 16 * N_ENVS  # random steps before the first fit (the loop needs a few segments)
    return TrainConfig(
        env_id=env_id,
        algo="ppo",
        seed=seed,
        total_steps=initial + steps,
        total_labels=pairs,
        initial_label_frac=1.0,
        initial_steps=initial,
        steps_per_round=steps,
        segment_length=1,
        selector="random",
        n_envs=N_ENVS,
        agent_kwargs=json.dumps(PPO_KW),
        net_arch=(64, 64),
        reward=RewardConfig(members=1, hidden=(64, 64), use_actions=False),
        fit=SCORE_FIT,
        first_fit_epochs=SCORE_FIT.epochs,
        policy_reward=SHAPING[mode],
        eval_episodes=eval_episodes,
    )


def evaluate(model: Any, env_id: str, n: int, seed: int) -> tuple[float, float]:
    """Success rate and mean true return of the deterministic policy on fresh layouts."""
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
    *,
    run_root: Path | None = None,
    judge: Any = None,
) -> list[dict]:
    """One (accuracy, queries, seed) cell: a loop run per reward mode, each asking the same
    pairs (same seed) of a fresh judge. ``judge`` (optional) builds the source: a callable
    (n_queries, seed) → FeedbackSource; default: the noisy ranker with ``accuracy``."""
    root = Path(run_root) if run_root is not None else Path(tempfile.mkdtemp(prefix="fig7-"))
    out = []
    for mode in modes:
        t0 = time.perf_counter()
        cfg = fig7_config(env_id, mode, seed, pairs=pairs, steps=steps, eval_episodes=eval_episodes)
        source = (
            judge(n_queries, seed)
            if judge is not None
            else NoisyRanker(
                env_id,
                accuracy=accuracy,
                n_queries=n_queries,
                rng=np.random.default_rng([seed, 7]),
            )
        )
        run_dir = root / f"{env_id.split('/')[-1]}-a{accuracy:g}-q{n_queries}-s{seed}-{mode}"
        loop = PreferenceLoop(
            cfg,
            run_dir,
            source=source,
            selector=TransitionSelector(env_id, pairs),
            aggregator=ConfidenceAggregator(),
        )
        summary = loop.run()
        success, ret = evaluate(loop.agent, env_id, eval_episodes, 10_000 + 100 * seed)
        loop.venv.close()
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
                "n_labels": summary.n_labels,
                "wall_s": time.perf_counter() - t0,
                "run_dir": str(run_dir),
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
        f"one loop run per cell and mode (preflab.loop): PPO {steps} env steps per run "
        f"({N_ENVS} envs × {min(2048, max(steps)) // N_ENVS} steps per rollout, MLP 64×64, {PPO_KW['n_epochs']} epochs, batch "
        f"{PPO_KW['batch_size']}), {pairs} ranked state pairs asked in round 0, σ = 1 state-only "
        f"member (64×64) fit on all pairs ({SCORE_FIT.epochs} epochs), eval deterministic on "
        f"fresh layouts; potential: γ_r = 0.99, no penalty; direct: normalised σ(s_t) − 1.0 "
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
    ap.add_argument(
        "--run-root", type=Path, default=None, help="where run directories go (default: a temp dir)"
    )
    ap.add_argument(
        "--base-url",
        default="",
        help="ask a real chat server (LLMJudge) at this URL instead of the noisy ranker",
    )
    ap.add_argument("--model", default="default", help="model name for --base-url")
    args = ap.parse_args(argv)
    torch.set_num_threads(1)
    judge = None
    if args.base_url:
        from preflab.llm import ChatClient, ClientConfig

        client = ChatClient(ClientConfig(base_url=args.base_url, model=args.model))

        def judge(n_queries: int, _seed: int) -> LLMJudge:
            return LLMJudge(client, args.env, n_queries=n_queries)

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
                        run_root=args.run_root,
                        judge=judge,
                    ):
                        with args.runs.open("a") as f:
                            f.write(json.dumps(rec) + "\n")
                        sys.stderr.write(f"{rec}\n")
    sys.stdout.write(report(args.runs, args.out, argv))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
