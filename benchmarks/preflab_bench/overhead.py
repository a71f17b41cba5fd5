"""Reward-learning overhead: PrefLab against the same SB3 learner on the true reward, and where
PrefLab's extra time goes (issue #11, part 5).

The pendulum bench measures the overhead as a by-product, with PrefLab's runs and the
true-reward run in one long-lived process and always in the same order. This bench isolates
it: every run is a fresh subprocess (no warm-up, import or allocator state shared between the
arms), the order alternates by seed (true reward first on even seeds, PrefLab first on odd
ones), and both arms are the pendulum bench's like-for-like configurations
(:func:`preflab_bench.pendulum.ppo_config` / ``sac_config`` and ``true_reward_run``: same
learner, hyperparameters, network and env steps). Each run reports the CPU and wall seconds of
its training (the final evaluation and the closing summary and plot excluded) and the CPU spent
in each phase:

- ``policy update``: SB3's ``train`` (gradient steps of the policy and value function);
- ``rollouts``: SB3's ``collect_rollouts`` (env steps, and for PrefLab the segment recorder, the
  learned reward and the relabelling of what was collected);
- ``reward fit``: :meth:`preflab.loop.PreferenceLoop._fit` (the ensemble fit on the labels);
- ``round, other``: the rest of each feedback round (query selection, the synthetic teacher,
  the store, metrics, the checkpoint);
- ``rest``: everything else in the training call.

Results are appended to a JSON-lines file as each seed finishes; ``--report`` rebuilds the
markdown from it.
"""

from __future__ import annotations

import argparse
import collections
import functools
import json
import subprocess
import sys
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import numpy as np

from preflab.errors import ConfigError, SourceError
from preflab.policy.algos import Backend
from preflab.rundir.reporting import (
    append_jsonl,
    fmt_ci,
    invocations,
    md_table,
    mean_ci,
    read_jsonl,
    verdict,
)
from preflab_bench._report import RESULTS, header, write_report

ARMS = ("ppo", "sac", "sac_sbx")
"""Learners: SB3's PPO and SAC, and SBX's SAC (the fast backend, issue #28) in PrefLab and on the
true reward alike."""
DEFAULT_STEPS = {"ppo": 92_000, "sac": 15_000, "sac_sbx": 15_000}
"""The pendulum bench's budgets (PPO: imitation's real env-step count at 100 labels)."""
PHASES = ("policy update", "rollouts", "reward fit", "round, other", "rest")
TARGET = 1.15
"""Issue #11: reward-learning overhead ≤ 1.15× the same learner on the true reward."""


@contextmanager
def _phase_timers(backend: Backend) -> Iterator[dict[str, float]]:
    """CPU seconds per phase, by wrapping the SB3 and loop methods of this (dedicated) process,
    and SBX's SAC for the sbx backend only (importing SBX, JAX and Flax costs a fresh process
    ~3 s of CPU, before the run's timing starts, which the SB3 arms never use)."""
    from stable_baselines3 import PPO, SAC
    from stable_baselines3.common.off_policy_algorithm import OffPolicyAlgorithm
    from stable_baselines3.common.on_policy_algorithm import OnPolicyAlgorithm

    from preflab.loop import PreferenceLoop

    spent: dict[str, float] = collections.defaultdict(float)
    patched: list[tuple[type, str, Callable[..., Any]]] = []

    def wrap(cls: type, name: str, key: str) -> None:
        original = getattr(cls, name)

        @functools.wraps(original)
        def timed(*args: Any, **kwargs: Any) -> Any:
            c0 = time.process_time()
            try:
                return original(*args, **kwargs)
            finally:
                spent[key] += time.process_time() - c0

        patched.append((cls, name, original))
        setattr(cls, name, timed)

    wrap(PPO, "train", "policy update")
    wrap(SAC, "train", "policy update")
    if backend == "sbx":
        try:
            import sbx

            wrap(sbx.SAC, "train", "policy update")
        except ImportError:  # without the fast extra the sac_sbx arm cannot run anyway
            pass
    wrap(OnPolicyAlgorithm, "collect_rollouts", "rollouts")
    wrap(OffPolicyAlgorithm, "collect_rollouts", "rollouts")
    wrap(PreferenceLoop, "_fit", "reward fit")
    wrap(PreferenceLoop, "run_round", "round")
    try:
        yield spent
    finally:
        for cls, name, original in reversed(patched):
            setattr(cls, name, original)


def child(arm: str, kind: str, seed: int, steps: int, labels: int, segment_length: int) -> dict:
    """One run in this process: CPU, wall and the CPU of each phase."""
    import torch

    from preflab_bench.pendulum import (
        SAC_INITIAL,
        ppo_config,
        preflab_run,
        sac_config,
        true_reward_run,
    )

    torch.set_num_threads(1)
    algo = "sac" if arm == "sac_sbx" else arm
    backend: Backend = "sbx" if arm == "sac_sbx" else "sb3"
    with _phase_timers(backend) as spent:
        if kind == "true":
            run = true_reward_run(
                algo, seed, steps, eval_episodes=1, learning_starts=SAC_INITIAL, backend=backend
            )
        elif algo == "ppo":
            run = preflab_run(
                ppo_config(seed, steps, labels, segment_length=segment_length, eval_episodes=1)
            )
        else:
            cfg = sac_config(
                seed,
                steps,
                labels,
                segment_length=segment_length,
                eval_episodes=1,
                backend=backend,
            )
            run = preflab_run(cfg)
    phases = {k: spent.get(k, 0.0) for k in ("policy update", "rollouts", "reward fit")}
    phases["round, other"] = max(spent.get("round", 0.0) - phases["reward fit"], 0.0)
    phases["rest"] = max(run["cpu_s"] - sum(phases.values()), 0.0)
    keep = ("wall_s", "cpu_s", "env_steps", "true_return")
    return {k: run[k] for k in keep} | {"phases": phases}


def _spawn(arm: str, kind: str, seed: int, args: argparse.Namespace) -> dict[str, Any]:
    argv = [
        sys.executable,
        "-m",
        "preflab.cli.main",
        "bench",
        "overhead",
        "--child",
        kind,
        "--arm",
        arm,
        "--seeds",
        str(seed),
        "--labels",
        str(args.labels),
        "--env-steps",
        str(args.env_steps or DEFAULT_STEPS[arm]),
        "--segment-length",
        str(args.segment_length),
    ]
    done = subprocess.run(argv, capture_output=True, text=True, check=False)
    lines = [ln for ln in done.stdout.splitlines() if ln.startswith("{")]
    if done.returncode != 0 or not lines:
        tail = (done.stderr or done.stdout).strip().splitlines()[-5:]
        raise SourceError(
            f"the {kind} {arm} run for seed {seed} failed (exit {done.returncode}): "
            + " | ".join(tail)
        )
    return json.loads(lines[-1])


def run_seeds(args: argparse.Namespace, command: str) -> None:
    invocation = f"{datetime.now(UTC):%Y%m%dT%H%M%S}"
    for seed in args.seeds:  # the arms side by side, seed by seed
        for arm in args.arm:
            order = ("true", "preflab") if seed % 2 == 0 else ("preflab", "true")
            runs = {kind: _spawn(arm, kind, seed, args) for kind in order}
            row = {"arm": arm, "seed": seed, "labels": args.labels, "order": list(order)}
            row |= {"invocation": invocation, "command": command} | runs
            row |= {"plan": args.plan} if args.plan else {}
            append_jsonl(args.runs, row)
            t, p = runs["true"], runs["preflab"]
            ratio = (p["cpu_s"] / p["env_steps"]) / (t["cpu_s"] / t["env_steps"])
            print(f"{arm} seed {seed}: CPU per env step preflab / true = {ratio:.3f}", flush=True)


def _per_step(run: dict[str, Any], key: str) -> float:
    return float(run[key]) / float(run["env_steps"])


def _verdict(ratios: list[float]) -> str:
    """Against ≤ TARGET: 'met' when the 95% CI is below it, 'missed' when above, else 'CI
    spans it'; one run (no CI) by its value."""
    few = "met" if mean_ci(ratios)[0] <= TARGET else "missed"
    return verdict(ratios, above="missed", below="met", spans="CI spans it", few=few, target=TARGET)


def _share(row: dict[str, Any], *phases: str) -> float:
    """(PrefLab − true) CPU per env step in ``phases``, over the true run's CPU per env step."""
    t, p = row["true"], row["preflab"]
    extra = sum(p["phases"][k] / p["env_steps"] - t["phases"][k] / t["env_steps"] for k in phases)
    return extra / _per_step(t, "cpu_s")


def report(rows: list[dict[str, Any]], argv: list[str] | None, runs_name: str) -> str:
    """Ratios with 95% CIs per learner, then the CPU per 1,000 env steps of every phase."""
    budgets = (
        "Pendulum-v1; the pendulum bench's like-for-like configurations (PPO: 8 envs, imitation's "
        "PPO settings, MLP 32×32, warm reward fits of 10 epochs without the 50-step floor; SAC: "
        "PrefLab's preset, 1 env); synthetic labels "
        f"{sorted({r['labels'] for r in rows})}; every run a fresh process with 1 torch thread; "
        f"order alternating by seed. Runs in {runs_name}."
    )
    md = header(
        "Reward-learning overhead: PrefLab vs the same learner on the true reward",
        "overhead",
        argv,
        budgets,
    )
    summary, phases = [], []
    for arm in ARMS:
        mine = [r for r in rows if r["arm"] == arm]
        if not mine:
            continue
        steps = sorted({int(r["preflab"]["env_steps"]) for r in mine})
        cpu = [_per_step(r["preflab"], "cpu_s") / _per_step(r["true"], "cpu_s") for r in mine]
        wall = [_per_step(r["preflab"], "wall_s") / _per_step(r["true"], "wall_s") for r in mine]
        label = f"{arm} @ {'/'.join(map(str, steps))} env steps, {mine[0]['labels']} labels"
        own = [1 + _share(r, "rollouts", "reward fit", "round, other", "rest") for r in mine]
        updates = [_share(r, "policy update") for r in mine]
        summary.append(
            [
                label,
                fmt_ci(cpu),
                fmt_ci(own),
                fmt_ci(updates),
                fmt_ci(wall),
                f"≤ {TARGET}: {_verdict(cpu)}; at equal updates {_verdict(own)}",
            ]
        )
        for phase in PHASES:
            t = [1000 * r["true"]["phases"][phase] / r["true"]["env_steps"] for r in mine]
            p = [1000 * r["preflab"]["phases"][phase] / r["preflab"]["env_steps"] for r in mine]
            extra = [_share(r, phase) for r in mine]
            phases.append([arm, phase, fmt_ci(t), fmt_ci(p), fmt_ci(extra)])
    md += "\n## Overhead per env step (PrefLab / true reward)\n\n"
    md += md_table(
        [
            "learner",
            "CPU ratio",
            "CPU ratio, policy update counted as equal",
            "policy update's share",
            "wall ratio",
            "target",
        ],
        summary,
    )
    md += (
        "\n\nThe CPU ratio is the target's measure (process CPU is robust to the other jobs on "
        "a shared machine; the wall ratio is not). 'Policy update counted as equal' leaves out the "
        "difference in the learner's own gradient steps (PrefLab's loop may make fewer policy "
        "updates at equal env steps, e.g. none before its first reward fit): it is 1 + the "
        "reward-learning rows below.\n"
    )
    md += (
        "\n\n## Where the CPU goes (CPU ms per env step)\n\n"
        "The last column is the phase's share of the overhead: (PrefLab − true) / the true run's "
        "total CPU per env step, so the column sums to the CPU ratio − 1.\n\n"
    )
    md += md_table(
        ["learner", "phase", "true reward", "PrefLab", "adds to the ratio"],
        phases,
    )
    md += _protocol_section(rows)
    md += _backends_section(rows)
    if runs := invocations(rows):
        md += "\n\n" + runs
    return md + "\n"


def _protocol_section(rows: list[dict[str, Any]]) -> str:
    """The overhead per env step under the reporting protocol: IQM of PrefLab's CPU (and wall)
    seconds per env step over IQM of the true-reward run's, paired by run, with a stratified
    bootstrap interval corrected for the plan entry's looks; rows without one plan entry are
    exploratory and carry no verdict."""
    from preflab_bench._plan import load_plan
    from preflab_bench._protocol import fmt_interval, ratio_ci, rows_entry
    from preflab_bench._protocol import verdict as protocol_verdict

    plan = load_plan()
    table = []
    for arm in ARMS:
        mine = [r for r in rows if r["arm"] == arm]
        if len(mine) < 2:
            continue
        entry, conf = rows_entry(mine, plan)
        for key in ("cpu_s", "wall_s"):
            x, y = (
                np.array([[_per_step(r[kind], key)] for r in mine]) for kind in ("preflab", "true")
            )
            iv = ratio_ci(x, y, paired=True, confidence=conf)
            said = protocol_verdict(iv.lo, iv.hi, TARGET, "below") if entry else "exploratory"
            table.append(
                [
                    arm,
                    {"cpu_s": "CPU", "wall_s": "wall"}[key],
                    len(mine),
                    fmt_interval(iv),
                    f"≤ {TARGET}: {said}",
                ]
            )
    if not table:
        return ""
    return (
        "\n\n## Under the reporting protocol\n\n"
        "IQM of PrefLab's seconds per env step over IQM of the same learner's on the true reward, "
        "paired by run, with a 95% stratified bootstrap interval (corrected for the plan entry's "
        "looks). Runs that name no plan entry were not pre-registered: exploratory, no verdict "
        "(the t-interval verdicts above are the original reading).\n\n"
        + md_table(["learner", "measure", "runs", "IQM ratio [CI]", "target"], table)
    )


def _backends_section(rows: list[dict[str, Any]]) -> str:
    """SBX's SAC against SB3's, seed by seed from the invocations that ran both arms, under the
    reporting protocol (IQM ratios paired by seed, stratified bootstrap, corrected for the plan
    entry's looks; rows without a plan entry are exploratory)."""
    from preflab_bench._plan import load_plan
    from preflab_bench._protocol import fmt_interval, iqm_ci, markdown_table, ratio_ci, rows_entry
    from preflab_bench._protocol import verdict as protocol_verdict

    by = {(r.get("invocation", ""), r["seed"], r["arm"]): r for r in rows}
    keys = sorted(
        (inv, seed) for inv, seed, arm in by if arm == "sac_sbx" and (inv, seed, "sac") in by
    )
    if len(keys) < 2:
        return ""
    sbx = [by[(*k, "sac_sbx")] for k in keys]
    sb3 = [by[(*k, "sac")] for k in keys]
    entry, conf = rows_entry(sbx + sb3, load_plan())

    def col(rs: list[dict[str, Any]], kind: str, key: str, per_step: bool = True) -> np.ndarray:
        return np.array([[_per_step(r[kind], key) if per_step else r[kind][key]] for r in rs])

    out = [
        "\n\n## SBX's SAC against SB3's (the fast backend, issue #28)\n",
        f"{len(keys)} seeds with both arms in one invocation; IQM ratio paired by seed "
        f"[{conf:.2%} stratified bootstrap interval]"
        + (f", plan entry `{entry}`." if entry else "; no plan entry: exploratory, no verdict.")
        + " SB3 runs on 1 torch thread; JAX uses both cores, so CPU is reported beside wall.\n",
    ]
    arms = {"SBX": sbx, "SB3": sb3}
    pl, tr, W = "preflab", "true", "wall_s"
    ratios = (  # what; numerator and denominator (backend, run kind); measure; target (below)
        ("PrefLab wall per env step: SBX / SB3", ("SBX", pl), ("SB3", pl), W, 1.0),
        ("PrefLab CPU per env step: SBX / SB3", ("SBX", pl), ("SB3", pl), "cpu_s", None),
        ("true reward wall per env step: SBX / SB3", ("SBX", tr), ("SB3", tr), W, None),
        ("wall per env step: PrefLab on SBX / SB3, true reward", ("SBX", pl), ("SB3", tr), W, None),
        ("wall per env step: PrefLab on SBX / SBX, true reward", ("SBX", pl), ("SBX", tr), W, None),
    )
    table = []
    for what, (xa, xk), (ya, yk), key, target in ratios:
        x, y = col(arms[xa], xk, key), col(arms[ya], yk, key)
        iv = ratio_ci(x, y, paired=True, confidence=conf)
        said = "-"
        if target is not None:
            said = f"below {target}: " + (
                protocol_verdict(iv.lo, iv.hi, target, "below") if entry else "exploratory"
            )
        table.append([what, fmt_interval(iv), said])
    out.append(md_table(["ratio", "IQM ratio [CI]", "target"], table))
    returns = {
        f"{name}, {kind}": col(rs, kind, "true_return", per_step=False)
        for name, rs in (("SB3", sb3), ("SBX", sbx))
        for kind in ("preflab", "true")
    }
    out.append(
        "\n\nTrue return at the end (1 evaluation episode per run; no target):\n\n"
        + markdown_table(iqm_ci(returns, confidence=conf))
    )
    return "\n".join(out)


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(
        prog="preflab bench overhead",
        description=__doc__,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    ap.add_argument("--arm", choices=ARMS, nargs="+", default=[])
    ap.add_argument("--seeds", type=int, nargs="+", default=[0, 1, 2, 3])
    ap.add_argument("--labels", type=int, default=100)
    ap.add_argument(
        "--env-steps", type=int, default=0, help="env steps per run (0: PPO 92,000, SAC 15,000)"
    )
    ap.add_argument("--segment-length", type=int, default=50)
    ap.add_argument("--plan", default="", help="the plan entry (benchmarks/plan.toml) run")
    ap.add_argument("--runs", type=Path, default=RESULTS / "overhead_runs.jsonl")
    ap.add_argument("--out", type=Path, default=RESULTS / "overhead.md")
    ap.add_argument("--report", action="store_true", help="only rebuild --out from --runs")
    ap.add_argument("--child", choices=("true", "preflab"), help=argparse.SUPPRESS)
    args = ap.parse_args(argv)
    if args.child:  # one run in this fresh process, as JSON on stdout
        arm = args.arm[0] if args.arm else "ppo"
        steps = args.env_steps or DEFAULT_STEPS[arm]
        out = child(arm, args.child, args.seeds[0], steps, args.labels, args.segment_length)
        print(json.dumps(out), flush=True)
        return 0
    if not args.arm and not args.report:
        raise ConfigError("pass --arm ppo and/or sac to run, or --report to rebuild the table")
    given = list(sys.argv[1:] if argv is None else argv)
    if args.arm:
        run_seeds(args, "preflab bench overhead " + " ".join(given))
    if not args.runs.exists():
        raise ConfigError(f"no runs recorded in {args.runs}; run with --arm ppo or sac first")
    rows = read_jsonl(args.runs)
    write_report(report(rows, given, args.runs.name), args.out)
    return 0
