"""Reproduction of paper 000's simulation study (Table 1) at CPU size.

Three simulated decision makers (pairwise, groupwise, interactive; ``preflab.sources.deciders``)
make the same number of comparisons each (the paper's 400 by default), train a reward model
and a PPO policy through the core loop (``preflab.runs.train``), and are compared on the
label error rate of their answers and on the final true return, paired by seed.

Runs append one JSON line each to ``benchmarks/results/groupwise_runs.jsonl`` (a run already
in the file is not repeated, so long experiments are split into several invocations); the
report step (``--report``, or the end of every invocation) rebuilds
``benchmarks/results/groupwise.md`` from all the lines: the paper's Table 1, ours with 95%
CIs, the paired differences (interactive − pairwise, groupwise − pairwise) with 95% CIs, and
whether the reward model learned in each environment (held-out pair accuracy; an environment
where it does not is reported as dropped, not compared).

Run: ``preflab bench groupwise --envs GridWorld --seeds 0 1 2`` (``--quick`` for a smoke run;
``--report`` only rebuilds the markdown). ``--skips count`` (default) counts a skipped group
comparison toward the budget, ``--skips replace`` replaces it. Under a plan entry, ``--plan
ENTRY`` runs only the entry's envs, arms, seeds and reading into ``ENTRY_runs.jsonl`` and
``ENTRY.md`` (dashes as underscores); that report lists the runs made until every planned run
exists, then gives the entry's verdict per environment (``preflab_bench._groupwise_plan``);
``--steps`` is accepted there only at the entry's ``budget.ppo_steps``. ``--run-root DIR`` keeps
each run in its own directory with the loop's checkpoints, so a run stopped by a time limit or
kill -9 continues exactly when the same command runs again (docs/guide/groupwise-bench.md).
"""

from __future__ import annotations

import argparse
import hashlib
import json
import logging
import sys
import tempfile
import time
from dataclasses import asdict, dataclass, replace
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import numpy as np
import torch

from preflab.config import TrainConfig
from preflab.envs import make_vec_env
from preflab.errors import ConfigError
from preflab.policy.agents import make_agent
from preflab.policy.evaluate import evaluate_policy, reward_agreement
from preflab.policy.presets import preset
from preflab.policy.rollout import collect_segments
from preflab.reward.batch import SegmentBatch
from preflab.reward.ensemble import RewardConfig
from preflab.reward.trainer import FitConfig
from preflab.rundir.reporting import append_jsonl
from preflab.runs import load_run, resume, train
from preflab.runstate.checkpointer import Checkpointer
from preflab.sources.deciders import DecisionConfig, DecisionMaker
from preflab_bench._groupwise_envs import (
    DEFAULT_ENVS,
    SPECS,
    EnvSpec,
    noise_scale,
    random_segments,
)
from preflab_bench._groupwise_plan import REFERENCE, SKIPS, entry_steps, planned_entry
from preflab_bench._groupwise_report import ARMS, LEARNS_ACCURACY, load_runs, report, run_key
from preflab_bench._plan import add_plan_options, load_plan
from preflab_bench._report import RESULTS, command
from preflab_bench._resumable_learn import learn_resumably


@dataclass(frozen=True, kw_only=True)
class RunSettings:
    """What every run of one invocation shares besides the environment's budget."""

    noise_frac: float = 0.5
    """σ of the DM's perception noise ε (Eq. 1) as a share of the std of random-policy segment
    returns."""
    max_discordance: float = 0.25
    """Overlap rule: skip a group comparison when more of its cross pairs than this share are
    perceived against the decision."""
    overlap_rule: str = "border"
    """Overlap rule of the DMs (``DecisionConfig.overlap_rule``): 'border', the paper's released
    code (skip when more than half of a group is perceived beyond the midpoint of the two
    means), or 'discordance' (``max_discordance``)."""
    clean_groups: bool = True
    """The DM removes members perceived beyond the border before answering (released code)."""
    max_group_uses: int = 3
    """How many comparisons of one round may use the same group."""
    heldout_steps: int = 2_000
    """Random-policy steps (and as many final-policy steps) of the held-out segments on which
    the learned reward is scored."""
    eval_episodes: int = 10
    """Episodes of the final true-return evaluation."""
    skips_use_budget: bool = True
    """A skipped group comparison counts toward the comparison budget (the reading paper 000's
    label counts suggest); False: it is replaced by another comparison."""

    def __post_init__(self) -> None:
        if not self.noise_frac >= 0:
            raise ConfigError(f"noise_frac must be ≥ 0, got {self.noise_frac}")
        if self.heldout_steps < 1 or self.eval_episodes < 1:
            raise ConfigError("heldout_steps and eval_episodes must be ≥ 1")


def run_dir_name(name: str, arm: str, seed: int, spec: EnvSpec, settings: RunSettings) -> str:
    """The directory of a run under ``--run-root``: env, arm, seed and a digest of its budgets
    (a directory is only ever continued by the run it was started for)."""
    digest = hashlib.sha256(
        json.dumps(budget_of(spec, settings), sort_keys=True).encode()
    ).hexdigest()[:10]
    return f"{name}-{arm}-s{seed}-{digest}"


ROW_FILE = "row.json"
"""A finished run's record in its directory under ``--run-root``, written before it is appended
to the run log: a process stopped between the two gets its row back without running again."""


def run_one(
    name: str,
    spec: EnvSpec,
    dm_kind: str,
    seed: int,
    settings: RunSettings,
    workdir: Path,
    *,
    threads: int = 1,
    resumable: bool = False,
) -> dict[str, Any]:
    """One training run of one decision maker; returns its JSON record.

    ``resumable``: the run lives in ``workdir / run_dir_name(...)`` and continues exactly from
    its last checkpoint when that directory holds a stopped run (``preflab.runs.resume``; the
    decision maker's generator, counters and pending answers come back from the checkpoint
    with the loop's); a finished run is not run again (its record is read back). ``threads``:
    torch threads of the run (``TrainConfig.torch_threads``, which does not identify a run)."""
    run_dir = workdir / (
        run_dir_name(name, dm_kind, seed, spec, settings)
        if resumable
        else f"{name}-{dm_kind}-{seed}"
    )
    if resumable and (run_dir / ROW_FILE).is_file():
        kept: dict[str, Any] = json.loads((run_dir / ROW_FILE).read_text())
        return kept
    heldout = random_segments(spec, seed, settings.heldout_steps)
    sigma = settings.noise_frac * noise_scale(heldout)
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
        pool_size=spec.pool,
        agent_kwargs=spec.agent_kwargs,
        reward=RewardConfig(members=3, hidden=(64, 64)),
        fit=FitConfig(epochs=10),
        first_fit_epochs=30,
        eval_episodes=settings.eval_episodes,
        torch_threads=threads,
    )
    dm = DecisionMaker(
        dm_kind,
        DecisionConfig(
            noise_std=sigma,
            max_discordance=settings.max_discordance,
            overlap_rule="border" if settings.overlap_rule == "border" else "discordance",
            clean_groups=settings.clean_groups,
        ),
        rng=np.random.default_rng(1_000 + seed),
        max_group_uses=settings.max_group_uses,
        skips_use_budget=settings.skips_use_budget,
    )
    t0, c0 = time.perf_counter(), time.process_time()
    if resumable and (run_dir / "summary.json").is_file():  # ended before its row was kept
        res = load_run(run_dir)
        dm.load_state(Checkpointer(run_dir).load().state["source"])
    elif resumable and (run_dir / "config.json").is_file():  # refuses a run configured otherwise
        res = resume(run_dir, config=cfg, source=dm, selector=dm)
    else:
        res = train(cfg, run_dir=run_dir, source=dm, selector=dm)
    wall = res.wall_s if resumable else time.perf_counter() - t0
    venv = make_vec_env(spec.env_id, 1, seed=20_000 + seed)
    on_policy = collect_segments(
        venv,
        res.agent,
        settings.heldout_steps,
        spec.segment_length,
        np.random.default_rng(seed),
        env_id=spec.env_id,
    )
    venv.close()
    test = heldout + on_policy
    acc, corr = reward_agreement(
        res.reward_model,
        SegmentBatch.from_segments(test),
        np.array([s.true_return for s in test]),
        np.random.default_rng(seed),
    )
    row = {
        "env": name,
        "dm": dm_kind,
        "seed": seed,
        "budget": budget_of(spec, settings),
        "noise_std": sigma,
        "true_return": res.true_return,
        "n_labels": res.n_labels,
        "heldout_accuracy": acc,
        "heldout_corr": corr,
        "pool_accuracy": res.reward_accuracy,
        "wall_s": wall,
        "cpu_s": time.process_time() - c0,
        "date": datetime.now(UTC).strftime("%Y-%m-%d %H:%M UTC"),
        **{f"dm_{k}": v for k, v in dm.stats.as_dict().items()},
    }
    if resumable:
        row["run_dir"] = str(run_dir)
        (run_dir / ROW_FILE).write_text(json.dumps(row))
    return row


def run_reference(
    name: str,
    spec: EnvSpec,
    seed: int,
    settings: RunSettings,
    run_root: Path | None = None,
) -> dict[str, Any]:
    """PPO on the true reward with the run's steps, seed and hyperparameters (no labels).

    With ``run_root``: trained in checkpointed chunks in ``run_root / run_dir_name(...)``
    (``preflab_bench._resumable_learn``), so a stopped run continues exactly; a finished one
    is read back from its record there."""
    if run_root is not None:
        return _reference_resumable(name, spec, seed, settings, run_root)
    cfg = TrainConfig(
        env_id=spec.env_id,
        algo=spec.algo,
        seed=seed,
        total_steps=spec.total_steps,
        steps_per_round=spec.steps_per_round,
        agent_kwargs=spec.agent_kwargs,
    )
    t0, c0 = time.perf_counter(), time.process_time()
    venv = make_vec_env(spec.env_id, cfg.n_envs, seed=seed)
    hyper = preset(cfg.algo, cfg.n_envs, cfg.steps_per_round, overrides=cfg.agent_overrides())
    agent = make_agent(cfg.algo, venv, seed=seed, net_arch=list(cfg.net_arch), **hyper)
    agent.learn(total_timesteps=spec.total_steps, progress_bar=False)
    mean, _std = evaluate_policy(
        agent, spec.env_id, n_episodes=settings.eval_episodes, seed=10_000 + seed
    )
    venv.close()
    return {
        "env": name,
        "dm": REFERENCE,
        "seed": seed,
        "budget": budget_of(spec, settings),
        "true_return": mean,
        "wall_s": time.perf_counter() - t0,
        "cpu_s": time.process_time() - c0,
        "date": datetime.now(UTC).strftime("%Y-%m-%d %H:%M UTC"),
    }


REFERENCE_CHUNK_ROUNDS = 8
"""Rounds (``EnvSpec.steps_per_round``) of the reference arm between its checkpoints."""


def _reference_resumable(
    name: str, spec: EnvSpec, seed: int, settings: RunSettings, run_root: Path
) -> dict[str, Any]:
    run_dir = run_root / run_dir_name(name, REFERENCE, seed, spec, settings)
    if (run_dir / ROW_FILE).is_file():
        kept: dict[str, Any] = json.loads((run_dir / ROW_FILE).read_text())
        return kept
    cfg = TrainConfig(
        env_id=spec.env_id,
        algo=spec.algo,
        seed=seed,
        total_steps=spec.total_steps,
        steps_per_round=spec.steps_per_round,
        agent_kwargs=spec.agent_kwargs,
    )
    c0 = time.process_time()
    venv = make_vec_env(spec.env_id, cfg.n_envs, seed=seed)
    hyper = preset(cfg.algo, cfg.n_envs, cfg.steps_per_round, overrides=cfg.agent_overrides())
    agent = make_agent(cfg.algo, venv, seed=seed, net_arch=list(cfg.net_arch), **hyper)
    wall = learn_resumably(
        agent,
        venv,
        run_dir,
        spec.total_steps,
        chunk_steps=REFERENCE_CHUNK_ROUNDS * spec.steps_per_round,
    )
    mean, _std = evaluate_policy(
        agent, spec.env_id, n_episodes=settings.eval_episodes, seed=10_000 + seed
    )
    venv.close()
    row = {
        "env": name,
        "dm": REFERENCE,
        "seed": seed,
        "budget": budget_of(spec, settings),
        "true_return": mean,
        "wall_s": wall,
        "cpu_s": time.process_time() - c0,
        "date": datetime.now(UTC).strftime("%Y-%m-%d %H:%M UTC"),
        "run_dir": str(run_dir),
    }
    (run_dir / ROW_FILE).write_text(json.dumps(row))
    return row


def budget_of(spec: EnvSpec, settings: RunSettings) -> dict[str, Any]:
    """The budgets that identify a run (with its environment, arm and seed)."""
    return asdict(spec) | {k: v for k, v in asdict(settings).items() if k != "heldout_steps"}


def run_line(r: dict[str, Any]) -> str:
    """A finished run in one line of the terminal."""
    line = f"{r['env']:12s} {r['dm']:12s} seed {r['seed']}: return {r['true_return']:8.2f}  "
    if r["dm"] != REFERENCE:
        line += (
            f"comparisons {r['dm_comparisons']:4d}  labels {r['dm_labels']:4d}  "
            f"err {100 * r['dm_label_error_rate']:5.1f}%  "
            f"skipped {r['dm_skipped']:3d}  acc {r['heldout_accuracy']:.3f}  "
        )
    return line + f"{r['wall_s']:.0f}s"


def main(argv: list[str]) -> int:
    ap = argparse.ArgumentParser(
        prog="preflab bench groupwise", description=(__doc__ or "").split("\n")[0]
    )
    ap.add_argument("--envs", nargs="+", default=list(DEFAULT_ENVS), choices=list(SPECS))
    ap.add_argument(
        "--dms",
        nargs="+",
        default=list(ARMS),
        choices=list(ARMS),
        help=f"decision makers, and {REFERENCE!r}: PPO on the true reward (reference)",
    )
    ap.add_argument("--seeds", nargs="+", type=int, default=[0, 1, 2])
    ap.add_argument("--steps", type=int, default=None, help="override PPO env steps per run")
    ap.add_argument("--comparisons", type=int, default=None, help="override comparisons")
    ap.add_argument("--noise-frac", type=float, default=RunSettings.noise_frac)
    ap.add_argument("--max-discordance", type=float, default=RunSettings.max_discordance)
    ap.add_argument(
        "--overlap-rule", choices=("border", "discordance"), default=RunSettings.overlap_rule
    )
    ap.add_argument(
        "--no-clean", action="store_true", help="the DM answers about the unedited groups"
    )
    ap.add_argument("--quick", action="store_true", help="tiny budgets (smoke test)")
    ap.add_argument("--report", action="store_true", help="only rebuild the markdown")
    ap.add_argument(
        "--learns-accuracy",
        type=float,
        default=LEARNS_ACCURACY,
        help="held-out pair accuracy an environment needs to be reported",
    )
    ap.add_argument(
        "--skips",
        choices=list(SKIPS),
        default="count",
        help="a skipped group comparison counts toward the comparison budget, or is replaced",
    )
    add_plan_options(
        ap,
        "a plan entry of this bench (benchmarks/plan.toml): its runs and report are "
        "OUT/<entry>_runs.jsonl and OUT/<entry>.md",
    )
    ap.add_argument("--out", type=Path, default=RESULTS, help="results directory")
    ap.add_argument("--threads", type=int, default=1, help="torch threads of each run")
    ap.add_argument(
        "--run-root",
        type=Path,
        default=None,
        help="keep each run in a directory here (env-arm-seed-digest of its budgets) with its "
        "checkpoints: the same command again continues a stopped run exactly, and a finished "
        "one is not run again (default: a temporary folder, no resume)",
    )
    ap.add_argument(
        "--runs", type=Path, default=None, help="jsonl of runs (default OUT/groupwise_runs.jsonl)"
    )
    args = ap.parse_args(argv)
    logging.basicConfig(level=logging.WARNING)
    if args.threads < 1:
        raise ConfigError(f"--threads must be ≥ 1, got {args.threads}")
    torch.set_num_threads(args.threads)
    name = "groupwise"
    planned_steps: dict[str, int] = {}
    if args.plan:
        given = {"--comparisons": args.comparisons is not None,
                 "--noise-frac": args.noise_frac != RunSettings.noise_frac,
                 "--max-discordance": args.max_discordance != RunSettings.max_discordance,
                 "--overlap-rule": args.overlap_rule != RunSettings.overlap_rule,
                 "--no-clean": args.no_clean, "--quick": args.quick, "--runs": args.runs}  # fmt: skip
        planned_entry(
            args.plan_file,
            args.plan,
            envs=args.envs,
            dms=args.dms,
            seeds=args.seeds,
            skips=args.skips,
            overrides=[k for k, v in given.items() if v],
            steps=args.steps,
        )
        planned_steps = entry_steps(load_plan(args.plan_file).entry(args.plan))
        name = args.plan.replace("-", "_")
    runs_path = args.runs or args.out / f"{name}_runs.jsonl"
    settings = RunSettings(
        noise_frac=args.noise_frac,
        max_discordance=args.max_discordance,
        overlap_rule=args.overlap_rule,
        clean_groups=not args.no_clean,
        skips_use_budget=SKIPS[args.skips],
    )
    specs = dict(SPECS)
    if args.quick:
        specs = {
            k: replace(
                s,
                total_steps=3_072,
                steps_per_round=1_024,
                comparisons=12,
                pool=40,
            )
            for k, s in specs.items()
        }
        settings = replace(settings, heldout_steps=200, eval_episodes=1)
    if args.steps is not None:
        specs = {k: replace(s, total_steps=args.steps) for k, s in specs.items()}
    specs |= {k: replace(specs[k], total_steps=v) for k, v in planned_steps.items() if k in specs}
    if args.comparisons is not None:
        specs = {k: replace(s, comparisons=args.comparisons) for k, s in specs.items()}
    if not args.report:
        done = {run_key(r) for r in load_runs(runs_path)}
        cmd = command("groupwise", argv)
        if args.run_root is not None:
            args.run_root.mkdir(parents=True, exist_ok=True)
        with tempfile.TemporaryDirectory(prefix="preflab-groupwise-") as tmp:
            root = args.run_root or Path(tmp)
            for env in args.envs:
                for seed in args.seeds:
                    for dm in args.dms:
                        probe = {
                            "env": env,
                            "dm": dm,
                            "seed": seed,
                            "budget": budget_of(specs[env], settings),
                        }
                        if run_key(probe) in done:
                            print(f"{env} {dm} seed {seed}: already in {runs_path}", flush=True)
                            continue
                        if dm == REFERENCE:
                            r = run_reference(env, specs[env], seed, settings, args.run_root)
                        else:
                            r = run_one(
                                env,
                                specs[env],
                                dm,
                                seed,
                                settings,
                                root,
                                threads=args.threads,
                                resumable=args.run_root is not None,
                            )
                        r |= {"command": cmd, "plan": args.plan or None, "threads": args.threads}
                        append_jsonl(runs_path, r)
                        print(run_line(r), flush=True)
    rows = load_runs(runs_path)
    if not rows:
        raise ConfigError(f"no runs in {runs_path}; run without --report first")
    md = report(rows, argv, runs_path, args.learns_accuracy, args.plan_file)
    out = args.out / f"{name}.md"
    out.parent.mkdir(parents=True, exist_ok=True)
    out.write_text(md)
    print(md)
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))


__all__ = [
    "ROW_FILE",
    "RunSettings",
    "budget_of",
    "main",
    "run_dir_name",
    "run_one",
    "run_reference",
]
