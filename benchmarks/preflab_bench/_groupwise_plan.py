"""``preflab bench groupwise`` under a plan entry: which runs it may make, and how its report
reads them (runs only until every planned run exists, then the entry's one look)."""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path
from typing import Any

import numpy as np

from preflab.errors import ConfigError
from preflab.rundir.reporting import md_table
from preflab_bench._plan import Experiment, Plan, load_plan
from preflab_bench._protocol import difference_ci, fmt_interval, rows_entry, verdict

REFERENCE = "true-reward"
"""The reference arm: the same PPO on the environment's own reward, same steps and seed (an
entry may list it among its arms; its verdict compares the decision makers only)."""

SKIPS = {"count": True, "replace": False}
"""``--skips`` → ``DecisionMaker(skips_use_budget=...)``: a skipped group comparison counts
toward the comparison budget, or is replaced by another."""


def planned_entry(
    plan_path: Path,
    entry_id: str,
    *,
    envs: Sequence[str],
    dms: Sequence[str],
    seeds: Sequence[int],
    skips: str,
    overrides: Sequence[str],
    steps: int | None = None,
) -> Experiment:
    """The entry ``entry_id``, after checking that the runs asked for are its own: its bench,
    envs, arms and evaluation seeds, its reading of skips (``budget.skips``), none of the
    budget options that would change what it registered (``overrides``: the ones given), and
    ``steps`` (``--steps``, when given) equal to its PPO budget (``budget.ppo_steps``) in every
    env asked."""
    entry = load_plan(plan_path).entry(entry_id)
    wrong = []
    if entry.bench != "groupwise":
        wrong.append(f"it is an entry of preflab bench {entry.bench}")
    if extra := sorted(set(envs) - set(entry.envs)):
        wrong.append(f"envs {extra} are not its envs {list(entry.envs)}")
    if extra := sorted(set(dms) - set(entry.arms)):
        wrong.append(f"decision makers {extra} are not its arms {list(entry.arms)}")
    if other := sorted(set(seeds) - set(entry.eval_seeds)):
        wrong.append(f"seeds {other} are not its evaluation seeds {list(entry.eval_seeds)}")
    if entry.budget.get("skips") != skips:
        wrong.append(f"it registers --skips {entry.budget.get('skips')}, not {skips}")
    if steps is not None:
        budget = entry_steps(entry)
        if other_budget := {e: budget.get(e) for e in envs if budget.get(e) != steps}:
            wrong.append(
                f"--steps {steps} is not its PPO budget {other_budget} (budget.ppo_steps); "
                "give its budget or leave --steps out (the entry's budget is used)"
            )
    if overrides:
        wrong.append(f"{', '.join(overrides)} would change its registered budgets")
    if wrong:
        raise ConfigError(f"plan entry {entry_id!r}: " + "; ".join(wrong))
    return entry


def entry_steps(entry: Experiment) -> dict[str, int]:
    """The entry's PPO env steps per environment (``budget.ppo_steps``)."""
    return {str(k): int(v) for k, v in dict(entry.budget.get("ppo_steps") or {}).items()}


def missing(rows: Sequence[dict[str, Any]], plan: Plan, entry_id: str) -> list[str]:
    """The entry's planned runs (env × arm × evaluation seed) not in ``rows``."""
    entry = plan.entry(entry_id)
    have = {(r["env"], r["dm"], r["seed"]) for r in rows if r.get("plan") == entry_id}
    return [
        f"{env} {dm} {seed}"
        for env in entry.envs
        for dm in entry.arms
        for seed in plan.seeds(entry_id)
        if (env, dm, seed) not in have
    ]


def incomplete_report(rows: Sequence[dict[str, Any]], plan_path: Path) -> str | None:
    """For rows of a plan entry with planned runs missing: the report that lists the runs made
    (no result: the entry is read once, when every run exists); None for any other rows."""
    if not any(r.get("plan") for r in rows):
        return None
    plan = load_plan(plan_path)
    entry_id, _ = rows_entry(rows, plan)
    if not entry_id:
        return None
    gap = missing(rows, plan, entry_id)
    if not gap:
        return None
    made = sorted(rows, key=lambda r: (r["env"], r["seed"], r["dm"]))
    return (
        f"Plan entry `{entry_id}`: **incomplete**, {len(made)} of {len(made) + len(gap)} planned "
        "runs; the entry is read once, when every run exists, so no result is shown until then "
        f"(missing: {', '.join(gap)}).\n\n"
        + md_table(
            ["env", "dm", "seed", "date", "command"],
            [[r["env"], r["dm"], r["seed"], r["date"], f"`{r['command']}`"] for r in made],
        )
    )


def verdict_section(
    rows: Sequence[dict[str, Any]], kept: Sequence[str], plan_path: Path
) -> list[str]:
    """The entry's verdict per environment: IQM(first arm's final return) − IQM(last decision
    maker's; the reference arm is not one),
    paired by seed, stratified bootstrap interval at the looks-corrected level, against the
    entry's target; empty for rows of no entry (the exploratory section reads those)."""
    if not any(r.get("plan") for r in rows):
        return []
    plan = load_plan(plan_path)
    entry_id, conf = rows_entry(rows, plan)
    if not entry_id or missing(rows, plan, entry_id):
        return []
    entry = plan.entry(entry_id)
    dms = [d for d in entry.arms if d != REFERENCE]
    a, b = dms[0], dms[-1]
    table = []
    for env in entry.envs:
        by = {d: {r["seed"]: r["true_return"] for r in rows if (r["env"], r["dm"]) == (env, d)}
              for d in (a, b)}  # fmt: skip
        seeds = sorted(by[a].keys() & by[b].keys())
        x, y = (np.array([[by[d][s]] for s in seeds]) for d in (a, b))
        iv = difference_ci(x, y, paired=True, confidence=conf)
        said = verdict(iv.lo, iv.hi, entry.target.value, entry.target.direction)
        note = "" if env in kept else " (its reward did not learn: see the first table)"
        table.append([env + note, len(seeds), fmt_interval(iv), f"**{said}**"])
    return [
        f"## Verdict of plan entry `{entry_id}` (one look, {conf:.2%} intervals)",
        "",
        f"IQM({a}) − IQM({b}) of the final true return, paired by seed, stratified bootstrap; "
        f"target: the interval {entry.target.direction} {entry.target.value:g}.",
        "",
        md_table(["Environment", "seeds", f"IQM {a} − IQM {b}", "verdict"], table),
        "",
    ]
