"""Pref-GUIDE reproduction with simulated evaluators on Pendulum-v1.

For each population ('top': attentive, low-noise evaluators; 'mixed': a third each of top,
middling and poor ones — noisy, drifting, lapsing), a PPO agent first trains on the
evaluators' real-time ratings (human-in-the-loop phase); then the evaluators leave and the
agent continues on a reward learned from their ratings (post-human phase):

* individual — Algorithm 1 (windows of 10, δ = 0.1) → one Bradley–Terry model per evaluator
  (the result is averaged over evaluators, as each evaluator would continue their own agent);
* voting — Algorithm 2: every individual model votes on every window pair; mean vote = label;
* majority — binary majority of the same votes;
* pooled — all evaluators' Algorithm 1 labels in one model;
* regression — GUIDE: MSE regression on the raw ratings, one per evaluator (averaged);
* true reward — the env's own reward in the post phase (reference, not a feedback method).

Table 1: Pearson r of each learned reward with the true reward on the phase-1 states.
Table 2: final true return after the post-human phase (mean over evaluators for individual
and regression). Writes benchmarks/results/prefguide.md (prefguide_sac.md with --algo sac).
Run: ``nice -n 10 python -m preflab.bench.prefguide`` (``--quick`` for a smoke run).
"""

from __future__ import annotations

import argparse
import logging
import time

import numpy as np
import torch

from preflab.bench._report import RESULTS, header, md_table
from preflab.reward import RewardConfig
from preflab.scalar import ScalarModelConfig, population
from preflab.scalar.guide import (
    METHODS,
    GuideConfig,
    human_phase,
    post_phase,
    reward_correlation,
    reward_models,
)

log = logging.getLogger(__name__)


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(
        prog="preflab bench prefguide", description=__doc__.split("\n\n")[0]
    )
    p.add_argument("--populations", nargs="+", default=["top", "mixed"])
    p.add_argument(
        "--rl-populations",
        nargs="*",
        default=["mixed"],
        help="populations with a post-human RL phase",
    )
    p.add_argument("--evaluators", type=int, default=3)
    p.add_argument("--human-steps", type=int, default=20_000)
    p.add_argument("--post-steps", type=int, default=20_000)
    p.add_argument(
        "--max-pairs", type=int, default=40_000, help="pairs each reward model trains on"
    )
    p.add_argument("--seeds", type=int, nargs="+", default=[0])
    p.add_argument("--algo", choices=("ppo", "sac"), default="ppo")
    p.add_argument("--n-envs", type=int, default=8)
    p.add_argument("--quick", action="store_true")
    args = p.parse_args(argv)
    logging.basicConfig(level=logging.INFO)
    torch.set_num_threads(1)
    if args.quick:
        args.human_steps, args.post_steps, args.evaluators, args.max_pairs = 4096, 2048, 3, 4000
    cfg = GuideConfig(
        algo=args.algo,
        n_envs=args.n_envs,
        human_steps=args.human_steps,
        post_steps=args.post_steps,
        eval_episodes=10 if not args.quick else 3,
    )
    mcfg = ScalarModelConfig(
        reward=RewardConfig(members=1, hidden=(64, 64)), max_pairs=args.max_pairs
    )
    t0 = time.time()
    corr_rows, rl_rows = [], []
    for kind in args.populations:
        for seed in args.seeds:
            rng = np.random.default_rng([seed, len(kind)])
            evals = population(kind, args.evaluators, rng)
            phase = human_phase(cfg, evals, rng)
            models = reward_models(phase, cfg, rng, mcfg)
            obs = phase.items.obs[:, 0].numpy()
            acts = phase.items.acts[:, 0].numpy()
            rating_corr = [
                float(np.corrcoef(phase.ratings[j], phase.true_rewards)[0, 1])
                for j in range(args.evaluators)
            ]
            row = [kind, seed, f"{np.mean(rating_corr):.3f}"]
            for m in METHODS:
                cs = [reward_correlation(mod, obs, acts, phase.true_rewards) for mod in models[m]]
                row.append(f"{np.mean(cs):.3f}" + (f" ± {np.std(cs):.3f}" if len(cs) > 1 else ""))
            corr_rows.append(row)
            log.info(
                "%s seed %d: phase 1 return %.1f, correlations %s (%.0f s)",
                kind,
                seed,
                phase.return_after,
                row,
                time.time() - t0,
            )
            if kind not in args.rl_populations:
                continue
            rets = {m: [post_phase(phase, mod, cfg, rng) for mod in models[m]] for m in METHODS}
            rets["true reward"] = [post_phase(phase, None, cfg, rng)]
            rl_rows.append(
                [kind, seed, f"{phase.return_after:.1f}"]
                + [
                    f"{np.mean(rets[m]):.1f}"
                    + (f" ± {np.std(rets[m]):.1f}" if len(rets[m]) > 1 else "")
                    for m in (*METHODS, "true reward")
                ]
            )
            log.info("%s seed %d RL: %s (%.0f s)", kind, seed, rl_rows[-1], time.time() - t0)
    budgets = (
        (
            f"Pendulum-v1, PPO ({args.n_envs} envs × 256 steps, batch 256, 5 epochs, lr 1e-3, γ 0.97), "
            if args.algo == "ppo"
            else f"Pendulum-v1, SAC ({args.n_envs} env(s), (64, 64), lr 1e-3, batch 256, γ 0.98; replay "
            "buffer relabelled by the learned reward at the start of the post-human phase), "
        )
        + f"{args.evaluators} simulated evaluators per population, human-in-the-loop "
        f"{args.human_steps} steps, post-human "
        f"{args.post_steps} steps, reward models 1 × (64, 64) trained on ≤ {args.max_pairs} pairs "
        "(3 epochs), window 10, δ = 0.1, "
        f"voting δ = 0.1 std, final return over {cfg.eval_episodes} episodes, seeds {args.seeds}"
    )
    text = header(
        "Pref-GUIDE — learning from real-time scalar feedback (simulated evaluators)",
        "preflab.bench.prefguide",
        argv,
        budgets,
    )
    text += "## Learned reward vs true reward (Pearson r on the phase-1 states)\n\n"
    text += md_table(["population", "seed", "raw ratings", *METHODS], corr_rows)
    if rl_rows:
        text += "\n## Final true return after the post-human phase (higher is better)\n\n"
        text += md_table(
            ["population", "seed", "end of human phase", *METHODS, "true reward"], rl_rows
        )
    text += (
        "\nTarget: voting ≥ individual ≥ regression on the mixed population. "
        f"Wall time {time.time() - t0:.0f} s.\n"
    )
    RESULTS.mkdir(parents=True, exist_ok=True)
    name = "prefguide.md" if args.algo == "ppo" else f"prefguide_{args.algo}.md"
    (RESULTS / name).write_text(text)
    print(text)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
