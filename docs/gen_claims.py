"""The generated parts of ``docs/concepts/claims.md``, filled at build time (docs/hooks.py), so
the page stays true as run-log rows land:

- ``<!-- runs ENTRY -->`` becomes ": N of M runs done": the rows of ``benchmarks/results/
  *_runs.jsonl`` that name the plan entry (``"plan": "ENTRY"``) against the runs it plans
  (:func:`planned`);
- ``<!-- claims:entries -->`` becomes a table of every plan entry that has rows or is waiting
  for them: when it was committed, whether before its first run (``preflab_bench.
  _registration``: the commit that first holds it, its queue job's frozen code, the rows'
  times and commits), runs done of planned, and the wall hours its rows record (:func:`wall`).

Nothing here reads a verdict: the page's verdicts are written by hand from the result files.
"""

from __future__ import annotations

import json
import re
import tomllib
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from preflab_bench._plan import Experiment, Plan, load_plan
from preflab_bench._registration import registration

ROOT = Path(__file__).resolve().parents[1]
RESULTS = ROOT / "benchmarks" / "results"
PLAN = ROOT / "benchmarks" / "plan.toml"
QUEUE = ROOT / "benchmarks" / "queue.toml"
RUNS_MARK = re.compile(r"<!-- runs ([a-z0-9-]+) -->")
TABLE_MARK = "<!-- claims:entries -->"

PLANNED: Mapping[str, tuple[int, str]] = {
    "crowd-fig5-viewpoints": (12, "one row per seed and PPO checkpoint (25k and 100k steps)"),
    "prefguide-voting-fresh20": (20, "one row set per seed (counted: seeds with rows)"),
}
"""Entries whose rows are not one per (env, seed, arm, label budget): planned count, unit."""
BY_SEED = frozenset({"prefguide-voting-fresh20"})
"""Entries counted in seeds with rows, not rows."""


@dataclass
class Rows:
    """One plan entry's run-log rows and the files they are in."""

    rows: list[dict[str, Any]] = field(default_factory=list)
    logs: set[Path] = field(default_factory=set)


def rows_by_entry(results: Path = RESULTS) -> dict[str, Rows]:
    """Plan id → its rows, over every ``*_runs.jsonl`` of ``results``."""
    out: dict[str, Rows] = {}
    for log in sorted(results.glob("*_runs.jsonl")):
        for line in log.read_text(encoding="utf-8").splitlines():
            if not line.strip():
                continue
            row = json.loads(line)
            plan = row.get("plan") if isinstance(row, dict) else None
            if isinstance(plan, str) and plan:
                got = out.setdefault(plan, Rows())
                got.rows.append(row)
                got.logs.add(log)
    return out


def planned(plan: Plan, e: Experiment) -> int:
    """Runs the entry makes itself: per env, its seeds × the arms it does not reuse, each
    preference arm once per label budget (``budget.labels``, or ``budget.<arm>_labels``) and
    an arm on the true reward once; :data:`PLANNED` for the entries counted otherwise."""
    if e.id in PLANNED:
        return PLANNED[e.id][0]
    per_seed = 0
    for arm in e.arms:
        if arm in e.reuse:
            continue
        budgets = e.budget.get(f"{arm}_labels", e.budget.get("labels"))
        true_reward = "true" in arm
        per_seed += len(budgets) if isinstance(budgets, list) and not true_reward else 1
    envs = plan.envs(e.id) or (None,)
    return sum(len(e.seeds_for(env)) for env in envs) * per_seed


def done(e: Experiment, rows: Rows | None) -> int:
    """Runs done: its rows (for :data:`BY_SEED` entries, the seeds with rows)."""
    if rows is None:
        return 0
    if e.id in BY_SEED:
        return len({r.get("seed") for r in rows.rows})
    return len(rows.rows)


def _seconds(v: Any) -> float | None:
    return float(v) if isinstance(v, int | float) and not isinstance(v, bool) else None


def wall(rows: Rows) -> tuple[float, str]:
    """Summed wall seconds of the rows and the field they come from (``wall_s``; a pair row of
    the overhead bench: ``true.wall_s`` + ``preflab.wall_s``), or how many rows lack one."""
    total, lacking, fields = 0.0, 0, set()
    for r in rows.rows:
        own = _seconds(r.get("wall_s"))
        if own is not None:
            total += own
            fields.add("`wall_s`")
            continue
        pair = [
            _seconds(r[k].get("wall_s")) for k in ("true", "preflab") if isinstance(r.get(k), dict)
        ]
        if pair and all(p is not None for p in pair):
            total += sum(p for p in pair if p is not None)
            fields.add("`true.wall_s` + `preflab.wall_s`")
        else:
            lacking += 1
    if lacking == len(rows.rows):
        return 0.0, "no wall field in its rows"
    how = " and ".join(sorted(fields))
    return total, how + (f"; {lacking} rows without one" if lacking else "")


def runs_phrase(plan: Plan, by: Mapping[str, Rows], id: str) -> str:
    """ ": N of M runs done" for the entry ``id``."""
    e = plan.entry(id)
    unit = "seeds" if id in BY_SEED else "runs"
    return f": {done(e, by.get(id))} of {planned(plan, e)} {unit} done"


def entries_table(plan: Plan, by: Mapping[str, Rows], *, history: bool = True) -> str:
    """Every entry that has rows, or none yet and is not void: its registration, runs and wall
    hours (see the module docstring)."""
    lines = [
        "| plan entry | committed | registered before its first run? | runs done / planned "
        "| wall hours (field summed) |",
        "|---|---|---|---|---|",
    ]
    queued = set(queued_entries())
    idle = []
    for e in plan.experiments:
        got = by.get(e.id)
        if got is None and e.id not in queued:
            idle.append(e.id)
            continue
        reg = registration(
            e,
            got.rows if got else [],
            plan_file=PLAN,
            logs=sorted(got.logs) if got else (),
            queue=QUEUE,
            history=history,
        )
        status = {
            "pre-registered": "yes",
            "after": "**no**: exploratory",
            "undetermined": "not on record: exploratory",
        }[reg.status]
        if got is None:
            hours = "—"
        else:
            seconds, how = wall(got)
            hours = f"{seconds / 3600:.1f} ({how})" if seconds else how
        if e.void:
            status += "; **void** (`plan_voids.toml`)"
        if withdrawn(e):
            status += "; **withdrawn** (its `plan.toml` note)"
        unit = "seeds" if e.id in BY_SEED else "runs"
        logs = ", ".join(f"`{p.name}`" for p in sorted(got.logs)) if got else "none yet"
        lines.append(
            f"| `{e.id}` | {e.committed} | {status} ({reg.evidence}) "
            f"| {done(e, got)} / {planned(plan, e)} {unit} ({logs}) | {hours} |"
        )
    return (
        "\n".join(lines)
        + "\n\nEntries with no row and no queue job (not queued yet, superseded by a later "
        "entry, or the restated MuJoCo chain, whose rows predate the plan and name no entry): "
        + ", ".join(f"`{i}`" for i in idle)
        + ".\n"
    )


def withdrawn(e: Experiment) -> bool:
    """Whether the entry was withdrawn: its ``plan.toml`` note says WITHDRAWN."""
    return "WITHDRAWN" in e.note


def queued_entries(queue: Path = QUEUE) -> list[str]:
    """The plan entries ``benchmarks/queue.toml`` has a job for (read only)."""
    if not queue.is_file():
        return []
    return [str(j.get("plan")) for j in tomllib.loads(queue.read_text()).get("job", [])]


def fill(markdown: str, *, history: bool = True) -> str:
    """``markdown`` with its marks replaced (see the module docstring)."""
    plan = load_plan(PLAN)
    by = rows_by_entry()
    out = RUNS_MARK.sub(lambda m: runs_phrase(plan, by, m.group(1)), markdown)
    if TABLE_MARK in out:
        out = out.replace(TABLE_MARK, entries_table(plan, by, history=history))
    return out
