"""Pendulum-v1, like for like: PrefLab vs imitation 1.0.1 PreferenceComparisons, same learner.

Arms (``--arm``), each run for every seed and every ``--labels`` count, alternately in one
invocation so that timings are side by side:

- ``ppo``: ``imitation-ppo`` (PreferenceComparisons with SB3 PPO, plain ``MlpPolicy`` 32x32,
  imitation's tutorial PPO hyperparameters, 8 envs) then ``preflab-ppo`` (PrefLab's loop with
  the same PPO, hyperparameters, envs, labels and segment length) at EQUAL real env steps:
  imitation's ``total_timesteps`` is chosen so that all its env steps (PPO rollouts plus the
  transitions it samples for fragments and exploration) come closest to ``--env-steps``, and
  PrefLab then takes exactly the count imitation took (its initial random phase absorbs the
  remainder of whole 2048-step rollouts). ``sb3-ppo-true`` (plain SB3 PPO on the true reward,
  same settings) runs once per seed for the reward-learning overhead.
- ``sac``: ``imitation-sac`` (PreferenceComparisons with SB3 SAC whose replay buffer is
  imitation's ``ReplayBufferRewardWrapper``, relabelling every sampled batch, as imitation's
  own ``train_preference_comparisons`` script wires off-policy agents) then ``preflab-sac``
  (PrefLab's SAC with PEBBLE-style relabelling after every reward fit), same SAC
  hyperparameters (PrefLab's preset), 1 env, ``--sac-env-steps`` real env steps, and
  ``sb3-sac-true`` once per seed. imitation's SAC gets ``learning_starts`` = PrefLab's initial
  random steps, and so does the true-reward SAC.

Every run is appended as one JSON line to ``--runs`` as it finishes; ``--report`` rebuilds
``--out`` from that file (all invocations), with returns per label count, ratios and 95% CIs.
Wall and process-CPU times cover the training call only (no evaluation). True return = mean of
``--eval-episodes`` deterministic episodes on the true reward.
"""

from __future__ import annotations

import argparse
import contextlib
import json
import math
import os
import shlex
import sys
import tempfile
import time
from collections.abc import Callable, Iterator
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import numpy as np
import torch

import preflab.loop.rounds as loop_module
from preflab.config import TrainConfig
from preflab.envs import make_vec_env
from preflab.errors import ConfigError, SourceError
from preflab.policy.agents import make_agent
from preflab.policy.algos import Backend
from preflab.policy.evaluate import evaluate_policy
from preflab.policy.presets import IMITATION_PENDULUM_PPO, preset
from preflab.reward.ensemble import RewardConfig
from preflab.reward.trainer import FitConfig
from preflab.rundir.output import RunOutput
from preflab.rundir.reporting import append_jsonl, fmt_ci, md_table, read_jsonl, target_verdict
from preflab.runs import start_loop
from preflab_bench._report import RESULTS, write_report
from preflab_bench.peer import DEFAULT_VENV, ensure_imitation_venv, run_imitation

ENV = "Pendulum-v1"
PPO_ENVS = 8
PPO_ROLLOUT = 2048
"""PPO n_steps * n_envs (imitation's tutorial: n_steps = 2048 // n_envs)."""
SAC_INITIAL = 1_000
"""PrefLab SAC's initial random steps (imitation and true-reward SAC: learning_starts)."""
ARMS = ("ppo", "sac")
WALL_TARGET = {"sb3": 0.6, "sbx": 0.5}
"""Wall time PrefLab / imitation at equal env steps and labels, at most: issue #11's target
with SB3's learner, issue #28's for PrefLab on its fastest backend."""


def _learner(group: str) -> str:
    """The library of a group's PrefLab and true-reward runs."""
    return "SBX" if "(sbx)" in group else "SB3"


def _wall_target(group: str) -> float:
    return WALL_TARGET[_learner(group).lower()]


def group_name(algo: str, budget: int, backend: str = "sb3") -> str:
    """A learner at one env-step budget (and backend, when not SB3), as the report groups it."""
    return f"{algo}{'' if backend == 'sb3' else f' ({backend})'} @ {budget} env steps"


def ppo_config(
    seed: int, steps: int, labels: int, *, segment_length: int, eval_episodes: int
) -> TrainConfig:
    """PrefLab PPO taking exactly ``steps`` env steps (a multiple of n_envs)."""
    if steps < 2 * PPO_ROLLOUT or steps % PPO_ENVS:
        raise ConfigError(
            f"preflab-ppo needs a multiple of {PPO_ENVS} env steps >= {2 * PPO_ROLLOUT}, got "
            f"{steps}; raise --env-steps"
        )
    initial = PPO_ROLLOUT + (steps - PPO_ROLLOUT) % PPO_ROLLOUT
    if initial >= steps:
        initial -= PPO_ROLLOUT
    return TrainConfig(
        env_id=ENV,
        algo="ppo",
        seed=seed,
        total_steps=steps,
        total_labels=labels,
        n_envs=PPO_ENVS,
        initial_steps=initial,
        steps_per_round=2 * PPO_ROLLOUT,
        initial_label_frac=0.1,
        segment_length=segment_length,
        net_arch=(32, 32),
        reward=RewardConfig(hidden=(32, 32)),
        fit=FitConfig(warm_min_steps=0),  # warm fits: epochs only (issue #11, part 5)
        agent_kwargs=json.dumps(IMITATION_PENDULUM_PPO),
        eval_episodes=eval_episodes,
    )


def sac_config(
    seed: int,
    steps: int,
    labels: int,
    *,
    segment_length: int,
    eval_episodes: int,
    backend: Backend = "sb3",
) -> TrainConfig:
    """PrefLab's default learner: SAC with replay-buffer relabelling after every fit."""
    return TrainConfig(
        env_id=ENV,
        algo="sac",
        backend=backend,
        seed=seed,
        total_steps=steps,
        total_labels=labels,
        initial_steps=SAC_INITIAL,
        segment_length=segment_length,
        reward=RewardConfig(hidden=(32, 32)),
        eval_episodes=eval_episodes,
    )


@contextlib.contextmanager
def _untimed_cpu() -> Iterator[list[float]]:
    """Process CPU seconds the loop spends outside training, to leave out as the wall clock
    does (``RunResult.wall_s``): the policy evaluation, and the run's closing output (summary
    and learning-curve plot, about 0.5 s of matplotlib)."""
    spent = [0.0]

    def timed(original: Callable[..., Any]) -> Callable[..., Any]:
        def run(*args: Any, **kwargs: Any) -> Any:
            c0 = time.process_time()
            try:
                return original(*args, **kwargs)
            finally:
                spent[0] += time.process_time() - c0

        return run

    evaluate, finish = getattr(loop_module, "evaluate_episodes"), RunOutput.finish  # noqa: B009
    setattr(loop_module, "evaluate_episodes", timed(evaluate))  # noqa: B010
    RunOutput.finish = timed(finish)  # type: ignore[method-assign]  # patched, restored below
    try:
        yield spent
    finally:
        setattr(loop_module, "evaluate_episodes", evaluate)  # noqa: B010
        RunOutput.finish = finish  # type: ignore[method-assign]


def preflab_run(cfg: TrainConfig) -> dict[str, Any]:
    """One PrefLab run: true return, wall and CPU of the training (evaluation and the closing
    summary and plot excluded, as from ``wall_s``)."""
    with tempfile.TemporaryDirectory() as d, _untimed_cpu() as untimed:
        loop = start_loop(cfg, Path(d) / "run")
        c0 = time.process_time()
        result = loop.run()
        cpu = time.process_time() - c0 - untimed[0]
    return {
        "true_return": result.true_return,
        "true_return_std": result.true_return_std,
        "wall_s": result.wall_s,
        "cpu_s": cpu,
        "env_steps": result.env_steps,
        "n_labels": result.n_labels,
        "reward_accuracy": result.reward_accuracy,
    }


def true_reward_run(
    algo: str,
    seed: int,
    steps: int,
    *,
    eval_episodes: int,
    learning_starts: int = 0,
    backend: Backend = "sb3",
) -> dict[str, Any]:
    """The same learner (SB3's, or SBX's with ``backend='sbx'``) on the true reward, with the
    settings of the PrefLab arm."""
    if algo == "ppo":
        venv = make_vec_env(ENV, PPO_ENVS, seed=seed)
        hyper = preset("ppo", PPO_ENVS, 2 * PPO_ROLLOUT, overrides=IMITATION_PENDULUM_PPO)
        net = [32, 32]
    else:
        venv = make_vec_env(ENV, 1, seed=seed)
        hyper = preset("sac", 1) | {"learning_starts": learning_starts}
        net = [64, 64]
    agent = make_agent(algo, venv, seed=seed, net_arch=net, backend=backend, **hyper)
    t0, c0 = time.perf_counter(), time.process_time()
    agent.learn(total_timesteps=steps)
    wall, cpu = time.perf_counter() - t0, time.process_time() - c0
    mean, std = evaluate_policy(agent, ENV, n_episodes=eval_episodes, seed=10_000 + seed)
    return {
        "true_return": mean,
        "true_return_std": std,
        "wall_s": wall,
        "cpu_s": cpu,
        "env_steps": int(agent.num_timesteps),
        "n_labels": 0,
    }


def imitation_run(
    python: Path, algo: str, seed: int, labels: int, env_steps: int, args: argparse.Namespace
) -> dict[str, Any]:
    """imitation's PreferenceComparisons with ``algo`` at ``env_steps`` real env steps."""
    out = run_imitation(
        python,
        env_id=ENV,
        seed=seed,
        labels=labels,
        timesteps=env_steps,  # replaced by the runner's choice for --env-steps
        env_steps=env_steps,
        n_envs=PPO_ENVS if algo == "ppo" else 1,
        eval_episodes=args.eval_episodes,
        iterations=args.iterations,
        agent=algo,
        policy="mlp",
        fragment_length=args.segment_length,
        learning_starts=SAC_INITIAL,
        timeout_s=3600.0,
    )
    return {
        "true_return": out["true_return_mean"],
        "true_return_std": out["true_return_std"],
        "wall_s": out["wall_s"],
        "cpu_s": out.get("cpu_s", math.nan),
        "env_steps": out["env_steps"],
        "n_labels": out["labels"],
        "agent_steps": out["agent_timesteps"],
        "timesteps": out.get("timesteps"),
        "predicted_env_steps": out.get("predicted_env_steps"),
        "reward_accuracy": out.get("reward_accuracy", math.nan),
        "versions": out.get("versions", {}),
    }


def _why(exc: Exception) -> str:
    """The line of a runner failure that says why (e.g. the ValueError), else its first line."""
    lines = [ln.strip() for ln in str(exc).splitlines() if ln.strip()]
    said = [ln for ln in lines if ln.startswith(("ValueError", "RuntimeError", "AssertionError"))]
    return (said or lines or ["unknown error"])[-1][:500]


def run_arm(args: argparse.Namespace, algo: str, python: Path, command: str) -> None:
    """Every seed and label count of one learner, imitation and PrefLab back to back."""
    budget = args.env_steps if algo == "ppo" else args.sac_env_steps
    invocation = f"{datetime.now(UTC):%Y%m%dT%H%M%S}-{os.getpid()}"
    group = group_name(algo, budget, args.backend)
    base = {"arm": algo, "group": group, "invocation": invocation, "command": command}
    base |= {"backend": args.backend} | ({"plan": args.plan} if args.plan else {})
    backend = {"backend": args.backend} if algo == "sac" else {}
    make = ppo_config if algo == "ppo" else sac_config
    for seed in args.seeds:
        for labels in args.labels:
            common = base | {"seed": seed, "labels": labels}
            try:
                imi = imitation_run(python, algo, seed, labels, budget, args)
                steps = int(imi["env_steps"])
                append_jsonl(args.runs, common | {"lib": "imitation"} | imi, default=float)
            except SourceError as exc:  # e.g. the labels need more fragment steps than budget
                append_jsonl(
                    args.runs, common | {"lib": "imitation", "error": _why(exc)}, default=float
                )
                print(f"{algo} seed {seed} labels {labels}: imitation failed: {_why(exc)}")
                imi, steps = None, budget - budget % (PPO_ENVS if algo == "ppo" else 1)
            cfg = make(
                seed,
                steps,
                labels,
                segment_length=args.segment_length,
                eval_episodes=args.eval_episodes,
                **backend,
            )
            pl = preflab_run(cfg)
            append_jsonl(args.runs, common | {"lib": "preflab"} | pl, default=float)
            peer = "failed" if imi is None else f"{imi['true_return']:.0f} ({imi['wall_s']:.0f} s)"
            print(
                f"{algo} seed {seed} labels {labels}, {steps} env steps: imitation {peer}, "
                f"preflab {pl['true_return']:.0f} ({pl['wall_s']:.0f} s)",
                flush=True,
            )
        if not args.no_true:
            true = true_reward_run(
                algo,
                seed,
                budget,
                eval_episodes=args.eval_episodes,
                learning_starts=SAC_INITIAL,
                **backend,
            )
            append_jsonl(
                args.runs,
                base | {"seed": seed, "labels": 0, "lib": "sb3-true"} | true,
                default=float,
            )
            print(f"{algo} seed {seed}: {args.backend} true reward {true['true_return']:.0f}")


# ----- report --------------------------------------------------------------------------------
def load_runs(path: Path) -> list[dict[str, Any]]:
    if not path.exists():
        raise ConfigError(f"no runs file {path}; run an arm first (see --help)")
    return read_jsonl(path)


def _ci(values: list[float]) -> str:
    return fmt_ci(values, empty="-")


def _ratio_ci(values: list[float], target: float | None = None) -> list[object]:
    """[mean ± CI, verdict against ``target`` (≤) or '-']."""
    if target is None:
        return [_ci(values), "-"]
    if not values:
        return [_ci(values), f"≤ {target}: not measured"]
    return [_ci(values), f"≤ {target}: {target_verdict(values, target, at_most=True)}"]


def report(runs: list[dict[str, Any]], report_command: str, runs_name: str) -> str:
    for r in runs:  # a learner at one env-step budget
        r.setdefault("group", r["arm"])
    ok = [r for r in runs if "error" not in r]
    groups = list(dict.fromkeys(r["group"] for r in sorted(ok, key=lambda r: r["group"])))
    failed = [r for r in runs if "error" in r]
    commands = list(dict.fromkeys(r["command"] for r in runs))
    lines = [
        "# Pendulum-v1: PrefLab vs imitation 1.0.1 PreferenceComparisons, same learner",
        "",
        f"Command: `{report_command}` (rebuilds this file from `{runs_name}`); the runs came from:",
        "",
        *[f"- `{c}`" for c in commands],
        "",
        f"Date: {datetime.now(UTC).strftime('%Y-%m-%d %H:%M UTC')}; machine: 2 cores, shared; "
        "1 torch thread per process. Each row: mean ± 95% CI over seeds (Student t).  ",
        "Budgets: PPO 8 envs, imitation's tutorial PPO hyperparameters, MlpPolicy 32x32 in both "
        "libraries; SAC PrefLab's preset, 1 env, 64x64; segments of the same length in both; "
        "equal REAL env steps per (seed, labels): imitation's fragment sampling and exploration "
        "steps are counted, PrefLab takes exactly imitation's count.",
        "",
    ]

    def sel(**kw: Any) -> list[dict[str, Any]]:
        return [r for r in ok if all(r.get(k) == v for k, v in kw.items())]

    def paired(arm: str, a_lib: str, a_lab: int, b_lib: str, b_lab: int, key: str) -> list:
        a = {(r["seed"]): r for r in sel(group=arm, lib=a_lib, labels=a_lab)}
        b = {(r["seed"]): r for r in sel(group=arm, lib=b_lib, labels=b_lab)}
        return [(a[s][key], b[s][key]) for s in sorted(a.keys() & b.keys())]

    rows = []
    for arm in groups:
        for labels in sorted({r["labels"] for r in sel(group=arm) if r["labels"]}):
            for lib in ("imitation", "preflab"):
                rs = sel(group=arm, lib=lib, labels=labels)
                if rs:
                    rows.append(
                        [
                            arm,
                            lib,
                            labels,
                            int(np.mean([r["env_steps"] for r in rs])),
                            _ci([r["true_return"] for r in rs]),
                            _ci([r["wall_s"] for r in rs]),
                            _ci([r["cpu_s"] for r in rs]),
                        ]
                    )
        rs = list({r["seed"]: r for r in sel(group=arm, lib="sb3-true")}.values())  # 1 per seed
        if rs:
            rows.append(
                [
                    arm,
                    f"{_learner(arm)}, true reward",
                    0,
                    int(np.mean([r["env_steps"] for r in rs])),
                    _ci([r["true_return"] for r in rs]),
                    _ci([r["wall_s"] for r in rs]),
                    _ci([r["cpu_s"] for r in rs]),
                ]
            )
    lines += [
        "## True return per label count",
        "",
        md_table(
            ["learner", "library", "labels", "env steps", "true return", "wall s", "CPU s"],
            rows,
        ),
    ]
    # --- targets -----------------------------------------------------------------------------
    target_rows: list[list[object]] = []
    for arm in groups:
        pairs = paired(arm, "preflab", 100, "imitation", 200, "true_return")
        if pairs:
            diff = [a - b for a, b in pairs]
            verdict = target_verdict(diff, 0.0, at_most=False, target_name="0")
            target_rows.append(
                [
                    f"{arm}: return PrefLab@100 − imitation@200 (paired by seed)",
                    _ci(diff),
                    f"≥ 0: {verdict}",
                ]
            )
        else:
            target_rows.append(
                [f"{arm}: return PrefLab@100 − imitation@200", "not measured", "≥ 0: -"]
            )
    for arm in groups:
        for key, name in (("wall_s", "wall"), ("cpu_s", "CPU")):
            ratios = []
            for labels in sorted({r["labels"] for r in sel(group=arm) if r["labels"]}):
                ratios += [
                    a / b for a, b in paired(arm, "preflab", labels, "imitation", labels, key)
                ]
            target_rows.append(
                [
                    f"{arm}: {name} preflab / imitation, equal env steps (all label counts)",
                    *_ratio_ci(ratios, _wall_target(arm) if name == "wall" else None),
                ]
            )
    # each learner's true-reward run per (seed, invocation): pairs timed side by side
    true_runs = {
        arm: {(r["seed"], r["invocation"]): r for r in sel(group=arm, lib="sb3-true")}
        for arm in groups
    }
    for arm in groups:  # what no library training this learner on every env step can beat
        floor = [
            (t["wall_s"] / t["env_steps"]) / (r["wall_s"] / r["env_steps"])
            for r in sel(group=arm, lib="imitation")
            if (t := true_runs[arm].get((r["seed"], r["invocation"]))) is not None
        ]
        if floor:
            target_rows.append(
                [
                    f"{arm}: floor of the wall ratio: {_learner(arm)} alone on the true reward / "
                    "imitation, "
                    "per env step (no reward learning at all)",
                    *_ratio_ci(floor),
                ]
            )
    for arm in groups:
        for key, name in (("wall_s", "wall"), ("cpu_s", "CPU")):
            ratios = [
                (r[key] / r["env_steps"]) / (t[key] / t["env_steps"])
                for r in sel(group=arm, lib="preflab")
                if (t := true_runs[arm].get((r["seed"], r["invocation"]))) is not None
            ]
            target_rows.append(
                [
                    f"{arm}: reward-learning overhead, {name} per env step preflab / "
                    f"{_learner(arm)} true reward",
                    *_ratio_ci(ratios, 1.15 if name == "wall" else None),
                ]
            )
    lines += [
        "## Targets (issue #11, part 5)",
        "",
        md_table(["quantity", "mean ± 95% CI", "target"], target_rows),
        "Ratios are per (seed, labels) pair run back to back in one invocation; overhead is "
        "per env step because SB3 PPO rounds its budget up to whole 2048-step rollouts. "
        "The floor row is the wall ratio a library would reach if learning the reward cost "
        "nothing: the same learner on the true reward for the same env steps, over imitation "
        "(which trains its learner on fewer of its env steps: the rest are fragment sampling). "
        "A wall target below the floor cannot be met with this learner at equal env steps.",
        "",
    ]
    lines += _protocol_section(groups, sel, true_runs)
    lines += [
        "## What is the same and what is not",
        "",
        "- Same: env (Pendulum-v1, true return of deterministic episodes), learner (SB3 PPO "
        "8 envs, n_steps 256, imitation's tutorial PPO hyperparameters, MlpPolicy 32x32; or SB3 "
        "SAC with PrefLab's preset, 64x64, 1 env), real env steps per (seed, labels), labels "
        "(perfect synthetic teacher on the true return), segment length, hyperbolic label "
        "schedule with 10% up front.",
        "- Each library's own: the reward model and how it picks queries (imitation: one "
        "BasicRewardNet 32x32 with RunningNorm inputs, random fragment pairs, "
        "BasicRewardTrainer 3 epochs, 10 iterations; PrefLab: a 3-member 32x32 ensemble, "
        "disagreement-selected pairs, a feedback round every 4096 PPO / 1000 SAC steps, each "
        "fit 10 epochs warm-started from the last with a floor of 50 gradient steps, except "
        "PPO's warm fits since 2026-11-24: 10 epochs only, `FitConfig.warm_min_steps = 0`), and "
        "how it spends env steps (imitation samples fresh fragments with extra rollouts and "
        "5% exploration; PrefLab cuts segments from the learner's own rollouts after an "
        "initial random phase).",
        "- SAC relabelling: imitation relabels each sampled minibatch "
        "(`ReplayBufferRewardWrapper`); PrefLab relabels the whole buffer after each fit. "
        "imitation's SAC and the true-reward SAC start with `learning_starts` = PrefLab's "
        f"{SAC_INITIAL} random steps.",
        "- imitation 1.0.1 samples `2 × pairs × segment length` fresh transitions per round, so "
        "with one SAC env it cannot gather 200 labels of 50-step segments within 15k env steps "
        "(with these defaults it needs ≥ 22,401); such runs are listed below as not made.",
        "",
    ]
    if failed:
        lines += [
            "## Runs that could not be made",
            "",
            md_table(
                ["learner", "library", "seed", "labels", "why"],
                [
                    [r["group"], r["lib"], r["seed"], r["labels"], r["error"].splitlines()[0][:200]]
                    for r in failed
                ],
            ),
        ]
    lines += [
        "## Every run",
        "",
        md_table(
            ["learner", "library", "seed", "labels", "env steps", "return", "wall s", "CPU s"],
            [
                [
                    r["group"],
                    r["lib"],
                    r["seed"],
                    r["labels"],
                    r["env_steps"],
                    r["true_return"],
                    r["wall_s"],
                    r["cpu_s"],
                ]
                for r in ok
            ],
        ),
    ]
    return "\n".join(lines)


def _protocol_section(
    groups: list[str],
    sel: Callable[..., list[dict[str, Any]]],
    true_runs: dict[str, dict[tuple[int, str], dict[str, Any]]],
) -> list[str]:
    """The wall-time ratios under the reporting protocol: IQM ratio paired by seed with a
    stratified bootstrap interval, corrected for the looks of the rows' plan entry; a group
    without a plan entry is exploratory and gets no verdict."""
    from preflab_bench._plan import load_plan
    from preflab_bench._protocol import difference_ci, fmt_interval, ratio_ci, rows_entry, verdict

    plan = load_plan()
    rows: list[list[object]] = []
    for arm in groups:
        entry, conf = rows_entry(sel(group=arm), plan)
        pre100 = {r["seed"]: r for r in sel(group=arm, lib="preflab", labels=100)}
        imi200 = {r["seed"]: r for r in sel(group=arm, lib="imitation", labels=200)}
        seeds = sorted(pre100.keys() & imi200.keys())
        if len(seeds) >= 2:
            x, y = (np.array([[rs[s]["true_return"]] for s in seeds]) for rs in (pre100, imi200))
            iv = difference_ci(x, y, paired=True, confidence=conf)
            said = "not a target of the plan entry" if entry else "≥ 0: exploratory"
            rows.append(
                [arm, "100 / 200", "return PrefLab@100 − imitation@200 (IQM difference)",
                 len(seeds), fmt_interval(iv), said]
            )  # fmt: skip
        for labels in sorted({r["labels"] for r in sel(group=arm) if r["labels"]}):
            pre = {r["seed"]: r for r in sel(group=arm, lib="preflab", labels=labels)}
            imi = {r["seed"]: r for r in sel(group=arm, lib="imitation", labels=labels)}
            tru = {
                r["seed"]: t
                for r in pre.values()
                if (t := true_runs[arm].get((r["seed"], r["invocation"]))) is not None
            }
            for what, other, target, per_step in (
                ("wall preflab / imitation", imi, _wall_target(arm), False),
                ("wall per env step preflab / same learner on the true reward", tru, 1.15, True),
            ):
                seeds = sorted(pre.keys() & other.keys())
                if len(seeds) < 2:
                    continue

                x, y = (
                    np.array(
                        [[rs[s]["wall_s"] / (rs[s]["env_steps"] if per_step else 1)] for s in seeds]
                    )
                    for rs in (pre, other)
                )
                iv = ratio_ci(x, y, paired=True, confidence=conf)
                said = verdict(iv.lo, iv.hi, target, "below") if entry else "exploratory"
                rows.append(
                    [arm, labels, what, len(seeds), fmt_interval(iv), f"≤ {target}: {said}"]
                )
    if not rows:
        return []
    return [
        "## Under the reporting protocol",
        "",
        "Return: IQM of PrefLab's true return at 100 labels minus IQM of imitation's at 200, "
        "paired by seed. Wall time: IQM of PrefLab's wall seconds over IQM of the other's, "
        "paired by seed. Each with a 95% stratified bootstrap interval (corrected for the plan "
        "entry's looks); a group whose rows name no plan entry is exploratory and carries no "
        "verdict.",
        "",
        md_table(
            ["learner", "labels", "quantity", "seeds", "IQM ratio or difference [CI]", "target"],
            rows,
        ),
        "",
    ]


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(
        prog="preflab bench pendulum",
        description=__doc__,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    ap.add_argument(
        "--arm", choices=ARMS, nargs="+", default=[], help="learners to run (omit with --report)"
    )
    ap.add_argument("--seeds", type=int, nargs="+", default=[0, 1])
    ap.add_argument("--labels", type=int, nargs="+", default=[50, 100, 200, 400])
    ap.add_argument("--env-steps", type=int, default=92_000, help="PPO: real env steps")
    ap.add_argument("--sac-env-steps", type=int, default=15_000, help="SAC: real env steps")
    ap.add_argument("--segment-length", type=int, default=50, help="both libraries")
    ap.add_argument("--iterations", type=int, default=10, help="imitation's num_iterations")
    ap.add_argument("--eval-episodes", type=int, default=10)
    ap.add_argument("--no-true", action="store_true", help="skip the SB3 true-reward run")
    ap.add_argument(
        "--backend",
        choices=("sb3", "sbx"),
        default="sb3",
        help="library of PrefLab's SAC and of the true-reward SAC (imitation always runs SB3)",
    )
    ap.add_argument("--plan", default="", help="the plan entry (benchmarks/plan.toml) run")
    ap.add_argument("--venv", type=Path, default=DEFAULT_VENV)
    ap.add_argument("--runs", type=Path, default=RESULTS / "pendulum_runs.jsonl")
    ap.add_argument("--out", type=Path, default=RESULTS / "pendulum.md")
    ap.add_argument("--report", action="store_true", help="rebuild --out from --runs")
    args = ap.parse_args(argv)
    given = list(sys.argv[1:] if argv is None else argv)
    command = "preflab bench pendulum " + shlex.join(given)
    if not args.arm and not args.report:
        ap.error("pass --arm ppo and/or sac to run, or --report to rebuild the table")
    if args.backend != "sb3" and args.arm != ["sac"]:
        ap.error("--backend sbx compares SAC only: pass --arm sac")
    torch.set_num_threads(1)
    if args.arm:
        python = ensure_imitation_venv(args.venv)
        for algo in args.arm:
            run_arm(args, algo, python, command)
    write_report(report(load_runs(args.runs), command, args.runs.name) + "\n", args.out)
    return 0
