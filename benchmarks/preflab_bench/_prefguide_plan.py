"""``preflab bench prefguide --plan ENTRY``: a pre-registered Pref-GUIDE experiment (issue 63).

One invocation runs one evaluation seed of the entry (``--seeds S``), with the entry's budgets
(every budget option given on the command line must equal the entry's), in ``--run-root``:

* every finished piece of the seed (the true-reward reference, each evaluator's human phase,
  each post-human run) is appended, as it finishes, to the seed's progress file
  ``RUN_ROOT/s<S>-progress.jsonl``; an invocation stopped part-way (the queue's time limit, a
  kill) leaves it there, and the next invocation of the same command makes only the pieces it
  lacks (:func:`preflab_bench.prefguide.run_seed` with ``done``);
* when the seed is complete, all its rows (each naming the entry and the command) go to the
  entry's run log in one append, so a run log holds only complete seeds, and the queue, which
  counts a command done when a row of it is in the log, never skips a seed stopped part-way.
  A seed already in the log is not run again.

The report (:func:`plan_report`) lists the runs made until every evaluation seed is in the log;
then, once, the entry's target (IQM over seeds of each seed's mean final return over all its
evaluators, voting − individual, paired by seed, stratified bootstrap at the looks-corrected
confidence) and its verdict, and beside it, without a verdict, the other differences and the
same for the evaluators of the top tier.
"""

from __future__ import annotations

import argparse
import shutil
from collections import defaultdict
from collections.abc import Callable, Mapping, Sequence
from pathlib import Path
from typing import Any

import numpy as np

from preflab.errors import ConfigError
from preflab.rundir.reporting import append_jsonl, md_table, read_jsonl
from preflab_bench._plan import Experiment, load_plan
from preflab_bench._prefguide_runs import GuideConfig
from preflab_bench._protocol import corrected_confidence, difference_ci, fmt_interval
from preflab_bench._report import RESULTS

BENCH = "prefguide"
BUDGET_OPTIONS = (
    "population",
    "evaluators",
    "human_steps",
    "post_steps",
    "steps_per_round",
    "item_length",
    "max_pairs",
    "algo",
    "n_envs",
    "eval_episodes",
)
"""The bench options an entry's ``budget`` fixes (argparse destinations)."""
DIFFERENCES = (("voting", "individual"), ("voting", "regression"), ("individual", "regression"))
"""The paired differences a complete entry reports (the first is the entry's target)."""
TOP = "top"
"""The evaluator tier reported apart (the mixed population's tiers come in turn: top first)."""

Piece = tuple[str, str | None, str | None]
"""A record's identity within a seed: (kind, evaluator, method)."""


def entry_of(args: argparse.Namespace) -> Experiment:
    """The plan entry ``args.plan`` names; it must be this bench's and fix every budget option."""
    entry = load_plan(args.plan_file).entry(args.plan)
    if entry.bench != BENCH:
        raise ConfigError(f"plan entry {entry.id!r} is for preflab bench {entry.bench}")
    lacking = [k for k in BUDGET_OPTIONS if k not in entry.budget]
    if lacking:
        raise ConfigError(f"plan entry {entry.id!r} does not fix the budget options {lacking}")
    return entry


def check_budgets(args: argparse.Namespace, entry: Experiment, given: Sequence[str]) -> None:
    """Refuse an invocation whose budget options, or methods, differ from the entry's: a planned
    run is made with the budgets registered. ``given``: the options on the command line."""
    differ = {
        k: (getattr(args, k), entry.budget[k])
        for k in BUDGET_OPTIONS
        if getattr(args, k) != entry.budget[k]
    }
    if sorted(args.methods) != sorted(entry.arms):
        differ["methods"] = (args.methods, list(entry.arms))
    if differ:
        raise ConfigError(
            f"{entry.id!r} is registered with other budgets (given, planned): {differ}; run it "
            "with the entry's budgets (leave those options out)"
        )
    not_for_plan = [o for o in ("--no-reference", "--reference-budgets") if o in given]
    if not_for_plan:
        raise ConfigError(f"{', '.join(not_for_plan)} cannot be used with --plan")


def guide_config(entry: Experiment) -> GuideConfig:
    """The GuideConfig of an entry's budget."""
    b = entry.budget
    return GuideConfig(
        algo=b["algo"],
        n_envs=b["n_envs"],
        human_steps=b["human_steps"],
        post_steps=b["post_steps"],
        steps_per_round=b["steps_per_round"],
        item_length=b["item_length"],
        max_pairs=b["max_pairs"],
        eval_episodes=b["eval_episodes"],
    )


def paths(entry: Experiment, jsonl: Path | None, out: Path | None) -> tuple[Path, Path]:
    """The entry's run log and report (default ``RESULTS/<entry>_runs.jsonl`` and ``.md``)."""
    name = entry.id.replace("-", "_")
    return jsonl or RESULTS / f"{name}_runs.jsonl", out or RESULTS / f"{name}.md"


def piece(r: Mapping[str, Any]) -> Piece:
    """The identity of a record within its seed."""
    return (str(r["kind"]), r.get("evaluator"), r.get("method"))


def expected_pieces(n_evaluators: int, methods: Sequence[str]) -> set[Piece]:
    """Every record a complete seed has."""
    ids = [f"evaluator-{k}" for k in range(n_evaluators)]
    return (
        {("reference", None, None)}
        | {("human", e, None) for e in ids}
        | {("post", e, m) for e in ids for m in methods}
    )


def run_planned_seed(
    entry: Experiment,
    seed: int,
    *,
    root: Path,
    jsonl: Path,
    command_line: str,
    run: Callable[..., None],
) -> bool:
    """Make (or finish) one evaluation seed of ``entry``; its rows go to ``jsonl`` once all
    exist. ``run`` is :func:`preflab_bench.prefguide.run_seed`. False when the log already
    holds the seed (nothing is made)."""
    if seed not in entry.eval_seeds:
        raise ConfigError(
            f"seed {seed} is not an evaluation seed of {entry.id!r} ({list(entry.eval_seeds)})"
        )
    logged = read_jsonl(jsonl) if jsonl.exists() else []
    if any(r.get("plan") == entry.id and r.get("seed") == seed for r in logged):
        return False
    b = entry.budget
    progress = root / f"s{seed}-progress.jsonl"
    done = {piece(r): r for r in (read_jsonl(progress) if progress.exists() else [])}
    work = root / f"s{seed}-work"
    shutil.rmtree(work, ignore_errors=True)  # a stopped invocation's run folders
    work.mkdir(parents=True)
    run(
        guide_config(entry),
        kind=b["population"],
        n_evaluators=b["evaluators"],
        seed=seed,
        methods=list(entry.arms),
        root=work,
        jsonl=progress,
        command_line=command_line,
        done=done,
        extra={"plan": entry.id},
    )
    rows = {piece(r): r for r in read_jsonl(progress)}
    missing = expected_pieces(b["evaluators"], entry.arms) - set(rows)
    if missing:
        raise ConfigError(f"seed {seed} of {entry.id!r} still lacks {sorted(missing, key=str)}")
    for r in rows.values():
        append_jsonl(jsonl, r)
    shutil.rmtree(work, ignore_errors=True)
    return True


# ----- report --------------------------------------------------------------------------------------
def per_seed_means(
    rows: Sequence[Mapping[str, Any]], methods: Sequence[str], tier: str | None = None
) -> dict[str, dict[int, float]]:
    """method → seed → the mean final return over the seed's evaluators (of ``tier`` only, when
    given; the tier of an evaluator is its human-phase record's)."""
    tiers = {(r["seed"], r["evaluator"]): r["tier"] for r in rows if r["kind"] == "human"}
    vals: dict[tuple[str, int], list[float]] = defaultdict(list)
    for r in rows:
        in_tier = tier is None or tiers.get((r["seed"], r.get("evaluator"))) == tier
        if r["kind"] == "post" and r["method"] in methods and in_tier:
            vals[(r["method"], r["seed"])].append(float(r["true_return"]))
    out: dict[str, dict[int, float]] = {m: {} for m in methods}
    for (m, s), v in vals.items():
        out[m][s] = float(np.mean(v))
    return out


def complete_seeds(rows: Sequence[Mapping[str, Any]], entry: Experiment) -> list[int]:
    """The evaluation seeds whose every record is in ``rows``."""
    want = expected_pieces(entry.budget["evaluators"], entry.arms)
    have: dict[int, set[Piece]] = defaultdict(set)
    for r in rows:
        have[int(r["seed"])].add(piece(r))
    return [s for s in entry.eval_seeds if want <= have[s]]


def plan_report(
    rows: Sequence[Mapping[str, Any]], entry: Experiment, looks: int, confidence: float = 0.95
) -> str:
    """The entry's report body: while seeds are missing, the seeds made (no result: the entry is
    read once, at the end); then the target's interval and verdict and the differences beside
    it. ``rows``: the run log's rows that name the entry."""
    seeds = complete_seeds(rows, entry)
    t = entry.target
    head = (
        f"## Plan entry `{entry.id}`\n\n{entry.question}\n\n"
        f"Target: {t.kind} {t.direction} {t.value:g} ({t.note})\n\n"
    )
    if len(seeds) < len(entry.eval_seeds):
        left = [s for s in entry.eval_seeds if s not in seeds]
        made = [
            [s, sum(r["kind"] == "post" for r in rows if r["seed"] == s), f"`{cmd}`"]
            for s in seeds
            for cmd in sorted({str(r["command"]) for r in rows if r["seed"] == s})
        ]
        return (
            head
            + f"**Incomplete: {len(seeds)} of {len(entry.eval_seeds)} seeds made** (seeds left: "
            f"{left}). The entry is read once, when every seed is in the run log; until then "
            "this report lists the runs only.\n\n"
            + md_table(["seed", "post-human runs", "command"], made)
        )
    level = corrected_confidence(confidence, looks)
    out = [head]
    table = []
    verdict_line = ""
    for tier in (None, TOP):
        means = per_seed_means(rows, entry.arms, tier)
        for k, (a, b) in enumerate(DIFFERENCES):
            x = np.array([[means[a][s]] for s in seeds])
            y = np.array([[means[b][s]] for s in seeds])
            iv = difference_ci(x, y, paired=True, confidence=level)
            target = tier is None and k == 0
            said = entry.verdict_clause(iv.lo, iv.hi).removeprefix("; ") if target else "–"
            who = "all evaluators" if tier is None else f"{tier} tier"
            table.append([who, f"IQM({a}) − IQM({b})", len(seeds), fmt_interval(iv), said])
            if target:
                verdict_line = (
                    f"**IQM(voting) − IQM(individual), all evaluators, {len(seeds)} seeds: "
                    f"{fmt_interval(iv)}** ({level:.2%} stratified bootstrap, paired by seed, "
                    f"looks {looks}){entry.verdict_clause(iv.lo, iv.hi)}.\n"
                )
    out += [
        verdict_line,
        "Per seed: the mean final true return over the seed's evaluators (all of them, or those "
        "of the top tier); IQM over seeds; differences paired by seed. Only the first row is the "
        "entry's target; the others are reported beside it, without a verdict.\n",
        md_table(["evaluators", "difference", "seeds", "point [interval]", "verdict"], table),
    ]
    return "\n".join(out)
