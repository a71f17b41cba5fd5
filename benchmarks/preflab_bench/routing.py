"""Routing (issue 58): how many labels from people (the synthetic oracle standing in for them)
PrefLab needs to reach a share of SAC-on-the-true-reward's return when the reward model and a
simulated AI judge answer the queries they are sure about, against people alone.

Arms, one invocation per seed (the B-Pref preset of the env, at this bench's budget, nets and
teacher: :func:`preflab_bench.bpref.pebble_config`; its 97 % fit stop stays on):

- ``people``: the oracle answers every query; the label budget is B.
- ``routed``: ``--source route`` with the oracle as people (at most B of their labels, the
  calibration share included), the simulated AI judge (``--flip-rate``, errors concentrated on
  similar pairs, :mod:`preflab.sources.simulated_judge`) and the reward model as the cheaper
  answerers; the run asks ``--route-factor`` × B queries in all. Once people's B are spent, a
  pair the model and the AI are unsure about gets no label (``--people-spent skip``, the
  library's default) or the AI's answer regardless of its threshold (``--people-spent ai``).
- ``sac_true_reward``: the same SAC on the env's reward (no labels).

Both preference arms run at every people-label budget B of ``--labels`` (a grid). Each run
appends a row to ``routing_runs.jsonl`` with its return, the labels by answerer, the AI's live
accuracy estimate (Wilson interval) and its true accuracy, and the run's label error (the share
of its counted judgements whose side is against the true returns, ties left out). ``--report``
rebuilds ``routing.md``: per arm and B the IQM ratio to SAC on the true reward (paired by seed,
stratified bootstrap) and L(arm), the smallest B on the grid whose whole ratio interval clears
``SHARE``; the verdict of a ``fraction_of_true_reward`` plan entry is met when L(routed) ≤
(1 − ``FEWER``) × L(people) (a people arm that reaches it nowhere on the grid counts as 2 × the
grid's top), not shown when routing reaches it only at the grid's smallest budget and that is
above the bound, missed otherwise; read once when every run exists.
"""

from __future__ import annotations

import argparse
import dataclasses
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import numpy as np

from preflab.config import TrainConfig
from preflab.errors import ConfigError
from preflab.runstate.checkpointer import Checkpointer
from preflab.sources.routing.config import RoutingConfig
from preflab.sources.routing.router import RoutingSource
from preflab.sources.simulated_judge import SimulatedJudge, SimulatedJudgeConfig
from preflab.sources.teacher import SyntheticTeacher
from preflab.store import FeedbackStore
from preflab_bench import bpref
from preflab_bench._plan import Plan
from preflab_bench._protocol import Verdict, fmt_interval, iqm_ci, markdown_table, ratio_ci
from preflab_bench._report import RESULTS, in_log, log_and_report, log_row
from preflab_bench.efficiency import runs_table

PREF_ARMS = ("people", "routed")
ARMS = (*PREF_ARMS, "sac_true_reward")
SHARE = 0.8
"""Issue 58: people's labels needed to reach this share of SAC on the true reward ..."""
FEWER = 0.6
"""... at least this much fewer with routing (ROVED: 50-80 %)."""


def labels_verdict(
    reach_routed: int | None, reach_people: int | None, top: int, bottom: int | None = None
) -> Verdict:
    """Met when L(routed) ≤ (1 − FEWER) × L(people), where a people arm that reaches the share
    nowhere on the grid counts as 2 × ``top``; not shown when routing reaches it only at the
    grid's smallest budget ``bottom`` and that is above the bound (the grid cannot show fewer);
    missed when L(routed) is off the grid or otherwise above the bound."""
    if reach_routed is None:
        return "missed"
    people = 2 * top if reach_people is None else reach_people
    if reach_routed <= (1 - FEWER) * people:
        return "met"
    return "not shown" if reach_routed == bottom else "missed"


def arm_config(
    args: argparse.Namespace, env_id: str, arm: str, labels: int, seed: int
) -> TrainConfig:
    """The preset at this bench's budget; ``routed``: routing with ``labels`` people labels."""
    if arm == "people":
        ns = argparse.Namespace(**{**vars(args), "labels": labels})
        return bpref.pebble_config(ns, env_id, seed)
    ns = argparse.Namespace(**{**vars(args), "labels": labels * args.route_factor})
    base = bpref.pebble_config(ns, env_id, seed)
    route = RoutingConfig(
        ai="simulated",
        people="oracle",
        target_error=args.target_error,
        calibration_share=args.calibration_share,
        min_calibration=args.min_calibration,
        level=args.level,
        model_threshold=args.model_threshold,
        budget_people=labels,
        people_spent=args.people_spent,
        judge=SimulatedJudgeConfig(flip_rate=args.flip_rate, concentration=args.concentration),
    )
    return dataclasses.replace(base, source="route", route=route)


def label_error(run_dir: Path) -> float | None:
    """Share of the run's judgements (skips and ties left out) whose side is against the true
    returns of the two segments (ties of the returns left out); None without any."""
    store = FeedbackStore(run_dir / "feedback.db", array_dir=run_dir / "segments")
    try:
        queries = {q.id: q for q in store.queries.all()}
        js = [j for _s, j in store.answers.judgements() if j.p is not None and j.p != 0.5]
        ids = sorted({s for j in js for s in (*queries[j.query_id].a, *queries[j.query_id].b)})
        ret = {s.id: s.true_return for s in store.segments.get(ids)}
    finally:
        store.close()
    wrong = n = 0
    for j in js:
        q = queries[j.query_id]
        if j.p is None or len(q.a) != 1 or len(q.b) != 1 or ret[q.a[0]] == ret[q.b[0]]:
            continue
        n += 1
        wrong += (j.p > 0.5) != (ret[q.a[0]] > ret[q.b[0]])
    return wrong / n if n else None


def routing_fields(cfg: TrainConfig, run_dir: Path) -> dict[str, Any]:
    """The routed run's split and the AI's accuracy, from its last checkpoint's router state."""
    router = RoutingSource(
        cfg.route,
        np.random.default_rng(0),
        ai=SimulatedJudge(cfg.route.judge),
        people=SyntheticTeacher(cfg.teacher),
    )
    router.load_state(Checkpointer(run_dir).load().state["source"])
    rep = router.routing_report()
    total = sum(rep["labels"].values())
    acc = rep["ai_accuracy"]
    return {
        "people_labels": rep["labels"]["people"],
        "ai_labels": rep["labels"]["ai"],
        "model_labels": rep["labels"]["model"],
        "ai_share": rep["labels"]["ai"] / total if total else None,
        "ai_accuracy": acc["accuracy"],
        "ai_accuracy_ci": acc["interval"],
        "ai_threshold": acc["threshold"],
        "ai_true_accuracy": rep.get("ai_true_accuracy"),
        "route_reasons": rep["reasons"],
    }


def run_arm(
    args: argparse.Namespace, env_id: str, arm: str, labels: int, seed: int
) -> dict[str, Any]:
    budget = 0 if arm == "sac_true_reward" else labels
    missing = not in_log(args, "routing", env_id, arm, seed, label_budget=budget)
    if arm == "sac_true_reward":
        return bpref.run_sac(args, env_id, seed, row_missing=missing)
    cfg = arm_config(args, env_id, arm, labels, seed)
    run_dir = args.run_root / f"{env_id.replace('/', '_')}-{arm}-l{labels}-s{seed}"
    row = bpref.train_row(cfg, run_dir, row_missing=missing)
    row["label_error"] = label_error(run_dir)
    if arm == "routed":
        row |= routing_fields(cfg, run_dir)
    else:
        row |= {"people_labels": row["labels"], "ai_labels": 0, "model_labels": 0}
    return row


def label_grid(arm: str, plan: Plan, entry_id: str) -> list[int]:
    """The people-label budgets a plan entry runs ``arm`` at: its budget's ``labels`` (one or a
    list); ``routed`` at its ``routed_labels`` when the budget gives them (routing at the grid's
    top budget cannot meet the target, whose bound is at most (1 − FEWER) × 2 × top, so an
    entry may leave it out); SAC on the true reward at 0."""
    if arm == "sac_true_reward":
        return [0]
    budget = plan.entry(entry_id).budget
    key = "routed_labels" if arm == "routed" and "routed_labels" in budget else "labels"
    labels = budget.get(key, [])
    return [int(b) for b in (labels if isinstance(labels, list) else [labels])]


def report(rows: list[dict[str, Any]], plan_path: Path) -> str:
    """The markdown report of ``rows`` (module docstring)."""
    out: list[str] = []
    for env_id, env_rows, status in bpref.envs_under_plan(rows, plan_path, grid=label_grid):
        entry, conf = status.entry, status.confidence
        out.append(f"## {bpref.section_title(env_id, env_rows)}\n\n{status.line}.\n")
        if status.incomplete:  # read once, when every run exists: no result before then
            out.append(runs_table(env_rows, results=False))
            continue
        val, true_seeds, budgets = bpref.returns_by_cell(env_rows)
        lines = [
            "| arm | people labels (budget) | seeds | IQM return [CI] | IQM ratio to SAC on the "
            "true reward [CI] |",
            "|---|---|---|---|---|",
        ]
        reach: dict[str, int | None] = dict.fromkeys(PREF_ARMS)
        measured: set[str] = set()
        for arm in PREF_ARMS:
            for b in budgets:
                seeds = sorted(s for (a, bb, s) in val if a == arm and bb == b and s in true_seeds)
                if len(seeds) == 1:  # one seed: its numbers, no interval and no reach
                    (s0,) = seeds
                    r0 = val[(arm, b, s0)] / val[("sac_true_reward", 0, s0)]
                    lines.append(
                        f"| {arm} | {b} | 1 | {val[(arm, b, s0)]:.4g} (one seed) | "
                        f"{r0:.4g} (one seed) |"
                    )
                    continue
                if not seeds:
                    continue
                x = np.array([[val[(arm, b, s)]] for s in seeds])
                y = np.array([[val[("sac_true_reward", 0, s)]] for s in seeds])
                iqm = iqm_ci({arm: x}, confidence=conf)[arm].iqm
                ratio = ratio_ci(x, y, paired=True, confidence=conf)
                measured.add(arm)
                lines.append(
                    f"| {arm} | {b} | {len(seeds)} | {fmt_interval(iqm)} | {fmt_interval(ratio)} |"
                )
                if reach[arm] is None and ratio.lo > SHARE:
                    reach[arm] = b
        ref_seeds = sorted(true_seeds)
        if len(ref_seeds) >= 2:
            ref = np.array([[val[("sac_true_reward", 0, s)]] for s in ref_seeds])
            out.append(markdown_table(iqm_ci({"sac_true_reward": ref}, confidence=conf)) + "\n")
        out.append("\n".join(lines) + "\n")
        out.append(_routing_table(env_rows))
        top = max(budgets) if budgets else 0
        cells = {
            a: ("not run" if a not in measured else str(reach[a]) if reach[a] else f"> {top}")
            for a in PREF_ARMS
        }
        out.append(
            f"People's labels to reach {SHARE:.0%} of SAC on the true reward (the smallest budget "
            f"on the grid whose whole ratio interval clears it): people {cells['people']}, "
            f"routed {cells['routed']}.\n"
        )
        if entry is not None and entry.target.kind == "fraction_of_true_reward":
            if abs(entry.target.value - SHARE) > 1e-9:
                raise ConfigError(
                    f"plan entry {entry.id}: the routing report reads the people labels to reach "
                    f"{SHARE:.0%} of SAC on the true reward, not {entry.target.value:.0%}"
                )
            v = labels_verdict(reach["routed"], reach["people"], top, min(budgets))
            out.append(
                f"**Verdict ({entry.id}, {entry.looks} look(s), {conf:.1%} intervals): {v}.** "
                f"Met when L(routed) ≤ {1 - FEWER:.0%} of L(people) ('> {top}' for people counts "
                f"as {2 * top}); not shown when routing reaches it only at the grid's smallest "
                "budget and that is above the bound; missed otherwise.\n"
            )
        out.append(runs_table(env_rows))
    return "\n".join(out)


def _fmt(x: Any, spec: str = ".3f") -> str:
    return "–" if x is None else format(x, spec)


def _routing_table(env_rows: list[dict[str, Any]]) -> str:
    """Per routed run: the split, the AI's live accuracy against its true accuracy, the label
    error (people's runs: their label error)."""
    lines = [
        "| arm | budget | seed | people | AI | model | AI share | AI live accuracy [CI] | "
        "AI true accuracy | label error |",
        "|---|---|---|---|---|---|---|---|---|---|",
    ]
    for r in sorted(env_rows, key=lambda r: (r["arm"], r.get("label_budget", 0), r["seed"])):
        if r["arm"] == "sac_true_reward":
            continue
        ci = r.get("ai_accuracy_ci")
        live = (
            f"{_fmt(r.get('ai_accuracy'))} [{ci[0]:.3f}, {ci[1]:.3f}]"
            if ci and r.get("ai_accuracy") is not None
            else "–"
        )
        lines.append(
            f"| {r['arm']} | {r.get('label_budget', 0)} | {r['seed']} | "
            f"{r.get('people_labels')} | {r.get('ai_labels')} | {r.get('model_labels')} | "
            f"{_fmt(r.get('ai_share'))} | {live} | {_fmt(r.get('ai_true_accuracy'))} | "
            f"{_fmt(r.get('label_error'))} |"
        )
    return "\n".join(lines) + "\n"


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(prog="preflab bench routing", description=__doc__.split("\n\n")[0])
    ap.add_argument(
        "--envs", nargs="+", default=["dm_control/walker-walk-v0"], choices=list(bpref.PRESETS)
    )
    ap.add_argument("--seeds", type=int, nargs="+", default=[120])
    ap.add_argument("--arms", nargs="+", choices=ARMS, default=list(ARMS))
    ap.add_argument("--labels", type=int, nargs="+", default=[25, 50, 100])
    bpref.add_budget_args(ap)
    ap.add_argument("--route-factor", type=int, default=4, help="queries asked per people label")
    ap.add_argument("--flip-rate", type=float, default=0.25, help="the simulated AI's ε̄")
    ap.add_argument("--concentration", choices=("similar", "uniform"), default="similar")
    ap.add_argument("--target-error", type=float, default=0.15, help="--route.target-error")
    ap.add_argument("--calibration-share", type=float, default=0.1)
    ap.add_argument("--min-calibration", type=int, default=10)
    ap.add_argument(
        "--level", type=float, default=0.95, help="--route.level: the Wilson interval's level"
    )
    ap.add_argument("--model-threshold", type=float, default=0.95)
    ap.add_argument(
        "--people-spent",
        choices=("skip", "ai"),
        default="skip",
        help="--route.people-spent: once people's labels are spent, an unsure pair gets no label "
        "(skip) or the AI's answer regardless of its threshold (ai)",
    )
    ap.add_argument("--run-root", type=Path, default=Path("runs") / "routing")
    ap.add_argument("--jsonl", type=Path, default=RESULTS / "routing_runs.jsonl")
    ap.add_argument("--out", type=Path, default=RESULTS / "routing.md")
    ap.add_argument("--report", action="store_true", help="rebuild --out from --jsonl, no runs")
    args = ap.parse_args(argv)
    args.argv = argv

    def runs() -> Iterator[dict[str, Any]]:
        for seed in args.seeds:
            for env_id in args.envs:
                for arm in args.arms:
                    for b in [0] if arm == "sac_true_reward" else args.labels:
                        res = run_arm(args, env_id, arm, b, seed)
                        yield log_row(
                            "routing",
                            args,
                            env_id,
                            arm,
                            seed,
                            label_budget=0 if arm == "sac_true_reward" else b,
                            teacher=args.teacher,
                            backend=args.backend,
                            **res,
                        )

    return log_and_report(
        args,
        bench="routing",
        title="Routing: people's labels to reach SAC-on-the-true-reward, alone and routed",
        budgets="per row (steps, labels, nets and batch as in each row's command)",
        runs=runs,
        report=report,
    )
