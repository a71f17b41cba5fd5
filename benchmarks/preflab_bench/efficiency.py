"""Label efficiency (issue #28): how many labels PrefLab needs to reach a share of SAC-on-the-
true-reward's return at equal env steps, as it is and with each of the field's additions.

Arms, side by side in one invocation per seed (the B-Pref preset of the env, at this bench's
budget, nets and teacher; :func:`preflab_bench.bpref.pebble_config`):

- ``plain``: PrefLab as it was: random steps (``--initial-steps`` + ``--unsup-steps`` of them),
  disagreement queries, replay relabelling; no pre-training.
- ``pretrain``: PEBBLE's unsupervised pre-training for ``--unsup-steps`` after
  ``--initial-steps`` random steps.
- ``surf``: ``plain`` + SURF's pseudo-labels and temporal cropping (``--surf-*``).
- ``rune``: ``plain`` + RUNE's disagreement bonus (``--rune-*``).
- ``all``: pre-training, SURF and RUNE together.
- ``sac_true_reward``: the same SAC on the env's reward (one run per seed, no labels).

Every preference arm runs at every label budget of ``--labels`` (a grid). Each run appends a
row (command and ``--plan`` entry included) to ``efficiency_runs.jsonl``; ``--report`` rebuilds
``efficiency.md``: per arm and budget the IQM return with its stratified-bootstrap interval and
the ratio to SAC on the true reward (paired by seed), and per arm the smallest budget on the
grid whose whole ratio interval clears 50 % and 80 %. Rows outside a plan entry's seeds are
exploratory. A plan entry may take ``sac_true_reward`` from a ``preflab bench bpref`` entry
(``reuse``; the same run, by the same function): the report reads those rows from
``--reuse-jsonl``. A planned entry is read once, when every arm has every budget of its grid at
every seed.
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
from preflab.policy.shaping import PolicyRewardConfig
from preflab.rundir.reporting import read_jsonl
from preflab_bench import bpref
from preflab_bench._plan import Plan
from preflab_bench._protocol import (
    Verdict,
    fmt_interval,
    iqm_ci,
    markdown_table,
    ratio_ci,
    verdict,
)
from preflab_bench._report import RESULTS, in_log, log_and_report, log_row

PREF_ARMS = ("plain", "pretrain", "surf", "rune", "all")
ARMS = (*PREF_ARMS, "sac_true_reward")
SHARES = (0.5, 0.8)
MOST_LABELS = 100
"""Issue #28: with everything on, PrefLab reaches the share with at most this many labels ..."""
FEWER = 2
"""... and with at most 1 / FEWER of the labels plain PrefLab needs."""


def labels_verdict(reach_all: int | None, reach_plain: int | None, top: int) -> Verdict:
    """Issue #28's labels target as a plan entry of kind ``fraction_of_true_reward`` registers
    it, from L(arm), the smallest budget on the grid whose whole ratio interval clears the share
    (None: none up to ``top``, the grid's largest). Met when L(all) ≤ :data:`MOST_LABELS` and
    L(plain) ≥ :data:`FEWER` × L(all), where a plain that reaches it nowhere on the grid counts
    as ``FEWER × top``; missed when L(all) is off the grid or L(plain) < FEWER × L(all); not
    shown otherwise (all reaches it, but only above MOST_LABELS)."""
    if reach_all is None:
        return "missed"
    plain = FEWER * top if reach_plain is None else reach_plain
    if plain < FEWER * reach_all:
        return "missed"
    return "met" if reach_all <= MOST_LABELS else "not shown"


def arm_config(
    args: argparse.Namespace, env_id: str, arm: str, labels: int, seed: int
) -> TrainConfig:
    """The preset at this bench's budget with the arm's additions."""
    ns = argparse.Namespace(**{**vars(args), "labels": labels})
    base = bpref.pebble_config(ns, env_id, seed)
    pretrain = arm in ("pretrain", "all")
    cfg = dataclasses.replace(
        base,
        initial_steps=args.initial_steps + (0 if pretrain else args.unsup_steps),
        unsup_steps=args.unsup_steps if pretrain else 0,
    )
    if arm in ("surf", "all"):
        cfg = dataclasses.replace(
            cfg,
            fit=dataclasses.replace(
                cfg.fit,
                semi_ratio=args.surf_ratio,
                semi_threshold=args.surf_threshold,
                semi_weight=args.surf_weight,
                crop=args.surf_crop,
            ),
        )
    if arm in ("rune", "all"):
        pr: PolicyRewardConfig = dataclasses.replace(
            cfg.policy_reward, disagreement_bonus=args.rune_beta, bonus_decay=args.rune_decay
        )
        cfg = dataclasses.replace(cfg, policy_reward=pr)
    return cfg


def run_arm(
    args: argparse.Namespace, env_id: str, arm: str, labels: int, seed: int
) -> dict[str, Any]:
    budget = 0 if arm == "sac_true_reward" else labels
    missing = not in_log(args, "efficiency", env_id, arm, seed, label_budget=budget)
    if arm == "sac_true_reward":
        return bpref.run_sac(args, env_id, seed, row_missing=missing)
    cfg = arm_config(args, env_id, arm, labels, seed)
    run_dir = args.run_root / f"{env_id.replace('/', '_')}-{arm}-l{labels}-s{seed}"
    return bpref.train_row(cfg, run_dir, row_missing=missing)


def _row(
    args: argparse.Namespace, env_id: str, arm: str, budget: int, seed: int, res: dict[str, Any]
) -> dict[str, Any]:
    return log_row(
        "efficiency",
        args,
        env_id,
        arm,
        seed,
        label_budget=0 if arm == "sac_true_reward" else budget,
        teacher=args.teacher,
        net_arch=list(args.net_arch),
        batch_size=args.batch_size,
        backend=args.backend,
        **res,
    )


def label_grid(arm: str, plan: Plan, entry_id: str) -> list[int]:
    """The label budgets a plan entry runs ``arm`` at: its budget's ``labels`` (one or a list);
    SAC on the true reward runs once, at 0."""
    if arm == "sac_true_reward":
        return [0]
    labels = plan.entry(entry_id).budget.get("labels", [])
    return [int(b) for b in (labels if isinstance(labels, list) else [labels])]


def report(
    rows: list[dict[str, Any]], plan_path: Path, others: list[dict[str, Any]] | None = None
) -> str:
    """The markdown report of ``rows`` (see the module docstring); ``others``: the run log the
    reused ``sac_true_reward`` rows come from (B-Pref's)."""
    out: list[str] = []
    for env_id, env_rows, status in bpref.envs_under_plan(
        rows, plan_path, others=others or [], grid=label_grid
    ):
        entry, conf = status.entry, status.confidence
        planned = entry is not None
        out.append(f"## {bpref.section_title(env_id, env_rows)}\n\n{status.line}.\n")
        if status.incomplete:
            out.append(_runs_table(env_rows))
            continue
        val = {
            (r["arm"], int(r.get("label_budget", 0)), r["seed"]): float(r["return"])
            for r in env_rows
            if r.get("return") is not None
        }
        true_seeds = {s for (a, _b, s) in val if a == "sac_true_reward"}
        budgets = sorted({b for (a, b, _s) in val if a != "sac_true_reward"})
        lines = [
            "| arm | labels | seeds | IQM return [CI] | IQM ratio to SAC on the true reward [CI] |"
        ]
        lines.append("|---|---|---|---|---|")
        reach: dict[str, dict[float, int | None]] = {}
        measured: set[str] = set()  # arms with an interval at some budget
        for arm in PREF_ARMS:
            reach[arm] = dict.fromkeys(SHARES)
            for b in budgets:
                seeds = sorted(s for (a, bb, s) in val if a == arm and bb == b and s in true_seeds)
                if not seeds:
                    continue
                if len(seeds) == 1:  # one seed: its numbers, no interval and no reach
                    (s0,) = seeds
                    r0 = val[(arm, b, s0)] / val[("sac_true_reward", 0, s0)]
                    lines.append(
                        f"| {arm} | {b} | 1 | {val[(arm, b, s0)]:.4g} (one seed) | {r0:.4g} (one seed) |"
                    )
                    continue
                x = np.array([[val[(arm, b, s)]] for s in seeds])
                y = np.array([[val[("sac_true_reward", 0, s)]] for s in seeds])
                iqm = iqm_ci({arm: x}, confidence=conf)[arm].iqm
                ratio = ratio_ci(x, y, paired=True, confidence=conf)
                measured.add(arm)
                lines.append(
                    f"| {arm} | {b} | {len(seeds)} | {fmt_interval(iqm)} | {fmt_interval(ratio)} |"
                )
                for share in SHARES:
                    if reach[arm][share] is None and ratio.lo > share:
                        reach[arm][share] = b
        paired = []
        for arm in PREF_ARMS[1:]:
            for b in budgets:
                seeds = sorted(
                    s for (a, bb, s) in val if a == arm and bb == b and (("plain", b, s) in val)
                )
                if len(seeds) < 2:
                    continue
                x = np.array([[val[(arm, b, s)]] for s in seeds])
                y = np.array([[val[("plain", b, s)]] for s in seeds])
                ratio = ratio_ci(x, y, paired=True, confidence=conf)
                v = (
                    verdict(ratio.lo, ratio.hi, 1.0, "above")
                    if entry is not None and entry.target.kind == "ratio"
                    else "no target (the entry's target is the labels to reach a share)"
                    if planned
                    else "exploratory"
                )
                paired.append(f"| {arm} | {b} | {len(seeds)} | {fmt_interval(ratio)} | {v} |")
        if paired:
            lines += ["", "| arm / plain | labels | seeds | IQM ratio [CI] | verdict (above 1) |"]
            lines += ["|---|---|---|---|---|", *paired]
        ref_seeds = sorted(true_seeds)
        if len(ref_seeds) >= 2:
            ref = np.array([[val[("sac_true_reward", 0, s)]] for s in ref_seeds])
            out.append(markdown_table(iqm_ci({"sac_true_reward": ref}, confidence=conf)) + "\n")
        out.append("\n".join(lines) + "\n")
        out.append(
            "Labels to reach a share of SAC-on-the-true-reward's IQM return (the smallest budget "
            "on the grid whose whole ratio interval clears it; '>' = none on the grid; "
            "'not run' = the arm has no runs with an interval):\n"
        )
        top = max(budgets) if budgets else 0
        out.append("| arm | " + " | ".join(f"{int(100 * s)} %" for s in SHARES) + " |")
        out.append("|---|" + "---|" * len(SHARES))
        for arm in PREF_ARMS:
            if arm not in measured:
                out.append(f"| {arm} | " + " | ".join("not run" for _ in SHARES) + " |")
                continue
            cells = [str(reach[arm][s]) if reach[arm][s] else f"> {top}" for s in SHARES]
            out.append(f"| {arm} | " + " | ".join(cells) + " |")
        if entry is not None and entry.target.kind == "fraction_of_true_reward":
            share = entry.target.value
            if share not in SHARES:
                raise ConfigError(
                    f"plan entry {entry.id}: the efficiency report reads the labels to reach "
                    f"{' or '.join(f'{x:.0%}' for x in SHARES)} of SAC on the true reward, not "
                    f"{share:.0%}; register one of them"
                )
            l_all, l_plain = reach["all"].get(share), reach["plain"].get(share)
            v = labels_verdict(l_all, l_plain, top)
            out.append(
                f"\n**Verdict ({entry.id}, {entry.looks} look(s), {conf:.1%} intervals): {v}.** "
                f"At {share:.0%} of SAC on the true reward, L(all) = {l_all or f'> {top}'} and "
                f"L(plain) = {l_plain or f'> {top}'} labels. The entry's target: met when L(all) "
                f"≤ {MOST_LABELS} and L(plain) ≥ {FEWER} × L(all) ('> {top}' counts as "
                f"{FEWER * top}); missed when L(all) is '> {top}' or L(plain) < {FEWER} × L(all); "
                "not shown otherwise."
            )
        out.append("\n" + _runs_table(env_rows))
    return "\n".join(out)


def _runs_table(env_rows: list[dict[str, Any]]) -> str:
    lines = ["| arm | labels | seed | return | steps | wall (s) | command |"]
    lines.append("|---|---|---|---|---|---|---|")
    for r in sorted(env_rows, key=lambda r: (r["arm"], r.get("label_budget", 0), r["seed"])):
        lines.append(
            f"| {r['arm']} | {r.get('label_budget', 0)} | {r['seed']} | {float(r['return']):.4g} "
            f"| {r['steps']} | {r['wall_s']:.0f} | `{r['command']}` |"
        )
    return "\n".join(lines) + "\n"


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(
        prog="preflab bench efficiency", description=__doc__.split("\n\n")[0]
    )
    ap.add_argument(
        "--envs", nargs="+", default=["dm_control/walker-walk-v0"], choices=list(bpref.PRESETS)
    )
    ap.add_argument("--seeds", type=int, nargs="+", default=[20])
    ap.add_argument("--arms", nargs="+", choices=ARMS, default=list(ARMS))
    ap.add_argument("--labels", type=int, nargs="+", default=[25, 50, 100, 200, 500, 1000])
    bpref.add_budget_args(ap)
    ap.add_argument("--surf-ratio", type=int, default=1, help="SURF's μ (its code's default)")
    ap.add_argument("--surf-threshold", type=float, default=0.95, help="SURF's τ")
    ap.add_argument("--surf-weight", type=float, default=1.0, help="SURF's λ")
    ap.add_argument("--surf-crop", type=int, default=5, help="SURF's crop range")
    ap.add_argument("--rune-beta", type=float, default=0.05, help="RUNE's β₀")
    ap.add_argument("--rune-decay", type=float, default=1e-5, help="RUNE's ρ per env step")
    ap.add_argument("--run-root", type=Path, default=Path("runs") / "efficiency")
    ap.add_argument("--jsonl", type=Path, default=RESULTS / "efficiency_runs.jsonl")
    ap.add_argument("--out", type=Path, default=RESULTS / "efficiency.md")
    ap.add_argument(
        "--reuse-jsonl",
        type=Path,
        default=RESULTS / "bpref_runs.jsonl",
        help="the run log of the B-Pref entries whose sac_true_reward runs a plan entry reuses",
    )
    ap.add_argument("--report", action="store_true", help="rebuild --out from --jsonl, no runs")
    args = ap.parse_args(argv)
    args.argv = argv
    others = read_jsonl(args.reuse_jsonl) if args.reuse_jsonl.is_file() else []

    def runs() -> Iterator[dict[str, Any]]:
        for seed in args.seeds:
            for env_id in args.envs:
                for arm in args.arms:
                    for b in [0] if arm == "sac_true_reward" else args.labels:
                        res = run_arm(args, env_id, arm, b, seed)
                        yield _row(args, env_id, arm, b, seed, res)

    return log_and_report(
        args,
        bench="efficiency",
        title="Label efficiency: PrefLab's additions against SAC on the true reward",
        budgets="per row (steps, labels, nets and batch as in each row's command)",
        runs=runs,
        report=lambda rows, plan_path: report(rows, plan_path, others),
    )
