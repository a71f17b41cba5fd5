"""Label efficiency (issues #28 and #59): how many labels PrefLab needs to reach a share of
SAC-on-the-true-reward's return at equal env steps, as it is and with each of the field's
additions.

Arms, side by side in one invocation per seed (the B-Pref preset of the env, at this bench's
budget, nets and teacher; :func:`preflab_bench.bpref.pebble_config`). Each preference arm is
``plain`` plus a set of *parts* (:data:`ARM_PARTS`, :func:`arm_config`):

- ``plain``: PrefLab as it was: random steps (``--initial-steps`` + ``--unsup-steps`` of them),
  disagreement queries, replay relabelling; no pre-training.
- ``pretrain``: PEBBLE's unsupervised pre-training for ``--unsup-steps`` after
  ``--initial-steps`` random steps.
- ``surf``: ``plain`` + SURF's pseudo-labels and temporal cropping (``--surf-*``).
- ``rune``: ``plain`` + RUNE's disagreement bonus (``--rune-*``).
- ``all``: pre-training, SURF and RUNE together.
- ``qpa`` (#59): ``plain`` + QPA's three parts at its authors' walker settings (the
  ``qpa/walker_walk`` preset's values, ``--qpa-*``): policy-aligned queries from the 10 most
  recent episodes, hybrid experience replay (half of each SAC batch from the last 10 episodes
  until the labels are spent) and 20 snippet pairs per labelled pair.
- ``rime`` (#59): ``plain`` + RIME's robust fit **and its warm start**, which fits the reward
  model to PEBBLE's pre-training reward, so ``rime`` is pre-training + RIME (parts
  ``pretrain rime``; ``--rime-warm-start-steps``, RIME's own thresholds at their defaults).
- ``reed`` (#59, item 4): ``plain`` + REED's dynamics-aware pre-training of the reward members
  before every fit, on the replay buffer (``--fit.reed.*``, ``--reed-*``; its settings and where
  they differ from the authors' in docs/guide/frontier-methods.md). No entry has run it.
- ``combo`` (#59): the parts ``--combo`` names (any of :data:`PARTS`, e.g. ``--combo pretrain
  surf qpa rime rune``), so a configuration chosen on tuning seeds runs as one arm. The part
  ``rime`` needs ``pretrain`` beside it (its warm start), and is refused without it. With
  ``surf`` and ``qpa`` together, QPA's snippets are the one crop of the labelled pairs (the fit
  takes one: ``fit.crop`` and ``fit.snippets`` exclude each other); SURF keeps its pseudo-labels.
- ``sac_true_reward``: the same SAC on the env's reward (one run per seed, no labels).

SURF's values changed with #59: ``--surf-ratio 4 --surf-threshold 0.99 --surf-weight 1
--surf-crop 5 --surf-epochs 1000`` are now the defaults, the ``surf/walker_walk`` preset's
(SURF's authors' walker settings; ``--surf-epochs`` sets the reward fit's epochs, first fit
included, as SURF's ``reward_update`` 1,000). The entries before #59 (efficiency-walker-pilot20k,
efficiency-walker-sbx100k) ran SURF's code defaults from their frozen commits; at this code they
are ``--surf-ratio 1 --surf-threshold 0.95 --surf-epochs 0`` (0: the preset's epochs).

``--stop-accuracy 0.97`` sets B-Pref's fit stop on every preference arm (default: the preset's).
``--teacher bpref-mistake --teacher-epsilon 0.3`` sets B-Pref's mistake teacher at ε = 0.3
(``--teacher`` is B-Pref's bench's option; ``--teacher-epsilon`` replaces the teacher's ε).
``--arm-tag T`` logs every preference arm as ``ARM@T`` (its own run directory), so one plan entry
can hold an arm under two teachers; the report then gives ``ARM@T / ARM`` paired by seed.

Every preference arm runs at every label budget of ``--labels`` (a grid). Each run appends a
row (command, ``--plan`` entry and the arm's parts included) to ``efficiency_runs.jsonl``;
``--report`` rebuilds ``efficiency.md``: per arm and budget the IQM return with its
stratified-bootstrap interval and the ratio to SAC on the true reward (paired by seed), each arm
over plain per budget, per arm the smallest budget on the grid whose whole ratio interval clears
50 % and 80 %, and the wall hours of each plan entry's rows; beside it a PNG
(``<out>_curve.png``) of IQM return against labels per arm, per complete entry. Rows outside a plan entry's seeds
are exploratory. A plan entry may take ``sac_true_reward`` from a ``preflab bench bpref`` entry
(``reuse``; the same run, by the same function): the report reads those rows from
``--reuse-jsonl``. A planned entry is read once, as a whole (:func:`sections`): when every arm
has every budget of its grid at every seed on every env of the entry, one row each, all of the
entry's configuration, and every entry it reuses runs from is complete; until then the report
lists which runs exist and nothing of what they gave. An entry of target kind ``frontier`` gets
:func:`frontier_checks` per env and one :func:`frontier_verdict`; one of kind ``selection``
(frontier-tuning-walker) the pick of :mod:`preflab_bench._frontier_pick`; ``rime / pretrain``
(RIME's own share) is shown beside wherever both arms ran.
"""

from __future__ import annotations

import argparse
import dataclasses
from collections.abc import Iterator, Sequence
from pathlib import Path
from typing import Any

import numpy as np

from preflab.config import TrainConfig
from preflab.errors import ConfigError
from preflab.policy.shaping import PolicyRewardConfig
from preflab.rundir.reporting import read_jsonl
from preflab_bench import bpref
from preflab_bench._frontier_pick import selection_text
from preflab_bench._plan import Experiment, Plan, load_plan
from preflab_bench._protocol import (
    Interval,
    Verdict,
    fmt_interval,
    iqm_ci,
    markdown_table,
    ratio_ci,
    verdict,
)
from preflab_bench._report import RESULTS, in_log, log_and_report, log_row

PARTS = ("pretrain", "surf", "qpa", "rime", "rune", "reed")
"""The additions an arm puts on ``plain`` (:func:`arm_config`)."""
ARM_PARTS: dict[str, tuple[str, ...]] = {
    "plain": (),
    "pretrain": ("pretrain",),
    "surf": ("surf",),
    "rune": ("rune",),
    "all": ("pretrain", "surf", "rune"),
    "qpa": ("qpa",),
    "rime": ("pretrain", "rime"),
    "reed": ("reed",),
}
"""Each named preference arm's parts; ``combo``'s are ``--combo``'s."""
PREF_ARMS = (*ARM_PARTS, "combo")
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


def arm_parts(args: argparse.Namespace, arm: str) -> tuple[str, ...]:
    """The parts ``arm`` puts on ``plain``: :data:`ARM_PARTS`, or ``--combo``'s for ``combo``.
    Raises :class:`ConfigError` for a combo without parts, an unknown or repeated part, or RIME
    without pre-training (its warm start fits the pre-training's reward)."""
    if arm != "combo":
        return ARM_PARTS[arm]
    parts = tuple(getattr(args, "combo", None) or ())
    if not parts:
        raise ConfigError(
            f"--arms combo runs the parts --combo names; give them, e.g. --combo {' '.join(PARTS)}"
        )
    unknown = [x for x in parts if x not in PARTS]
    if unknown or len(set(parts)) != len(parts):
        raise ConfigError(
            f"--combo takes distinct parts among {', '.join(PARTS)}; got {' '.join(parts)}"
        )
    if "rime" in parts and "pretrain" not in parts:
        raise ConfigError(
            "--combo rime needs pretrain beside it (RIME's warm start fits the reward model to "
            "PEBBLE's pre-training reward); add pretrain to --combo"
        )
    return tuple(x for x in PARTS if x in parts)  # one order, whatever the command's


def arm_config(
    args: argparse.Namespace, env_id: str, arm: str, labels: int, seed: int
) -> TrainConfig:
    """The preset at this bench's budget with the arm's parts (:func:`arm_parts`), B-Pref's fit
    stop (``--stop-accuracy``) and the teacher's ε (``--teacher-epsilon``) where given."""
    parts = arm_parts(args, arm)
    ns = argparse.Namespace(**{**vars(args), "labels": labels})
    base = bpref.pebble_config(ns, env_id, seed)
    pretrain = "pretrain" in parts
    cfg = dataclasses.replace(
        base,
        initial_steps=args.initial_steps + (0 if pretrain else args.unsup_steps),
        unsup_steps=args.unsup_steps if pretrain else 0,
    )
    fit = cfg.fit
    if getattr(args, "stop_accuracy", None) is not None:
        fit = dataclasses.replace(fit, stop_accuracy=args.stop_accuracy)
    if getattr(args, "teacher_epsilon", None) is not None:
        cfg = dataclasses.replace(
            cfg, teacher=dataclasses.replace(cfg.teacher, epsilon=args.teacher_epsilon)
        )
    if "surf" in parts:
        fit = dataclasses.replace(
            fit,
            semi_ratio=args.surf_ratio,
            semi_threshold=args.surf_threshold,
            semi_weight=args.surf_weight,
            crop=0 if "qpa" in parts else args.surf_crop,  # QPA's snippets crop instead
        )
        if args.surf_epochs:
            fit = dataclasses.replace(fit, epochs=args.surf_epochs)
            cfg = dataclasses.replace(cfg, first_fit_epochs=args.surf_epochs)
    if "qpa" in parts:
        fit = dataclasses.replace(
            fit, snippets=dataclasses.replace(fit.snippets, copies=args.qpa_copies)
        )
        cfg = dataclasses.replace(
            cfg,
            selector="policy-aligned",
            aligned_episodes=args.qpa_episodes,
            replay=dataclasses.replace(
                cfg.replay,
                hybrid=True,
                recent_ratio=args.qpa_recent_ratio,
                recent_episodes=args.qpa_episodes,
                until_labels_spent=True,
            ),
        )
    if "rime" in parts:
        fit = dataclasses.replace(
            fit,
            rime=dataclasses.replace(
                fit.rime, on=True, warm_start_steps=rime_warm_start_steps(args)
            ),
        )
    if "reed" in parts:
        fit = dataclasses.replace(
            fit,
            reed=dataclasses.replace(
                fit.reed,
                on=True,
                steps=args.reed_steps,
                batch_size=args.reed_batch,
                lr=args.reed_lr,
                optimizer=args.reed_optimizer,
                temperature=args.reed_temperature,
                projection=args.reed_projection,
            ),
        )
    cfg = dataclasses.replace(cfg, fit=fit)
    if "rune" in parts:
        pr: PolicyRewardConfig = dataclasses.replace(
            cfg.policy_reward, disagreement_bonus=args.rune_beta, bonus_decay=args.rune_decay
        )
        cfg = dataclasses.replace(cfg, policy_reward=pr)
    return cfg


def rime_warm_start_steps(args: argparse.Namespace) -> int:
    """``--rime-warm-start-steps``, or RIME's authors' 5 minibatches per pre-training step."""
    steps = getattr(args, "rime_warm_start_steps", None)
    return 5 * int(args.unsup_steps) if steps is None else int(steps)


def row_arm(args: argparse.Namespace, arm: str) -> str:
    """The arm's name in the run log: ``ARM@TAG`` with ``--arm-tag`` (preference arms only)."""
    tag = getattr(args, "arm_tag", None)
    return f"{arm}@{tag}" if tag and arm != "sac_true_reward" else arm


def run_arm(
    args: argparse.Namespace, env_id: str, arm: str, labels: int, seed: int
) -> dict[str, Any]:
    budget = 0 if arm == "sac_true_reward" else labels
    name = row_arm(args, arm)
    missing = not in_log(args, "efficiency", env_id, name, seed, label_budget=budget)
    if arm == "sac_true_reward":
        return bpref.run_sac(args, env_id, seed, row_missing=missing)
    cfg = arm_config(args, env_id, arm, labels, seed)
    run_dir = args.run_root / f"{env_id.replace('/', '_')}-{name}-l{labels}-s{seed}"
    return bpref.train_row(cfg, run_dir, row_missing=missing)


def _row(
    args: argparse.Namespace, env_id: str, arm: str, budget: int, seed: int, res: dict[str, Any]
) -> dict[str, Any]:
    extra: dict[str, Any] = {}
    if arm != "sac_true_reward":
        extra["parts"] = list(arm_parts(args, arm))
    if getattr(args, "teacher_epsilon", None) is not None:
        extra["teacher_epsilon"] = args.teacher_epsilon
    return log_row(
        "efficiency",
        args,
        env_id,
        row_arm(args, arm),
        seed,
        label_budget=0 if arm == "sac_true_reward" else budget,
        teacher=args.teacher,
        net_arch=list(args.net_arch),
        batch_size=args.batch_size,
        backend=args.backend,
        **extra,
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
    frontier: dict[str, dict[str, str]] = {}  # frontier entry → env → its checks' state
    frontier_conf: dict[str, float] = {}  # its intervals' confidence (its looks)
    for env_id, env_rows, status in sections(rows, plan_path, others):
        entry, conf = status.entry, status.confidence
        planned = entry is not None
        out.append(f"## {bpref.section_title(env_id, env_rows)}\n\n{status.line}.\n")
        if status.incomplete:  # read once, when every run exists: no result before then
            out.append(runs_table(env_rows, results=False))
            continue
        val, true_seeds, budgets = bpref.returns_by_cell(env_rows)
        lines = [
            "| arm | labels | seeds | IQM return [CI] | IQM ratio to SAC on the true reward [CI] |"
        ]
        lines.append("|---|---|---|---|---|")
        reach: dict[str, dict[float, int | None]] = {}
        measured: set[str] = set()  # arms with an interval at some budget
        arms = pref_arms({a for (a, _b, _s) in val})
        to_sac: dict[tuple[str, int], Interval] = {}
        to_plain: dict[tuple[str, int], Interval] = {}
        for arm in arms:
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
                to_sac[(arm, b)] = ratio
                measured.add(arm)
                lines.append(
                    f"| {arm} | {b} | {len(seeds)} | {fmt_interval(iqm)} | {fmt_interval(ratio)} |"
                )
                for share in SHARES:
                    if reach[arm][share] is None and ratio.lo > share:
                        reach[arm][share] = b
        paired = []
        pairs = [(a, "plain") for a in arms if a != "plain" and "@" not in a]
        pairs += [(a, a.split("@")[0]) for a in arms if "@" in a]  # a tagged arm: over its own
        beside = [("rime", "pretrain")] if {"rime", "pretrain"} <= set(arms) else []
        for arm, under in pairs + beside:
            for b in budgets:
                seeds = sorted(
                    s for (a, bb, s) in val if a == arm and bb == b and ((under, b, s) in val)
                )
                if len(seeds) < 2:
                    continue
                x = np.array([[val[(arm, b, s)]] for s in seeds])
                y = np.array([[val[(under, b, s)]] for s in seeds])
                ratio = ratio_ci(x, y, paired=True, confidence=conf)
                name = arm if under == "plain" else f"{arm} / {under}"
                if under == "plain":
                    to_plain[(arm, b)] = ratio
                v: str
                if (arm, under) in beside:  # RIME's own share (rime is pre-training + RIME)
                    v = "beside, no target (RIME's own share: rime runs pre-training too)"
                elif entry is not None and entry.target.kind == "ratio":
                    t = entry.target.value if under != "plain" else 1.0
                    v = verdict(ratio.lo, ratio.hi, t, entry.target.direction)
                elif planned:
                    v = "no target here (the entry's target is read below)"
                else:
                    v = "exploratory"
                paired.append(f"| {name} | {b} | {len(seeds)} | {fmt_interval(ratio)} | {v} |")
        if paired:
            lines += ["", "| arm / plain | labels | seeds | IQM ratio [CI] | verdict |"]
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
        for arm in pref_arms(set(PREF_ARMS) | set(arms)):
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
        if entry is not None and entry.target.kind == "frontier":
            state, text = frontier_checks(entry, env_id, to_sac, to_plain)
            frontier.setdefault(entry.id, {})[env_id] = state
            frontier_conf[entry.id] = conf
            out.append("\n" + text)
        if entry is not None and entry.target.kind == "selection":
            out.append("\n" + _selection(entry.id, env_rows, to_sac, top))
        out.append("\n" + _wall_line(env_rows))
        out.append("\n" + runs_table(env_rows))
    plan = load_plan(plan_path) if frontier else None
    for entry_id, states in frontier.items():
        assert plan is not None
        entry = plan.entry(entry_id)
        if set(states) >= set(plan.envs(entry_id)):  # every env read (envs_under_plan waits)
            text = frontier_verdict(entry, frontier_conf[entry_id], states)
            out.append(f"## `{entry_id}` · verdict\n\n{text}")
    if rows:
        out.append(wall_hours(rows))
    return "\n".join(out)


FRONTIER_FLOOR = 0.8
"""Issue #59's frontier: at the largest budget the whole ratio interval is above this ..."""
FRONTIER_LOW = 0.66
"""... and at the smallest the ratio is at least this (REED's lower figure at 50 labels)."""


ENV_STATE = {
    "met": "every check met",
    "missed": "a check missed",
    "not shown": "not every check shown",
}
"""How an env's frontier checks read, in words that are no verdict of the entry's."""


def frontier_checks(
    entry: Experiment,
    env_id: str,
    to_sac: dict[tuple[str, int], Interval],
    to_plain: dict[tuple[str, int], Interval],
) -> tuple[str, str]:
    """Issue #59's frontier checks on one env (an entry of kind ``frontier``; value v, e.g.
    0.9), for the arm under test (the entry's first) at the entry's budgets: its IQM ratio to
    SAC on the true reward is ≥ v at the largest budget with the whole interval above
    :data:`FRONTIER_FLOOR`, ≥ :data:`FRONTIER_LOW` at the smallest, and its ratio over plain has
    the whole interval above 1 at every budget. Each check is met, missed (a point estimate
    misses or an interval lies wholly below its bound) or not shown; the env's state is missed
    when one is, met when all are, not shown otherwise: (state, the report's line)."""
    arm = entry.arms[0]
    labels = entry.budget.get("labels", [])
    budgets = sorted(int(b) for b in (labels if isinstance(labels, list) else [labels]))
    checks: list[tuple[str, Interval | None, float, bool]] = []  # (what, ratio, bound, point?)
    if budgets:
        top, low = budgets[-1], budgets[0]
        v = entry.target.value
        checks.append((f"{arm}/SAC at {top} ≥ {v:g}", to_sac.get((arm, top)), v, True))
        checks.append(
            (f"{arm}/SAC at {top}, interval > {FRONTIER_FLOOR:g}", to_sac.get((arm, top)),
             FRONTIER_FLOOR, False)
        )  # fmt: skip
        if low != top:
            checks.append(
                (f"{arm}/SAC at {low} ≥ {FRONTIER_LOW:g}", to_sac.get((arm, low)), FRONTIER_LOW,
                 True)
            )  # fmt: skip
        for b in budgets:
            checks.append((f"{arm}/plain at {b}, interval > 1", to_plain.get((arm, b)), 1.0, False))
    parts, states = [], []
    for what, iv, bound, point in checks:
        if iv is None:
            parts.append(f"{what}: not measured")
            states.append("not shown")
            continue
        ok = iv.point >= bound if point else iv.lo > bound
        bad = iv.point < bound if point else iv.hi < bound
        states.append("met" if ok else "missed" if bad else "not shown")
        parts.append(f"{what}: {fmt_interval(iv)} ({states[-1]})")
    state = _combined(states)
    return state, (
        f"Checks on {env_id} ({entry.id}'s verdict, after its last env, needs every env): "
        + "; ".join(parts)
        + f"; so {ENV_STATE[state]} here."
    )


def _combined(states: Sequence[str]) -> str:
    """Missed when one is, met when all are (and there is one), not shown otherwise."""
    if "missed" in states:
        return "missed"
    return "met" if states and all(x == "met" for x in states) else "not shown"


def frontier_verdict(entry: Experiment, conf: float, states: dict[str, str]) -> str:
    """The frontier entry's one verdict from its envs' checks (:func:`frontier_checks`): met
    when every env's are, missed when one env's are, not shown otherwise."""
    v = _combined(list(states.values()))
    envs = ", ".join(f"{env} {ENV_STATE[x]}" for env, x in states.items())
    return (
        f"**Verdict ({entry.id}, {entry.looks} look(s), {conf:.1%} intervals): {v}.** "
        f"The entry is met when every env's checks are, missed when one env's are: {envs}.\n"
    )


def config_conflicts(entry: Experiment, env_rows: list[dict[str, Any]]) -> list[str]:
    """Where an entry's rows (its own and those it reuses) did not all run one configuration:
    the combo rows name different parts, or its own rows another teacher or ε than its budget
    states (``teacher``, ``teacher_epsilon``)."""
    out = []
    combos = {tuple(r.get("parts") or ()) for r in env_rows if r["arm"].split("@")[0] == "combo"}
    if len(combos) > 1:
        out.append(
            "the combo rows name different parts: " + "; ".join(" ".join(c) for c in sorted(combos))
        )
    for key in ("teacher", "teacher_epsilon"):
        if key in entry.budget:
            want = entry.budget[key]
            off = sorted(
                bpref.run_key(r, label_grid)
                for r in env_rows
                if r.get("plan") == entry.id and r.get(key) != want
            )
            if off:
                out.append(f"{', '.join(off)} ran with another {key} than {want!r}")
    return out


def _selection(
    entry_id: str, env_rows: list[dict[str, Any]], to_sac: dict[tuple[str, int], Interval], top: int
) -> str:
    """frontier-tuning-walker's pick (:mod:`preflab_bench._frontier_pick`) at the entry's
    largest budget; ``combo``'s parts are those its rows logged (one set:
    :func:`config_conflicts` holds back an entry whose combo rows name two)."""
    ratios = {a: iv.point for (a, b), iv in to_sac.items() if b == top}
    parts: dict[str, tuple[str, ...]] = {a: ARM_PARTS[a] for a in ARM_PARTS}
    for r in env_rows:
        if r.get("arm") == "combo":
            parts["combo"] = tuple(r.get("parts") or ())
    return selection_text(entry_id, ratios, parts)


def pref_arms(names: set[str]) -> list[str]:
    """The preference arms among ``names`` in :data:`PREF_ARMS`' order, each tagged arm
    (``ARM@TAG``) after its own."""
    known = [a for a in PREF_ARMS if a in names or any(n.startswith(a + "@") for n in names)]
    out: list[str] = []
    for a in known:
        if a in names:
            out.append(a)
        out += sorted(n for n in names if n.startswith(a + "@"))
    return out


def _wall_line(env_rows: list[dict[str, Any]]) -> str:
    """The wall hours of the section's own runs (not the rows it reuses), per arm."""
    entry = env_rows[0].get("plan") if env_rows else None
    own = [r for r in env_rows if r.get("plan") == entry and r.get("wall_s") is not None]
    per: dict[str, float] = {}
    for r in own:
        per[r["arm"]] = per.get(r["arm"], 0.0) + float(r["wall_s"]) / 3600
    arms = ", ".join(f"{a} {h:.2f}" for a, h in sorted(per.items()))
    return f"Wall hours of these {len(own)} runs: {sum(per.values()):.2f} ({arms}).\n"


def wall_hours(rows: list[dict[str, Any]]) -> str:
    """A table of the wall hours each plan entry's rows took (all envs; training wall time, as
    each row's ``wall_s``)."""
    per: dict[str, tuple[int, float]] = {}
    for r in rows:
        key = str(r.get("plan") or "(no plan entry)")
        n, h = per.get(key, (0, 0.0))
        per[key] = (n + 1, h + float(r.get("wall_s") or 0.0) / 3600)
    lines = ["## Wall hours per plan entry\n", "| entry | runs | wall hours |", "|---|---|---|"]
    lines += [f"| {k} | {n} | {h:.2f} |" for k, (n, h) in sorted(per.items())]
    return "\n".join(lines) + "\n"


def sections(
    rows: list[dict[str, Any]], plan_path: Path, others: list[dict[str, Any]] | None = None
) -> list[tuple[str, list[dict[str, Any]], bpref.PlanStatus]]:
    """The report's sections: per (env, plan entry) its rows, with those of the arms it reuses,
    and how it is read (:func:`preflab_bench.bpref.envs_under_plan`). An entry whose rows did not
    all run its configuration (:func:`config_conflicts`) is not read, and an entry is read once,
    as a whole: while one env's section is not read, the entry's others wait."""
    out = []
    for env_id, env_rows, status in bpref.envs_under_plan(
        rows, plan_path, others=others or [], grid=label_grid
    ):
        entry = status.entry
        conflicts = config_conflicts(entry, env_rows) if entry is not None else []
        if entry is not None and conflicts:
            status = bpref.PlanStatus(
                None,
                status.confidence,
                f"plan entry `{entry.id}`: **not read**, its rows did not all run the entry's "
                f"configuration ({'; '.join(conflicts)}): remove the rows that should not count "
                "and make the report again",
                incomplete=True,
            )
        out.append((env_id, env_rows, status))
    held = {str(r[0].get("plan")) for _e, r, st in out if st.incomplete}
    return [
        (env_id, env_rows, status)
        if status.entry is None or status.entry.id not in held
        else (
            env_id,
            env_rows,
            bpref.PlanStatus(
                None,
                status.confidence,
                f"plan entry `{status.entry.id}`: **waiting**, its runs on this env all exist but "
                "the entry is read once, as a whole, and another of its envs is not read yet "
                "(its section says why): no aggregate, ratio or verdict until then",
                incomplete=True,
            ),
        )
        for env_id, env_rows, status in out
    ]


def curve_panels(
    rows: list[dict[str, Any]], plan_path: Path, others: list[dict[str, Any]] | None = None
) -> dict[tuple[str, str], list[dict[str, Any]]]:
    """The curve's panels: per (env, plan entry) its rows, with those of the arms it reuses
    (:func:`preflab_bench.bpref.envs_under_plan`, as :func:`report` groups them), leaving out an
    entry that is incomplete: it is read once, when every run exists (the report lists its runs
    only), so no curve shows it before then either."""
    return {
        (env_id, str(env_rows[0].get("plan") or "")): env_rows
        for env_id, env_rows, status in sections(rows, plan_path, others)
        if not status.incomplete
    }


def plot_curves(panels: dict[tuple[str, str], list[dict[str, Any]]], path: Path) -> Path | None:
    """A PNG of IQM return against labels, one line per arm and one panel per (env, plan entry)
    of ``panels`` (:func:`curve_panels`), SAC on the true reward as a dashed line (its IQM);
    None when no panel has a row with a label budget."""
    from matplotlib.figure import Figure

    drawn = [
        (key, [r for r in prows if r.get("return") is not None])
        for key, prows in panels.items()
        if any(int(r.get("label_budget", 0)) > 0 for r in prows)
    ]
    if not drawn:
        return None
    fig = Figure(figsize=(6.0, 3.6 * len(drawn)))
    for i, ((env_id, entry), grows) in enumerate(drawn):
        ax = fig.add_subplot(len(panels), 1, i + 1)
        names = {r["arm"] for r in grows}
        for arm in pref_arms(names):
            pts: dict[int, list[float]] = {}
            for r in grows:
                if r["arm"] == arm:
                    pts.setdefault(int(r["label_budget"]), []).append(float(r["return"]))
            xs = sorted(pts)
            ys = [iqm_ci({arm: np.array([[v] for v in pts[b]])})[arm].iqm.point for b in xs]
            ax.plot(xs, ys, marker="o", label=arm)
        sac = [float(r["return"]) for r in grows if r["arm"] == "sac_true_reward"]
        if sac:
            ref = iqm_ci({"sac": np.array([[v] for v in sac])})["sac"].iqm.point
            ax.axhline(ref, linestyle="--", color="k", label="SAC, true reward")
        ax.set_xscale("log")
        ax.set_xlabel("labels")
        ax.set_ylabel("IQM return")
        ax.set_title(f"{env_id} · {entry or 'no plan entry'}", fontsize=9)
        ax.legend(fontsize=7)
    fig.tight_layout()
    fig.savefig(path, dpi=100)
    return path


def runs_table(env_rows: list[dict[str, Any]], *, results: bool = True) -> str:
    """A label-grid section's runs (efficiency's, routing's), one per row; without ``results``
    (an entry not read yet) no return: which runs exist, not what they gave."""
    head = ["arm", "labels", "seed", *(["return"] if results else []), "steps", "wall (s)"]
    lines = ["| " + " | ".join([*head, "command"]) + " |", "|---" * (len(head) + 1) + "|"]
    for r in sorted(env_rows, key=lambda r: (r["arm"], r.get("label_budget", 0), r["seed"])):
        ret = r.get("return")
        got = [("no return (failed)" if ret is None else f"{float(ret):.4g}")] if results else []
        wall = "" if r.get("wall_s") is None else f"{r['wall_s']:.0f}"
        cells = [r["arm"], r.get("label_budget", 0), r["seed"], *got, r["steps"], wall]
        lines.append("| " + " | ".join(map(str, cells)) + f" | `{r['command']}` |")
    return "\n".join(lines) + "\n"


def parser() -> argparse.ArgumentParser:
    """``preflab bench efficiency``'s options."""
    ap = argparse.ArgumentParser(
        prog="preflab bench efficiency", description=__doc__.split("\n\n")[0]
    )
    ap.add_argument(
        "--envs", nargs="+", default=["dm_control/walker-walk-v0"], choices=list(bpref.PRESETS)
    )
    ap.add_argument("--seeds", type=int, nargs="+", default=[20])
    ap.add_argument(
        "--arms",
        nargs="+",
        choices=ARMS,
        default=[a for a in ARMS if a != "combo"],
        help="default: every arm but combo (whose parts --combo names)",
    )
    ap.add_argument("--labels", type=int, nargs="+", default=[25, 50, 100, 200, 500, 1000])
    bpref.add_budget_args(ap)
    ap.add_argument(
        "--combo",
        nargs="+",
        choices=PARTS,
        default=[],
        help="the parts of arm 'combo' (e.g. --combo pretrain surf qpa rime rune)",
    )
    ap.add_argument(
        "--stop-accuracy",
        type=float,
        default=None,
        help="B-Pref's fit stop on every preference arm (B-Pref: 0.97; default: the preset's)",
    )
    ap.add_argument(
        "--teacher-epsilon",
        type=float,
        default=None,
        help="the teacher's ε, e.g. 0.3 with --teacher bpref-mistake (default: the teacher's)",
    )
    ap.add_argument(
        "--arm-tag", default=None, help="log every preference arm as ARM@TAG (another teacher)"
    )
    # SURF's authors' walker settings (the surf/walker_walk preset's values; #59). Before #59:
    # --surf-ratio 1 --surf-threshold 0.95 --surf-epochs 0 (SURF's code defaults).
    ap.add_argument("--surf-ratio", type=int, default=4, help="SURF's μ (walker: 4)")
    ap.add_argument("--surf-threshold", type=float, default=0.99, help="SURF's τ (walker: 0.99)")
    ap.add_argument("--surf-weight", type=float, default=1.0, help="SURF's λ")
    ap.add_argument("--surf-crop", type=int, default=5, help="SURF's crop range")
    ap.add_argument(
        "--surf-epochs",
        type=int,
        default=1000,
        help="reward-fit epochs with SURF (its reward_update 1,000; 0: the preset's)",
    )
    ap.add_argument("--qpa-episodes", type=int, default=10, help="QPA's N (queries and replay)")
    ap.add_argument("--qpa-recent-ratio", type=float, default=0.5, help="QPA's ω (her_ratio)")
    ap.add_argument("--qpa-copies", type=int, default=20, help="QPA's τ (data_aug_ratio)")
    ap.add_argument(
        "--rime-warm-start-steps",
        type=int,
        default=None,
        help="RIME's warm start: minibatch steps on the pre-training's reward (default: 5 per "
        "pre-training step, the authors' 5 minibatches per step: 45,000 at --unsup-steps 9000)",
    )
    ap.add_argument(
        "--reed-steps",
        type=int,
        default=1000,
        help="REED: pre-training minibatch steps before every fit (the authors: 20 epochs over "
        "the replay buffer)",
    )
    ap.add_argument("--reed-batch", type=int, default=128, help="REED: transitions per step")
    ap.add_argument("--reed-lr", type=float, default=1e-3, help="REED's learning rate (1e-3)")
    ap.add_argument(
        "--reed-optimizer", choices=("sgd", "adam"), default="sgd", help="REED's optimiser (SGD)"
    )
    ap.add_argument("--reed-temperature", type=float, default=0.5, help="REED's NT-Xent τ (0.5)")
    ap.add_argument(
        "--reed-projection",
        type=int,
        default=20,
        help="REED's projection width (20 on walker_walk, 17 on cheetah_run)",
    )
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
    return ap


def main(argv: list[str] | None = None) -> int:
    ap = parser()
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

    for arm in [] if args.report else args.arms:  # a bad --combo stops before any run
        if arm != "sac_true_reward":
            arm_parts(args, arm)
    rc = log_and_report(
        args,
        bench="efficiency",
        title="Label efficiency: PrefLab's additions against SAC on the true reward",
        budgets="per row (steps, labels, nets and batch as in each row's command)",
        runs=runs,
        report=lambda rows, plan_path: report(rows, plan_path, others),
    )
    found = read_jsonl(args.jsonl) if args.jsonl.exists() else []
    plot_curves(
        curve_panels([r for r in found if r.get("bench") == "efficiency"], args.plan_file, others),
        args.out.with_name(args.out.stem + "_curve.png"),
    )
    return rc
