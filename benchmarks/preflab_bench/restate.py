"""Restate a finished benchmark result under the reporting protocol (issue #27): per env, the
IQM of each arm with stratified bootstrap intervals, the ratio of IQMs against the plan's
target at the Bonferroni-corrected confidence for the looks recorded in ``benchmarks/plan.toml``,
and the verdict next to the original one. The section is appended to the result file (an
earlier restated section is replaced).

``preflab bench restate --experiment mujoco-termination`` restates
``benchmarks/results/mujoco_termination.md`` from ``mujoco_runs.jsonl``.
"""

from __future__ import annotations

import argparse
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import numpy as np

from preflab.errors import ConfigError, DataError
from preflab_bench import _protocol as protocol
from preflab_bench._plan import PLAN, Plan, check_row, load_plan
from preflab_bench._registration import Registration, registration

SECTION = "## Restated under the protocol (issue #27)"
"""Heading of the appended section (a rerun replaces it)."""


@dataclass(frozen=True, kw_only=True)
class Restatement:
    """Where a finished experiment's runs, plan entry and report are, and which rows are which
    arm."""

    plan_id: str
    """Any entry of the plan chain; the chain's latest entry is restated."""
    runs: Path
    """The JSON-lines run log."""
    report: Path
    """The markdown result file the section is appended to."""
    tag: str
    """Only rows with this ``tag`` count."""
    arms: Mapping[str, Mapping[str, Any]]
    """Arm name (as in the plan) → the field values that select its rows."""
    score: str
    """The row field holding the score."""
    original_variant: str
    """The ``variant`` cell of the original summary table's rows to quote verdicts from."""
    rows_note: str = ""
    """What the report says about where its rows came from, beyond their count (e.g. that they
    predate the protocol); empty: each row's own command."""


RESTATEMENTS: dict[str, Restatement] = {
    "mujoco-termination": Restatement(
        plan_id="mujoco-termination-restated",
        runs=Path("benchmarks/results/mujoco_runs.jsonl"),
        report=Path("benchmarks/results/mujoco_termination.md"),
        tag="t200k",
        arms={
            "preflab_absorbing": {"kind": "preflab", "variant": "absorbing"},
            "ppo_true_reward": {"kind": "true_reward", "variant": "standard"},
        },
        score="return_true_env",
        original_variant="absorbing",
        rows_note=(
            "They were run before the protocol existed; the commands are the ones under "
            "'Budget and invocations' above. The fixed-horizon variant is not restated (not in "
            "the plan)."
        ),
    ),
    "mujoco-700-fresh": Restatement(
        plan_id="mujoco-700-fresh",
        runs=Path("benchmarks/results/mujoco_runs.jsonl"),
        report=Path("benchmarks/results/mujoco_700_fresh.md"),
        tag="m700f",
        arms={
            "preflab_absorbing": {"kind": "preflab", "variant": "absorbing"},
            "ppo_true_reward": {"kind": "true_reward", "variant": "standard"},
        },
        score="return_true_env",
        original_variant="absorbing",
    ),
    **{
        f"llm-fig7-uniform-acc{pct}": Restatement(
            plan_id=f"llm-fig7-uniform-acc{pct}",
            runs=Path("benchmarks/results/llm_fig7_uniform_runs.jsonl"),
            report=Path(f"benchmarks/results/llm_fig7_uniform_acc{pct}.md"),
            tag="f7u",
            arms={
                "potential": {"mode": "potential", "accuracy": pct / 100, "queries": 10},
                "default": {"mode": "default"},
            },
            score="return",
            original_variant="potential",
        )
        for pct in (60, 90)
    },
}
"""``--experiment`` name → what to restate."""


@dataclass(frozen=True, kw_only=True)
class EnvResult:
    """One env restated."""

    env: str
    """The env."""
    seeds: tuple[int, ...]
    """The seeds of the plan chain for this env (both arms ran each)."""
    looks: int
    """Looks at this env's result along the plan chain."""
    arms: dict[str, protocol.ArmSummary]
    """Per arm, at the corrected confidence."""
    ratio: protocol.Interval
    """IQM(first arm) / IQM(second arm), paired by seed, at the corrected confidence."""
    ratio_uncorrected: protocol.Interval
    """The same at the base confidence, as if the result had been read once."""
    ratio_reseeded: tuple[protocol.Interval, ...]
    """The corrected ratio interval again with other bootstrap seeds (Monte Carlo check)."""
    improvement: protocol.Interval
    """P(first arm > second arm) at the corrected confidence."""
    verdict: protocol.Verdict
    """The protocol's verdict (corrected interval against the target)."""
    verdict_uncorrected: protocol.Verdict
    """The verdict the uncorrected interval would give."""
    original: str
    """The original report's verdict for this env, as written there."""


def _select(rows: Sequence[Mapping[str, Any]], spec: Restatement, arm: str, env: str) -> list[Any]:
    want = {"tag": spec.tag, "env": env, **spec.arms[arm]}
    return [r for r in rows if all(r.get(k) == v for k, v in want.items())]


def _scores_by_seed(rows: list[Mapping[str, Any]], field: str, what: str) -> dict[int, float]:
    out: dict[int, float] = {}
    for r in rows:
        seed = int(r["seed"])
        if seed in out:
            raise DataError(
                f"two runs of {what} with seed {seed}; remove the duplicate line from the run log"
            )
        out[seed] = float(r[field])
    return out


def original_verdicts(report: str, variant: str) -> dict[str, str]:
    """Env → the verdict cell ("met", "not shown", ...) of the original summary table: its rows
    start ``| ENV | VARIANT |`` and end with ``...: VERDICT |``."""
    body = report.split(f"\n{SECTION}\n", 1)[0]
    found: dict[str, str] = {}
    for line in body.splitlines():
        cells = [c.strip() for c in line.strip().strip("|").split("|")]
        if len(cells) >= 3 and cells[1] == variant and ":" in cells[-1]:
            found.setdefault(cells[0], cells[-1].rsplit(":", 1)[1].strip())
    return found


def restate(
    spec: Restatement,
    plan: Plan,
    rows: Sequence[Mapping[str, Any]],
    *,
    original: Mapping[str, str],
    confidence: float = 0.95,
    reps: int = 10_000,
    seed: int = 0,
    check_seeds: int = 4,
) -> list[EnvResult]:
    """Every env of the plan chain, restated (see the module docstring). ``check_seeds``: how
    many other bootstrap seeds recompute the corrected ratio interval, to show whether its
    verdict is steady against Monte Carlo noise."""
    head = plan.head(spec.plan_id)
    target = head.target
    x_arm, y_arm = head.arms[0], head.arms[1]
    if set(head.arms) != set(spec.arms):
        raise ConfigError(
            f"the plan's arms {list(head.arms)} and the restatement's {list(spec.arms)} differ; "
            "make them name the same arms"
        )
    results = []
    for env in plan.envs(head.id):
        seeds = plan.seeds(head.id, env)
        looks = plan.looks(head.id, env)
        by_arm = {
            arm: _scores_by_seed(_select(rows, spec, arm, env), spec.score, f"{arm} on {env}")
            for arm in (x_arm, y_arm)
        }
        for arm, scores in by_arm.items():
            missing = sorted(set(seeds) - set(scores))
            if missing:
                raise DataError(
                    f"{arm} on {env} has no run for planned seeds {missing} in the run log "
                    f"(tag {spec.tag}); run them or correct the plan"
                )
        x = np.array([[by_arm[x_arm][s]] for s in seeds])
        y = np.array([[by_arm[y_arm][s]] for s in seeds])
        level = protocol.corrected_confidence(confidence, looks)
        kw = {"reps": reps, "seed": seed}
        ratio = protocol.ratio_ci(x, y, paired=True, confidence=level, **kw)
        ratio95 = protocol.ratio_ci(x, y, paired=True, confidence=confidence, **kw)
        reseeded = tuple(
            protocol.ratio_ci(x, y, paired=True, confidence=level, reps=reps, seed=seed + k)
            for k in range(1, check_seeds + 1)
        )
        results.append(
            EnvResult(
                env=env,
                seeds=seeds,
                looks=looks,
                arms=protocol.iqm_ci({x_arm: x, y_arm: y}, confidence=level, **kw),
                ratio=ratio,
                ratio_uncorrected=ratio95,
                ratio_reseeded=reseeded,
                improvement=protocol.probability_of_improvement(x, y, confidence=level, **kw),
                verdict=protocol.verdict(ratio.lo, ratio.hi, target.value, target.direction),
                verdict_uncorrected=protocol.verdict(
                    ratio95.lo, ratio95.hi, target.value, target.direction
                ),
                original=original.get(env, NO_ORIGINAL),
            )
        )
    return results


def _pct(c: float) -> str:
    return f"{100 * c:.4g}%"


def _seed_span(seeds: Sequence[int]) -> str:
    s = sorted(seeds)
    return f"{s[0]}–{s[-1]}" if s == list(range(s[0], s[-1] + 1)) else ", ".join(map(str, s))


def _reseeded(r: EnvResult, target: float, direction: protocol.Direction) -> str:
    """The corrected interval's ends over the main and the check bootstrap seeds, and whether
    every one gives the same verdict."""
    ivs = (r.ratio, *r.ratio_reseeded)
    los, his = [iv.lo for iv in ivs], [iv.hi for iv in ivs]
    steady = len({protocol.verdict(iv.lo, iv.hi, target, direction) for iv in ivs}) == 1
    return (
        f"lo {min(los):.4g}–{max(los):.4g}, hi {min(his):.4g}–{max(his):.4g} "
        f"({len(ivs)} seeds): {'steady' if steady else 'verdict flips with the seed'}"
    )


def _close_call(iv: protocol.Interval, target: float) -> str:
    """ " (a close call: its lower end is within 1% of the target)" or ""."""
    ends = {"lower": iv.lo, "upper": iv.hi}
    near = [k for k, v in ends.items() if abs(v - target) <= 0.01 * abs(target)]
    return f" (a close call: its {near[0]} end is within 1% of {target:g})" if near else ""


NO_ORIGINAL = "(not in the original table)"
"""An env's original verdict where the result file had none: an entry read for the first time."""


def _changes(results: Sequence[EnvResult], confidence: float, target: float) -> str:
    """One bullet per env: the original verdict, the restated one, and the intervals that
    separate the two causes of a change (the statistic, the looks correction). An env with no
    original verdict (a new entry's) says so instead of an arrow, and counts as no change."""

    def span(iv: protocol.Interval) -> str:
        return f"[{iv.lo:.3g}, {iv.hi:.3g}]"

    lines = []
    for r in results:
        base = (
            f"- {r.env}: **{r.verdict}** (no earlier verdict). "
            if r.original == NO_ORIGINAL
            else f"- {r.env}: **{r.original} → {r.verdict}**. "
        )
        u = span(r.ratio_uncorrected) + _close_call(r.ratio_uncorrected, target)
        c = span(r.ratio) + _close_call(r.ratio, target)
        if r.looks == 1:
            detail = f"The IQM ratio's {_pct(confidence)} interval, {c}, says {r.verdict} (one look: no correction)."
        elif r.verdict_uncorrected == r.verdict:
            detail = (
                f"The IQM ratio's {_pct(confidence)} interval without the looks correction, {u}, "
                f"already says {r.verdict}; the {r.looks}-look correction widens it to {c}."
            )
        else:
            detail = (
                f"The IQM ratio alone would say {r.verdict_uncorrected} at {_pct(confidence)} "
                f"({u}); the {r.looks}-look correction widens it to {c}, which says {r.verdict}."
            )
        lines.append(base + detail)
    if all(r.original == NO_ORIGINAL for r in results):
        summary = "No earlier verdict to compare with: the entry is read here for the first time."
        return summary + "\n\n" + "\n".join(lines) + "\n"
    changed = [
        f"{r.env} ({r.original} → {r.verdict})"
        for r in results
        if r.verdict != r.original and r.original != NO_ORIGINAL
    ]
    kept = [r.env for r in results if r.verdict == r.original]
    summary = (
        "What changed against the original verdicts: "
        + (f"{', '.join(changed)} changed" if changed else "no verdict changed")
        + (
            f"; {', '.join(kept)} kept {'its' if len(kept) == 1 else 'their'} verdict"
            if changed and kept
            else ""
        )
        + "."
    )
    return summary + "\n\n" + "\n".join(lines) + "\n"


def section(
    spec: Restatement,
    plan: Plan,
    results: Sequence[EnvResult],
    rows: Sequence[Mapping[str, Any]],
    *,
    command: str,
    confidence: float,
    reps: int,
    seed: int,
    check_seeds: int,
    rliable_version: str,
    registered: Registration | None = None,
) -> str:
    """The markdown section appended to the result file. ``registered``: whether the head entry
    was committed before its runs (:func:`registered_before`); None says nothing about it."""
    from preflab.rundir.reporting import md_table

    head = plan.head(spec.plan_id)
    chain = plan.chain(head.id)
    t = head.target
    x_arm, y_arm = head.arms[0], head.arms[1]
    used = [
        r
        for r in rows
        if r.get("tag") == spec.tag
        and any(all(r.get(k) == v for k, v in sel.items()) for sel in spec.arms.values())
        and r.get("env") in plan.envs(head.id)
        and int(r.get("seed", -1)) in plan.seeds(head.id, str(r.get("env")))
    ]
    checks = [check_row(r, plan) for r in used]
    exploratory = sum(c.status == "exploratory" for c in checks)
    reasons = sorted({reason for c in checks for reason in c.reasons})
    table = md_table(
        [
            "env",
            "seeds",
            "looks",
            "confidence (corrected)",
            f"IQM {x_arm} / IQM {y_arm} [corrected CI]",
            f"verdict (target {t.direction} {t.value:g})",
            "corrected CI over all bootstrap seeds",
            f"same ratio at {_pct(confidence)}, uncorrected",
            f"P({x_arm} > {y_arm}) [corrected CI]",
            "original verdict (mean paired difference, 95% t, uncorrected)",
        ],
        [
            [
                r.env,
                f"{len(r.seeds)} ({_seed_span(r.seeds)})",
                r.looks,
                _pct(r.ratio.confidence),
                protocol.fmt_interval(r.ratio, 3),
                f"**{r.verdict}**",
                _reseeded(r, t.value, t.direction),
                f"[{r.ratio_uncorrected.lo:.3g}, {r.ratio_uncorrected.hi:.3g}]: "
                f"{r.verdict_uncorrected}",
                protocol.fmt_interval(r.improvement, 3),
                r.original,
            ]
            for r in results
        ],
    )
    per_arm = "\n".join(
        f"**{r.env}** ({len(r.seeds)} seeds, {r.looks} looks):\n\n"
        + protocol.markdown_table(r.arms)
        for r in results
    )
    return (
        f"{SECTION}\n\n"
        f"Command: `{command}`  \n"
        f"Date: {datetime.now(UTC).strftime('%Y-%m-%d %H:%M UTC')}  \n"
        f"Plan: `benchmarks/plan.toml`, chain {' → '.join(f'`{c.id}`' for c in chain)}"
        + (f". `{registered.entry}` is **{registered.wording()}**" if registered else "")
        + ".\n\n"
        f"Protocol: per env, the IQM (25% trimmed mean) of the per-seed `{spec.score}` of each "
        f"arm; target: IQM({x_arm}) / IQM({y_arm}) {t.direction} {t.value:g}, paired by seed, "
        f"with a stratified bootstrap percentile interval (rliable {rliable_version}, {reps} "
        f"resamples, bootstrap seed {seed}"
        + (
            f"; seeds {seed + 1}–{seed + check_seeds} recompute it to show the Monte Carlo spread"
            if check_seeds
            else ""
        )
        + ") at the Bonferroni-corrected confidence "
        f"1 − {1 - confidence:.2g} / looks, where looks counts the plan entries that added "
        "seeds for that env. Verdict: met when the whole corrected interval lies above the "
        "target, missed when it lies below, not shown otherwise. Since the bootstrap pairs each "
        f"resample's two IQMs (and {y_arm}'s IQM is positive), the verdict is the same as for "
        f"IQM({x_arm}) − {t.value:g} × IQM({y_arm}) against 0, the IQM form of the original "
        "test. The IQM drops each arm's lowest and highest quarter of seeds separately; the "
        "original mean of paired differences kept every seed.\n\n"
        f"Rows: {len(used)} rows of `{spec.runs.name}` (tag `{spec.tag}`) enter; "
        f"{exploratory} of them are exploratory under the protocol"
        + (f" ({'; '.join(reasons)})" if reasons else "")
        + ". "
        + (spec.rows_note or "Each row records the command that ran it.")
        + "\n\n"
        + table
        + "\n"
        + _changes(results, confidence, t.value)
        + "\nPer arm, at each env's corrected confidence:\n\n"
        + per_arm
    )


def registered_before(
    spec: Restatement,
    plan: Plan,
    rows: Sequence[Mapping[str, Any]],
    plan_file: Path,
    runs: Path,
    *,
    history: bool = True,
) -> Registration:
    """Whether every entry of the head's chain was committed before the runs the section uses
    (:mod:`preflab_bench._registration`): the head's reading, or the first entry of the chain
    that is not pre-registered. Each entry is judged on the rows of its own seeds."""
    head = plan.head(spec.plan_id)
    queue = plan_file.with_name("queue.toml")
    readings = []
    for e in plan.chain(head.id):
        mine = [
            r
            for r in rows
            if r.get("tag") == spec.tag
            and any(all(r.get(k) == v for k, v in sel.items()) for sel in spec.arms.values())
            and r.get("env") in plan.envs(head.id)
            and int(r.get("seed", -1)) in e.seeds_for(str(r.get("env")))
        ]
        reg = registration(e, mine, plan_file=plan_file, logs=[runs], queue=queue, history=history)
        if reg.status != "pre-registered":
            return reg
        readings.append(reg)
    return readings[-1]


def replace_section(report: str, new: str) -> str:
    """``report`` with its restated section replaced by ``new`` (appended when absent)."""
    start = report.find(f"\n{SECTION}\n")
    if start < 0:
        return report.rstrip("\n") + "\n\n" + new
    end = report.find("\n## ", start + len(SECTION) + 2)
    tail = report[end:] if end >= 0 else ""
    return report[:start].rstrip("\n") + "\n\n" + new.rstrip("\n") + "\n" + tail


def main(argv: list[str] | None = None) -> int:
    from importlib.metadata import version

    from preflab.rundir.reporting import read_jsonl

    ap = argparse.ArgumentParser(prog="preflab bench restate", description=__doc__)
    ap.add_argument("--experiment", required=True, choices=sorted(RESTATEMENTS))
    ap.add_argument("--plan", default=str(PLAN), help="the plan file (benchmarks/plan.toml)")
    ap.add_argument("--runs", default="", help="the run log (default: the experiment's)")
    ap.add_argument("--out", default="", help="the result file to append to (default: its own)")
    ap.add_argument("--reps", type=int, default=10_000, help="bootstrap resamples")
    ap.add_argument("--seed", type=int, default=0, help="bootstrap seed")
    ap.add_argument(
        "--check-seeds", type=int, default=4, help="extra bootstrap seeds for the Monte Carlo check"
    )
    ap.add_argument("--confidence", type=float, default=0.95, help="before the looks correction")
    args = ap.parse_args(argv)
    spec = RESTATEMENTS[args.experiment]
    runs = Path(args.runs) if args.runs else spec.runs
    out = Path(args.out) if args.out else spec.report
    plan = load_plan(args.plan)
    rows = read_jsonl(runs)
    report = out.read_text() if out.is_file() else f"# {args.experiment}, restated\n"
    results = restate(
        spec,
        plan,
        rows,
        original=original_verdicts(report, spec.original_variant),
        confidence=args.confidence,
        reps=args.reps,
        seed=args.seed,
        check_seeds=args.check_seeds,
    )
    registered = registered_before(spec, plan, rows, Path(args.plan), runs)
    given = list(argv) if argv is not None else []
    text = section(
        spec,
        plan,
        results,
        rows,
        command=" ".join(["preflab bench restate", *given]),
        confidence=args.confidence,
        reps=args.reps,
        seed=args.seed,
        check_seeds=args.check_seeds,
        rliable_version=version("rliable"),
        registered=registered,
    )
    out.write_text(replace_section(report, text))
    for r in results:
        print(
            f"{r.env}: ratio {protocol.fmt_interval(r.ratio, 3)} at {_pct(r.ratio.confidence)} "
            f"({r.looks} looks): {r.verdict} (original: {r.original})"
        )
    print(f"appended to {out}")
    return 0


if __name__ == "__main__":
    import sys

    raise SystemExit(main(sys.argv[1:]))
