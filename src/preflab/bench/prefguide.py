"""Pref-GUIDE reproduction with simulated evaluators on Pendulum-v1, through the one loop.

For each population ('top': attentive, low-noise evaluators; 'mixed': a third each of top,
middling and poor ones — noisy, drifting, lapsing), every method is one
:class:`preflab.loop.PreferenceLoop` run (:mod:`preflab.scalar.guide`): the agent first trains on
the evaluators' live ratings (human-in-the-loop phase, ``policy_reward.live_steps``; the
ratings are stored as rating streams); then the same loop continues on the reward learned from
the stored ratings by the method's aggregator (post-human phase):

* individual — Algorithm 1 (windows of 10, δ = 0.1) on one evaluator's ratings: one run per
  evaluator (``WindowAggregator(annotators=(id,))``), averaged over evaluators;
* voting — Algorithm 2: every evaluator's model votes on every window pair; mean vote = label;
* pooled — every evaluator's Algorithm 1 labels in one model;
* majority — binary majority of the voting step's votes;
* regression — GUIDE: MSE regression on the raw ratings, one per evaluator. It is not a
  preference label set, so no loop trains a policy on it: it appears in Table 1 only;
* true reward — plain SB3 PPO/SAC on the env reward for the same number of steps (reference).

Table 1: Pearson r of each method's reward model (fit on the stored ratings of the first run,
as the loop fits them) with the true reward on the rated steps. Table 2: final true return at
the end of the post-human phase (mean ± std over evaluators for individual).
Writes benchmarks/results/prefguide.md (prefguide_sac.md with --algo sac; ``--out`` elsewhere).
Run: ``nice -n 10 python -m preflab.bench.prefguide`` (``--quick`` for a smoke run).
"""

from __future__ import annotations

import argparse
import logging
import tempfile
import time
from dataclasses import replace
from pathlib import Path

import numpy as np
import torch

from preflab.aggregate import Feedback
from preflab.bench._report import RESULTS, header, md_table
from preflab.envs import make_vec_env
from preflab.evaluate import evaluate_policy
from preflab.loop import PreferenceLoop
from preflab.policy.agents import make_agent
from preflab.policy.presets import preset
from preflab.scalar import NoQueries, population
from preflab.scalar.guide import (
    METHODS,
    GuideConfig,
    make_source,
    method_models,
    method_runs,
    rated_steps,
    regression_models,
    reward_correlation,
)

log = logging.getLogger(__name__)
CORR_METHODS = ("individual", "voting", "regression", "pooled", "majority")


def true_reward_return(config: GuideConfig, seed: int) -> float:
    """Reference: plain RL on the env reward for human + post steps (no learned reward)."""
    tc = method_runs(config, 1, seed, methods=("pooled",))[0].train
    venv = make_vec_env(config.env_id, config.n_envs, seed=seed)
    hyper = preset(tc.algo, tc.n_envs, tc.steps_per_round, overrides=tc.agent_overrides())
    agent = make_agent(tc.algo, venv, seed=seed, net_arch=list(tc.net_arch), **hyper)
    agent.learn(total_timesteps=tc.total_steps)
    mean, _ = evaluate_policy(
        agent, config.env_id, n_episodes=config.eval_episodes, seed=10_000 + seed
    )
    venv.close()
    return mean


def _fmt(xs: list[float], digits: int) -> str:
    return f"{np.mean(xs):.{digits}f}" + (f" ± {np.std(xs):.{digits}f}" if len(xs) > 1 else "")


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(
        prog="preflab bench prefguide", description=__doc__.split("\n\n")[0]
    )
    p.add_argument("--populations", nargs="+", default=["top", "mixed"])
    p.add_argument(
        "--rl-populations",
        nargs="*",
        default=["mixed"],
        help="populations with a post-human RL phase (one loop run per method)",
    )
    p.add_argument("--evaluators", type=int, default=3)
    p.add_argument("--human-steps", type=int, default=20_000)
    p.add_argument("--post-steps", type=int, default=20_000)
    p.add_argument("--steps-per-round", type=int, default=4096)
    p.add_argument("--item-length", type=int, default=1, help="steps per rated item")
    p.add_argument(
        "--max-pairs", type=int, default=40_000, help="pairs each reward model trains on"
    )
    p.add_argument("--seeds", type=int, nargs="+", default=[0])
    p.add_argument("--algo", choices=("ppo", "sac"), default="ppo")
    p.add_argument("--n-envs", type=int, default=8)
    p.add_argument("--eval-episodes", type=int, default=10, help="final evaluation episodes")
    p.add_argument("--quick", action="store_true")
    p.add_argument(
        "--out", type=Path, default=None, help="results file (default: benchmarks/results)"
    )
    p.add_argument("--run-root", type=Path, default=None, help="run directories (default: temp)")
    args = p.parse_args(argv)
    logging.basicConfig(level=logging.INFO)
    torch.set_num_threads(1)
    if args.quick:
        args.human_steps, args.post_steps, args.evaluators, args.max_pairs = 4096, 2048, 3, 4000
        args.steps_per_round = min(args.steps_per_round, 2048)
    cfg = GuideConfig(
        algo=args.algo,
        n_envs=args.n_envs,
        human_steps=args.human_steps,
        post_steps=args.post_steps,
        steps_per_round=args.steps_per_round,
        item_length=args.item_length,
        max_pairs=args.max_pairs,
        eval_episodes=args.eval_episodes if not args.quick else 3,
    )
    root = args.run_root or Path(tempfile.mkdtemp(prefix="prefguide-"))
    t0 = time.time()
    corr_rows, rl_rows = [], []
    for kind in args.populations:
        for seed in args.seeds:
            evals = population(kind, args.evaluators, np.random.default_rng([seed, len(kind)]))
            ids = [f"evaluator-{k}" for k in range(args.evaluators)]
            rl = kind in args.rl_populations
            runs = method_runs(cfg, args.evaluators, seed, methods=METHODS if rl else ("pooled",))
            returns: dict[str, list[float]] = {m: [] for m in METHODS}
            first: PreferenceLoop | None = None
            end_of_human: list[float] = []
            for run in runs:
                # without an RL phase only the human phase runs: its ratings give Table 1
                tc = run.train if rl else replace(run.train, total_steps=cfg.human_steps)
                name = f"{kind}-s{seed}-{run.method}" + (
                    f"-{run.evaluator}" if run.evaluator else ""
                )
                loop = PreferenceLoop(
                    tc,
                    root / name,
                    source=make_source(cfg, evals, seed),
                    selector=NoQueries(),
                    aggregator=run.aggregator,
                )
                summary = loop.run()
                returns[run.method].append(summary.true_return)
                hist = loop.state.history
                live = tc.policy_reward.live_steps
                switch = next((r for r in hist if r["env_steps"] >= live), hist[-1])
                end_of_human.append(float(switch["train_true_return"]))
                log.info(
                    "%s: true return %.1f (%.0f s)", name, summary.true_return, time.time() - t0
                )
                if first is None:
                    first = loop
                else:
                    loop.venv.close()
            assert first is not None
            fb = Feedback(
                queries=first.queries, judgements=(), ratings=first.ratings, segments=first.segments
            )
            items, true, values = rated_steps(
                list(first.segments.values()),
                {q.id: q.a for q in first.queries.values() if q.kind == "rating"},
                first.ratings,
            )
            models = method_models(fb, cfg, seed, ids)
            models["regression"] = list(regression_models(items, values, seed, cfg.model).values())
            rating_corr = [
                float(np.corrcoef(v[np.isfinite(v)], true[np.isfinite(v)])[0, 1])
                for v in values.values()
            ]
            row: list[object] = [kind, seed, f"{np.mean(rating_corr):.3f}"]
            for m in CORR_METHODS:
                row.append(_fmt([reward_correlation(mod, items, true) for mod in models[m]], 3))
            corr_rows.append(row)
            log.info("%s seed %d correlations %s (%.0f s)", kind, seed, row, time.time() - t0)
            if not rl:
                continue
            ref = true_reward_return(cfg, seed)
            rl_rows.append(
                [kind, seed, f"{np.mean(end_of_human):.1f}"]
                + [_fmt(returns[m], 1) for m in METHODS]
                + [f"{ref:.1f}"]
            )
            log.info("%s seed %d RL: %s (%.0f s)", kind, seed, rl_rows[-1], time.time() - t0)
    budgets = (
        (
            f"Pendulum-v1, PPO ({args.n_envs} envs × {min(2048, args.steps_per_round) // args.n_envs} steps, batch 256, 5 epochs, "
            "lr 1e-3, γ 0.97), "
            if args.algo == "ppo"
            else f"Pendulum-v1, SAC ({args.n_envs} env(s), (64, 64), lr 1e-3, batch 256, γ 0.98; replay "
            "buffer relabelled by the learned reward at the start of the post-human phase), "
        )
        + f"one preflab.loop run per method, {args.evaluators} simulated evaluators per "
        f"population, human-in-the-loop {args.human_steps} steps (live ratings; ends at the first "
        f"round boundary after it), post-human {args.post_steps} steps, rounds of "
        f"{args.steps_per_round} steps, items of {args.item_length} step(s), reward models "
        f"1 × (64, 64) trained on ≤ {args.max_pairs} pairs (3 epochs), window 10, δ = 0.1, "
        f"voting δ = 0.1 std, final return over {cfg.eval_episodes} episodes, seeds {args.seeds}; "
        "true reward: plain RL on the env reward for the same total steps"
    )
    text = header(
        "Pref-GUIDE — learning from real-time scalar feedback (simulated evaluators)",
        "preflab.bench.prefguide",
        argv,
        budgets,
    )
    text += "## Learned reward vs true reward (Pearson r on the rated steps)\n\n"
    text += md_table(["population", "seed", "raw ratings", *CORR_METHODS], corr_rows)
    if rl_rows:
        text += "\n## Final true return after the post-human phase (higher is better)\n\n"
        text += md_table(
            ["population", "seed", "end of human phase", *METHODS, "true reward"], rl_rows
        )
    text += (
        "\nTarget: voting ≥ individual ≥ regression on the mixed population (regression: "
        f"Table 1 only). Wall time {time.time() - t0:.0f} s.\n"
    )
    name = "prefguide.md" if args.algo == "ppo" else f"prefguide_{args.algo}.md"
    out = args.out or RESULTS / name
    out.parent.mkdir(parents=True, exist_ok=True)
    out.write_text(text)
    print(text)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
