"""PrefLab on MuJoCo locomotion at a fixed label budget vs the same RL algorithm on the true reward.

Christiano et al. (2017) report that 700 synthetic labels nearly match RL on the true reward.
For each env, seed and variant this runs PrefLab (oracle teacher, ``--labels`` labels) and the
same algorithm, hyperparameters and env steps on the true reward, and reports the ratio of final
true returns (target ≥ 0.8). Budgets are CPU-sized; see the table header.

Variants (early termination, preflab.policy.termination):
  today          the recorder drops segments cut short by a fall (the default loop)
  fixed_horizon  env built with terminate_when_unhealthy=False; baseline: PPO on the same env
  absorbing      absorbing-state indicator, padded terminated segments, learned absorbing tail
``--fixed-horizon`` / ``--absorbing`` add those variants; ``--variants`` lists them outright.
Every run (PrefLab and baseline) is appended to ``--jsonl`` as it finishes, so variants can run in
separate processes; ``--report-only`` rebuilds the table from the JSONL.
"""

from __future__ import annotations

import argparse
import json
import math
import tempfile
import time
from pathlib import Path
from typing import Any, cast

import gymnasium as gym
import torch

from preflab.config import TrainConfig
from preflab.envs import make_vec_env
from preflab.errors import ConfigError
from preflab.policy.agents import make_agent
from preflab.policy.evaluate import evaluate_policy
from preflab.policy.presets import preset
from preflab.policy.termination import TerminationConfig, with_termination
from preflab.reward.ensemble import RewardConfig
from preflab.reward.trainer import FitConfig
from preflab.rundir.reporting import append_jsonl, fmt_ci, md_table, mean_ci, read_jsonl
from preflab.rundir.reporting import verdict as ci_verdict
from preflab.runs import train
from preflab_bench._plan import add_plan_options, load_plan
from preflab_bench._report import RESULTS, command, header

VARIANTS = ("today", "fixed_horizon", "absorbing")
TERMINATION = {
    "today": TerminationConfig(),
    "fixed_horizon": TerminationConfig(fixed_horizon=True),
    "absorbing": TerminationConfig(absorbing=True),
}


def segment_steps(env_id: str, seconds: float) -> int:
    """Steps in ``seconds`` of simulated time (env.unwrapped.dt)."""
    env = gym.make(env_id)
    try:
        # MuJoCo envs have dt; gymnasium's Env type does not declare it
        return max(2, round(seconds / float(cast(Any, env.unwrapped).dt)))
    finally:
        env.close()


def run_preflab(args: argparse.Namespace, env_id: str, seed: int, variant: str) -> dict[str, Any]:
    term = TERMINATION[variant]
    seg = args.segment_length or segment_steps(env_id, args.segment_seconds)
    extra: dict[str, Any] = {}
    if args.smoke:
        extra = {
            "first_fit_epochs": 3,
            "net_arch": (16, 16),
            "reward": RewardConfig(members=2, hidden=(16,)),
            "fit": FitConfig(epochs=2),
            "agent_kwargs": '{"batch_size": 64}',
        }
    cfg = TrainConfig(
        env_id=env_id,
        algo=args.algo,
        seed=seed,
        total_steps=args.steps,
        total_labels=args.labels,
        n_envs=args.n_envs,
        initial_steps=args.initial_steps,
        steps_per_round=args.steps_per_round,
        segment_length=seg,
        initial_label_frac=0.1,
        pool_size=800,
        eval_episodes=args.eval_episodes,
        termination=term,
        **extra,
    )
    with tempfile.TemporaryDirectory() as d:
        pref = train(cfg, run_dir=Path(d) / "run")
    # the true env (with early termination), whatever the run trained on
    std_spec = with_termination(env_id, TerminationConfig(absorbing=term.absorbing))
    std, _ = evaluate_policy(
        pref.agent, std_spec, n_episodes=args.eval_episodes, seed=10_000 + seed
    )
    return {
        "kind": "preflab",
        "variant": variant,
        "env": env_id,
        "seed": seed,
        "steps": pref.env_steps,
        "labels": pref.n_labels,
        "segment_length": seg,
        "return_train_env": pref.true_return,
        "return_true_env": std,
        "reward_corr": pref.reward_corr,
        "wall_s": pref.wall_s,
    }


def run_baseline(args: argparse.Namespace, env_id: str, seed: int, fixed: bool) -> dict[str, Any]:
    spec = with_termination(env_id, TerminationConfig(fixed_horizon=fixed))
    venv = make_vec_env(spec, args.n_envs, seed=seed)
    hyper = preset(
        args.algo,
        args.n_envs,
        args.steps_per_round,
        overrides={"batch_size": 64} if args.smoke else None,
    )
    net = [16, 16] if args.smoke else [64, 64]
    agent = make_agent(args.algo, venv, seed=seed, net_arch=net, **hyper)
    t0 = time.perf_counter()
    agent.learn(total_timesteps=args.steps)
    wall = time.perf_counter() - t0
    n_ep = args.eval_episodes
    own, _ = evaluate_policy(agent, spec, n_episodes=n_ep, seed=10_000 + seed)
    std = own
    if fixed:
        std, _ = evaluate_policy(agent, env_id, n_episodes=n_ep, seed=10_000 + seed)
    res = {"true_return": own, "env_steps": int(agent.num_timesteps), "wall_s": wall}
    return {
        "kind": "true_reward",
        "variant": "fixed_horizon" if fixed else "standard",
        "env": env_id,
        "seed": seed,
        "steps": res["env_steps"],
        "labels": 0,
        "return_train_env": res["true_return"],
        "return_true_env": std,
        "wall_s": res["wall_s"],
    }


TARGET = 0.8
"""Christiano et al.'s claim as the issue states it: ≥ 80% of RL on the true reward."""


def verdict(diffs: list[float]) -> str:
    """'mean ± CI: met / not shown / missed' for paired differences PrefLab − TARGET × RL."""
    if not diffs:
        return "—"
    m, h = mean_ci(diffs)
    if not math.isfinite(h):
        return f"{m:+.0f} (n=1: {'meets' if m >= 0 else 'misses'} it on one seed)"
    word = ci_verdict(diffs, above="met", below="missed", spans="not shown")
    return f"{m:+.0f} ± {h:.0f} (n={len(diffs)}): {word}"


def report(rows: list[dict[str, Any]], argv: list[str] | None, budgets: str) -> str:
    """The markdown table: per env × variant, PrefLab vs PPO on the true reward of the env it
    trained on (fixed-horizon runs against the fixed-horizon baseline)."""
    out = header(
        "MuJoCo early termination: PrefLab (oracle labels) vs RL on the true reward",
        "preflab_bench.mujoco",
        argv,
        budgets,
    )
    base = {(r["env"], r["variant"], r["seed"]): r for r in rows if r["kind"] == "true_reward"}
    per_run, summary = [], []
    groups: dict[tuple[str, str], list[dict[str, Any]]] = {}
    for r in rows:
        if r["kind"] == "preflab":
            groups.setdefault((r["env"], r["variant"]), []).append(r)
    for (env, variant), rs in sorted(groups.items()):
        bkey = "fixed_horizon" if variant == "fixed_horizon" else "standard"
        ratios = []
        for r in rs:
            b = base.get((env, bkey, r["seed"]))
            ok = b is not None and b["return_train_env"] > 0
            ratio = (
                r["return_train_env"] / b["return_train_env"] if ok and b is not None else math.nan
            )
            ratios.append(ratio)
            per_run.append(
                [
                    env,
                    variant,
                    r["seed"],
                    r["labels"],
                    r["steps"],
                    r["segment_length"],
                    r["return_train_env"],
                    r["return_true_env"],
                    b["return_train_env"] if b else math.nan,
                    ratio,
                    r["reward_corr"],
                ]
            )
        paired = [
            (r["return_train_env"], base[(env, bkey, r["seed"])]["return_train_env"])
            for r in rs
            if (env, bkey, r["seed"]) in base
        ]
        bs = [b for _, b in paired]
        finite = [x for x in ratios if math.isfinite(x)]
        summary.append(
            [
                env,
                variant,
                fmt_ci([r["return_train_env"] for r in rs]),
                fmt_ci([r["return_true_env"] for r in rs]),
                fmt_ci(bs, empty="—"),
                sum(p for p, _ in paired) / sum(bs) if bs and sum(bs) > 0 else math.nan,
                fmt_ci(finite, empty="—"),
                verdict([p - TARGET * b for p, b in paired]),
            ]
        )
    out += md_table(
        [
            "env",
            "variant",
            "seed",
            "labels",
            "env steps",
            "segment steps",
            "PrefLab return (training env)",
            "PrefLab return (true env, with termination)",
            "RL on true reward (same env)",
            "ratio",
            "learned-vs-true corr",
        ],
        per_run,
    )
    out += (
        f"\nMean ± 95% CI over seeds. Target: PrefLab ≥ {TARGET:.0%} of RL on the true reward; "
        f"the verdict tests PrefLab − {TARGET} × RL, paired by seed (met: its CI lies above 0; "
        "not shown: the CI spans 0; missed: below 0).\n\n"
    )
    out += md_table(
        [
            "env",
            "variant",
            "PrefLab (training env)",
            "PrefLab (true env)",
            "RL on true reward (same env)",
            "ratio of means",
            "per-seed ratio",
            f"PrefLab − {TARGET} × RL (verdict)",
        ],
        summary,
    )
    return out


def check_under_plan(args: argparse.Namespace) -> None:
    """A run under ``--plan`` must match its entry before anything runs: the entry is this
    bench's, every env and seed asked for is one of its evaluation envs and seeds, and the
    steps, labels and tag are the entry's budget (a ConfigError says what differs)."""
    entry = load_plan(args.plan_file).entry(args.plan)
    if entry.bench != "mujoco":
        raise ConfigError(f"plan entry {entry.id} is run by `preflab bench {entry.bench}`")
    for env_id in args.envs:
        if entry.envs and env_id not in entry.envs:
            raise ConfigError(f"plan entry {entry.id} runs {list(entry.envs)}, not {env_id}")
        extra = sorted(set(args.seeds) - set(entry.seeds_for(env_id)))
        if extra:
            raise ConfigError(
                f"seeds {extra} are not evaluation seeds of plan entry {entry.id} for {env_id}"
            )
    budget = entry.budget
    for key, got in (("env_steps", args.steps), ("labels", args.labels), ("tag", args.tag)):
        if key in budget and budget[key] != got:
            raise ConfigError(
                f"plan entry {entry.id} has {key} = {budget[key]!r}; this run asks {got!r}"
            )


def main(argv: list[str]) -> int:
    ap = argparse.ArgumentParser(
        prog="preflab bench mujoco",
        description=__doc__,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    ap.add_argument("--envs", nargs="+", default=["Hopper-v5", "Walker2d-v5", "HalfCheetah-v5"])
    ap.add_argument("--algo", default="ppo")
    ap.add_argument("--seeds", type=int, nargs="+", default=[0])
    ap.add_argument("--steps", type=int, default=200_000)
    ap.add_argument("--labels", type=int, default=700)
    ap.add_argument("--n-envs", type=int, default=4)
    ap.add_argument("--initial-steps", type=int, default=4096)
    ap.add_argument("--steps-per-round", type=int, default=8192)
    ap.add_argument("--eval-episodes", type=int, default=10)
    ap.add_argument("--variants", nargs="*", choices=VARIANTS, default=None)
    ap.add_argument("--fixed-horizon", action="store_true", help="add the fixed_horizon variant")
    ap.add_argument("--absorbing", action="store_true", help="add the absorbing variant")
    ap.add_argument(
        "--baselines",
        choices=("auto", "none", "only"),
        default="auto",
        help="RL on the true reward: auto = the ones the variants need; only = just those",
    )
    ap.add_argument("--segment-length", type=int, default=0, help="steps; 0 = --segment-seconds")
    ap.add_argument("--segment-seconds", type=float, default=1.5)
    ap.add_argument("--jsonl", type=Path, default=RESULTS / "mujoco_runs.jsonl")
    ap.add_argument("--out", type=Path, default=RESULTS / "mujoco_termination.md")
    ap.add_argument("--tag", default="", help="label stored with every row (selects --report-only)")
    ap.add_argument("--report-only", action="store_true", help="rebuild --out from --jsonl")
    ap.add_argument("--smoke", action="store_true", help="tiny budget and nets (tests)")
    add_plan_options(ap)
    args = ap.parse_args(argv)
    if args.smoke:
        args.steps, args.labels, args.initial_steps = 768, 6, 256
        args.steps_per_round, args.eval_episodes, args.n_envs = 256, 1, 2
        args.segment_length = 20
    if args.plan and not args.report_only:
        check_under_plan(args)
    variants = list(args.variants if args.variants is not None else [])
    variants += [
        v for v, on in (("fixed_horizon", args.fixed_horizon), ("absorbing", args.absorbing)) if on
    ]
    if args.variants is None and not variants:
        variants = ["today"]
    variants = list(dict.fromkeys(variants))
    torch.set_num_threads(1)
    budgets = (
        f"{args.steps} env steps, {args.labels} oracle labels, {args.n_envs} envs, "
        f"{args.initial_steps} initial random steps, feedback every {args.steps_per_round} steps, "
        f"{args.eval_episodes} deterministic evaluation episodes; 2 shared CPU cores"
    )
    if not args.report_only:
        for env_id in args.envs:
            for seed in args.seeds:
                todo: list[tuple[str, Any]] = []
                if args.baselines != "only":
                    todo += [("preflab", v) for v in variants]
                if args.baselines != "none":
                    need = {v == "fixed_horizon" for v in variants} or {False}
                    todo += [("true", fixed) for fixed in sorted(need)]
                for kind, what in todo:
                    t0 = time.perf_counter()
                    row = (
                        run_preflab(args, env_id, seed, what)
                        if kind == "preflab"
                        else run_baseline(args, env_id, seed, what)
                    )
                    row |= {
                        "tag": args.tag,
                        "budget": budgets,
                        "elapsed_s": time.perf_counter() - t0,
                        "command": command("mujoco", argv),
                    } | ({"plan": args.plan} if args.plan else {})
                    append_jsonl(args.jsonl, row)
                    print(json.dumps(row))
    rows = read_jsonl(args.jsonl)
    # PrefLab runs of this tag; RL baselines of any tag at the same step budget (the baseline
    # does not depend on PrefLab's settings such as the segment length)
    mine = [r for r in rows if r.get("tag", "") == args.tag and r.get("kind") == "preflab"]
    steps = {r["steps"] for r in mine}
    base: dict[tuple[Any, ...], dict[str, Any]] = {}
    for r in rows:
        if r.get("kind") == "true_reward" and (r["steps"] in steps or r.get("tag", "") == args.tag):
            base[(r["env"], r["variant"], r["seed"])] = r
    rows = mine + list(base.values())
    stored = sorted({r["budget"] for r in rows if r.get("budget")})
    text = report(rows, argv, "; ".join(stored) if stored else budgets)
    args.out.parent.mkdir(parents=True, exist_ok=True)
    args.out.write_text(text)
    print(text)
    return 0
