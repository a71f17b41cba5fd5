"""B-Pref (Lee et al. 2021): PrefLab's PEBBLE against SAC on the true reward at equal env steps,
on DeepMind Control and Meta-World, reported under the protocol (IQM, stratified bootstrap).

Arms, side by side in one invocation per seed:

- ``pebble``: ``preflab train`` from the env's B-Pref preset (``bpref/<task>-pebble``: random
  seed steps, unsupervised pre-training, disagreement queries, replay relabelling) with the
  teacher, label budget and env steps given here;
- ``sac_true_reward``: the same SAC (same library, nets, batch and learning rate) on the env's
  own reward, after the same random seed steps, for the same env steps.

Both are evaluated on 10 deterministic episodes (seeds 10,000 + seed + k) by return and, on
Meta-World, success rate. Each run appends a row (its command and ``--plan`` entry included)
to ``bpref_runs.jsonl``; ``--report`` rebuilds ``bpref.md`` from it. A row whose plan entry is
missing, or whose seed is not an evaluation seed of the entry, is exploratory: it is shown and
carries no verdict. A PEBBLE run stopped before its end (Ctrl-C, ``timeout -s INT``, a lost
machine) continues exactly from its last checkpoint when the same command is run again, so a
long run can be split into invocations of at most an hour; so does a SAC run (checkpointed every
5,000 env steps, :mod:`preflab_bench._resumable_learn`). The verdict is the entry's target
(IQM(pebble) / IQM(sac_true_reward), paired by seed) at the confidence corrected for the
entry's looks.

B-Pref's SAC (two 1,024-wide layers, batch 1,024) runs 1.7–3.3 steps/s on this 2-core machine,
so the nets and batch are arguments here (default SB3's 256 × 256, batch 256: 56–80 steps/s),
stated in every row and in the report.
"""

from __future__ import annotations

import argparse
import dataclasses
import json
import logging
import math
from collections import defaultdict
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np

from preflab.aggregate import Aggregator
from preflab.config import TrainConfig
from preflab.config.file import load_config
from preflab.envs import make_vec_env
from preflab.errors import ConfigError
from preflab.policy.agents import make_agent
from preflab.policy.evaluate import evaluate_episodes
from preflab.presets import preset_path
from preflab.runs import resume, train
from preflab.runstate.checkpointer import Checkpointer
from preflab.sources.base import FeedbackSource
from preflab.sources.teacher import bpref_teacher
from preflab_bench._plan import Experiment, Plan, add_plan_options, check_row, load_plan
from preflab_bench._protocol import (
    corrected_confidence,
    difference_ci,
    fmt_interval,
    iqm_ci,
    markdown_table,
    ratio_ci,
)
from preflab_bench._report import RESULTS, in_log, log_and_report, log_row
from preflab_bench._resumable_learn import learn_resumably

log = logging.getLogger(__name__)

ARMS = ("pebble", "sac_true_reward")
PRESETS = {
    "dm_control/walker-walk-v0": "bpref/walker_walk-pebble",
    "dm_control/cheetah-run-v0": "bpref/cheetah_run-pebble",
    "dm_control/quadruped-walk-v0": "bpref/quadruped_walk-pebble",
    "metaworld/button-press-v3": "bpref/button_press-pebble",
}
"""Env → its B-Pref PEBBLE preset."""


SBX_LACKS = ("target_update_interval",)
"""B-Pref preset arguments SBX's SAC does not have: it updates its target critics every
gradient step (B-Pref: every 2), so the sbx backend runs without them."""


def _agent_kwargs(args: argparse.Namespace, preset: TrainConfig) -> dict[str, Any]:
    kw = json.loads(preset.agent_kwargs)
    kw["batch_size"] = args.batch_size
    if args.backend == "sbx":
        kw = {k: v for k, v in kw.items() if k not in SBX_LACKS}
    return kw


def pebble_config(args: argparse.Namespace, env_id: str, seed: int) -> TrainConfig:
    """The env's B-Pref preset at this benchmark's budget, nets and teacher, without B-Pref's
    updates after the critic reset (``reset_updates`` 0): every entry of this bench and of those
    built on it (efficiency, routing) was registered and run without them, and an arm without
    pre-training has no reset for them to follow."""
    base = load_config(preset_path(PRESETS[env_id]))
    return dataclasses.replace(
        base,
        reset_updates=0,
        seed=seed,
        total_steps=args.steps,
        total_labels=args.labels,
        initial_steps=args.initial_steps,
        unsup_steps=args.unsup_steps,
        steps_per_round=args.steps_per_round,
        net_arch=tuple(args.net_arch),
        agent_kwargs=json.dumps(_agent_kwargs(args, base)),
        eval_episodes=args.eval_episodes,
        teacher=bpref_teacher(args.teacher),
        torch_threads=args.threads,
        backend=args.backend,
    )


def run_pebble(
    args: argparse.Namespace, env_id: str, seed: int, *, row_missing: bool = False
) -> dict[str, Any]:
    cfg = pebble_config(args, env_id, seed)
    run_dir = args.run_root / f"{env_id.replace('/', '_')}-pebble-s{seed}"
    return train_row(cfg, run_dir, row_missing=row_missing)


def train_row(
    cfg: TrainConfig,
    run_dir: Path,
    *,
    source: FeedbackSource | None = None,
    aggregator: Aggregator | None = None,
    row_missing: bool = False,
) -> dict[str, Any]:
    """Train ``cfg`` into ``run_dir``, or continue the run stopped there (Ctrl-C, a time limit,
    a lost machine) from its last checkpoint, exactly; the run-log fields of its result
    (``wall_s``: the run's training wall time over all its invocations). ``source`` and
    ``aggregator`` replace the config's own, fresh in every invocation (their state comes back
    from the checkpoint).

    A finished run is not run again. When ``row_missing`` (the run log has no row of it: its
    process ended after the run's summary.json, before its row was appended), its fields are
    read back from summary.json, and ``source``'s state from the run's last checkpoint;
    otherwise it is refused."""
    if (run_dir / "summary.json").is_file():
        if not row_missing:
            raise ConfigError(_finished(run_dir))
        if source is not None:  # its own numbers (a crowd's label errors) as the run ended
            source.load_state(Checkpointer(run_dir).load().state["source"])
        log.warning(
            "%s finished before its row was written: row rebuilt from summary.json", run_dir
        )
        return _row_fields(json.loads((run_dir / "summary.json").read_text()))
    if (run_dir / "config.json").is_file():  # refuses a run configured otherwise
        result = resume(run_dir, config=cfg, source=source, aggregator=aggregator)
    else:
        result = train(cfg, run_dir=run_dir, source=source, aggregator=aggregator)
    return _row_fields(result.summary())


def _row_fields(summary: dict[str, Any]) -> dict[str, Any]:
    """A run's run-log fields from its summary (a RunResult's, or summary.json's)."""
    return {
        "return": summary["true_return"],
        "return_std": summary["true_return_std"],
        "success_rate": summary["success_rate"],
        "labels": summary["n_labels"],
        "steps": summary["env_steps"],
        "wall_s": summary["wall_s"],
        "reward_corr": summary["reward_corr"],
        # how the teacher answered (None in a summary written before they were counted)
        "equal": summary.get("n_equal"),
        "skipped": summary.get("n_skipped"),
    }


def _finished(run_dir: Path) -> str:
    return (
        f"{run_dir} holds a finished run (its row is in the run log already); to run it "
        "again, remove that directory or pass another --run-root"
    )


def run_sac(
    args: argparse.Namespace, env_id: str, seed: int, *, row_missing: bool = False
) -> dict[str, Any]:
    """SAC on the env's own reward, checkpointed every few thousand steps in its run directory
    under ``--run-root``: a stopped run continues exactly with the same command. A finished run
    is refused, or with ``row_missing`` its fields are read back from its done.json."""
    import torch

    torch.set_num_threads(args.threads)
    run_dir = args.run_root / f"{env_id.replace('/', '_')}-sac_true_reward-s{seed}"
    if (run_dir / "done.json").is_file():
        if not row_missing:
            raise ConfigError(_finished(run_dir))
        log.warning("%s finished before its row was written: row rebuilt from done.json", run_dir)
        done: dict[str, Any] = json.loads((run_dir / "done.json").read_text())
        return done
    preset = load_config(preset_path(PRESETS[env_id]))
    kw = _agent_kwargs(args, preset) | {"learning_starts": args.initial_steps}
    venv = make_vec_env(env_id, 1, seed=seed)
    net = list(args.net_arch)
    agent = make_agent("sac", venv, seed=seed, net_arch=net, backend=args.backend, **kw)
    wall = learn_resumably(agent, venv, run_dir, args.steps)
    e = evaluate_episodes(agent, env_id, n_episodes=args.eval_episodes, seed=10_000 + seed)
    res = {
        "return": e.mean,
        "return_std": e.std,
        "success_rate": e.success_rate,
        "labels": 0,
        "steps": int(agent.num_timesteps),
        "wall_s": wall,
    }
    (run_dir / "done.json").write_text(json.dumps(res))
    return res


def _row(
    args: argparse.Namespace, env_id: str, arm: str, seed: int, res: dict[str, Any]
) -> dict[str, Any]:
    return log_row(
        "bpref",
        args,
        env_id,
        arm,
        seed,
        teacher=args.teacher,
        net_arch=list(args.net_arch),
        batch_size=args.batch_size,
        backend=args.backend,
        unsup_steps=args.unsup_steps if arm == "pebble" else 0,
        **res,
    )


def _fmt(v: Any) -> str:
    return "—" if v is None else f"{float(v):.4g}"


def _metric(env_id: str) -> str:
    return "success_rate" if env_id.startswith("metaworld/") else "return"


def report(rows: list[dict[str, Any]], plan_path: Path) -> str:
    """The markdown report of ``rows`` (see the module docstring)."""
    out = []
    for env_id, env_rows, status in envs_under_plan(rows, plan_path):
        entry, conf = status.entry, status.confidence
        metric = _metric(env_id)
        out.append(f"## {section_title(env_id, env_rows)} ({metric})\n")
        first = env_rows[0]
        out.append(
            f"Nets {first['net_arch']}, batch {first['batch_size']}, learner "
            f"{first.get('backend', 'sb3')}'s SAC, teacher {first['teacher']}, "
            f"steps per run {sorted({r['steps'] for r in env_rows})}, labels (pebble) "
            f"{sorted({r['labels'] for r in env_rows if r['arm'] == 'pebble'})}.\n"
        )
        out.append(status.line + "\n")
        seeds = sorted(
            {r["seed"] for r in env_rows if r["arm"] == ARMS[0]}
            & {r["seed"] for r in env_rows if r["arm"] == ARMS[1]}
        )
        if not seeds and not status.incomplete:
            out.append("No seed has both arms yet.\n")
            continue
        if status.incomplete:  # read once, when every run exists: no result before then
            out.append(_runs_table(env_rows, metric, results=False))
            continue
        val: dict[tuple[str, int], float] = {
            (r["arm"], r["seed"]): float(r[metric]) for r in env_rows if r.get(metric) is not None
        }
        if any((a, s) not in val for a in ARMS for s in seeds):
            out.append(f"Some runs have no {metric}.\n")
            continue
        scores = {a: np.array([[val[(a, s)]] for s in seeds]) for a in ARMS}
        out.append(markdown_table(iqm_ci(scores, confidence=conf)) + "\n")
        ratio = ratio_ci(scores[ARMS[0]], scores[ARMS[1]], paired=True, confidence=conf)
        iv = (ratio.lo, ratio.hi)
        line = f"IQM pebble / IQM sac_true_reward (paired by seed, {len(seeds)} seeds): {fmt_interval(ratio)}"
        undefined = math.isnan(ratio.lo) or math.isnan(ratio.hi)
        if undefined:  # a success rate of 0: IQM(sac_true_reward) is 0 in some bootstrap samples
            line += (
                "; the ratio is undefined: IQM(sac_true_reward) is 0 in some bootstrap samples, "
                "where the ratio is 0/0 or x/0"
            )
        if entry is not None:  # an undefined ratio cannot clear the target: not shown
            line += entry.verdict_clause(*((-math.inf, math.inf) if undefined else iv))
        out.append(line + "\n")
        if metric == "success_rate":  # beside the ratio, which a success rate of 0 undoes
            diff = difference_ci(scores[ARMS[0]], scores[ARMS[1]], paired=True, confidence=conf)
            out.append(
                f"IQM pebble − IQM sac_true_reward (paired by seed, no target): "
                f"{fmt_interval(diff)}\n"
            )
        out.append(_runs_table(env_rows, metric))
    return "\n".join(out)


def _runs_table(env_rows: list[dict[str, Any]], metric: str, *, results: bool = True) -> str:
    """The section's runs; without ``results`` (an entry not read yet) neither the metric nor
    the teacher's answers: which runs exist, not what they gave."""
    head = ["arm", "seed", *([metric] if results else []), "steps", "labels"]
    head += [*(["equal / skipped"] if results else []), "wall (s)", "command"]
    lines = ["| " + " | ".join(head) + " |", "|---" * len(head) + "|"]
    for r in sorted(env_rows, key=lambda r: (r["arm"], r["seed"])):
        got = [_fmt(r.get(metric))] if results else []
        answers = [_answers(r)] if results else []
        cells = [r["arm"], r["seed"], *got, r["steps"], r["labels"], *answers]
        lines.append(
            "| " + " | ".join(map(str, cells)) + f" | {r['wall_s']:.0f} | `{r['command']}` |"
        )
    return "\n".join(lines) + "\n"


def _answers(row: dict[str, Any]) -> str:
    """How a PEBBLE run's teacher answered: equally preferable / no answer; "—" for SAC on the
    true reward (no teacher) and for a row logged before the counts were recorded."""
    if row.get("equal") is None or row.get("skipped") is None:
        return "—"
    return f"{row['equal']} / {row['skipped']}"


def add_budget_args(ap: argparse.ArgumentParser) -> None:
    """The plan and budget options B-Pref-style benches share (env steps, teacher, random and
    pre-training steps, nets, batch, threads, evaluation episodes)."""
    add_plan_options(ap)
    ap.add_argument("--steps", type=int, default=100_000)
    ap.add_argument("--teacher", default="bpref-oracle")
    ap.add_argument("--initial-steps", type=int, default=1000)
    ap.add_argument("--unsup-steps", type=int, default=9000)
    ap.add_argument("--steps-per-round", type=int, default=5000)
    ap.add_argument("--net-arch", type=int, nargs="+", default=[256, 256])
    ap.add_argument("--batch-size", type=int, default=256)
    ap.add_argument("--threads", type=int, default=2, help="torch threads of each run")
    ap.add_argument(
        "--backend",
        choices=("sb3", "sbx"),
        default="sb3",
        help="library of every arm's SAC: Stable-Baselines3 (torch) or SBX (JAX, the fast extra)",
    )
    ap.add_argument("--eval-episodes", type=int, default=10)


@dataclass(frozen=True)
class PlanStatus:
    """How a report reads one env's rows of one plan entry (:func:`plan_status`)."""

    entry: Experiment | None
    """The entry whose target gives the verdict; None: no verdict (exploratory rows, or an
    entry with planned runs missing)."""
    confidence: float
    """The interval's confidence, corrected for the entry's looks."""
    line: str
    """The report's status line."""
    incomplete: bool = False
    """Planned runs are missing: the report lists the runs only (no aggregate, ratio or
    verdict)."""


LabelGrid = Callable[[str, Plan, str], Sequence[int]]
"""(arm, plan, entry id) → the label budgets the entry runs that arm at, for a bench whose rows
carry ``label_budget`` (a grid of budgets per arm, as ``preflab bench efficiency``)."""


def missing_runs(
    env_rows: list[dict[str, Any]],
    plan: Plan,
    entry_id: str,
    env_id: str,
    grid: LabelGrid | None = None,
) -> list[str]:
    """The planned runs (every arm of the entry at every evaluation seed of its chain, and with
    ``grid`` at every label budget of the arm) that ``env_rows`` do not hold yet, as 'arm seed'
    (with ``grid``: 'arm@budget seed')."""
    seeds = plan.seeds(entry_id, env_id)
    arms = plan.entry(entry_id).arms
    made = [r for r in env_rows if not failed(r)]
    if grid is None:
        have = {(r["arm"], r["seed"]) for r in made}
        return [f"{arm} {seed}" for arm in arms for seed in seeds if (arm, seed) not in have]
    got = {(r["arm"], int(r.get("label_budget", 0)), r["seed"]) for r in made}
    return [
        f"{arm}@{budget} {seed}"
        for arm in arms
        for budget in grid(arm, plan, entry_id)
        for seed in seeds
        if (arm, budget, seed) not in got
    ]


def failed(row: dict[str, Any]) -> bool:
    """A row whose run gave no return (``"return": null``): it is not a run made, so its entry
    waits for it to be run again."""
    return "return" in row and row["return"] is None


def run_key(row: dict[str, Any], grid: LabelGrid | None) -> str:
    """A run as :func:`missing_runs` names it: 'arm seed' (with ``grid``: 'arm@budget seed')."""
    if grid is None:
        return f"{row['arm']} {row['seed']}"
    return f"{row['arm']}@{int(row.get('label_budget', 0))} {row['seed']}"


def twice_logged(rows: list[dict[str, Any]], grid: LabelGrid | None) -> list[str]:
    """The runs that two or more of ``rows`` (one env's) claim, by :func:`run_key`."""
    seen: dict[str, int] = defaultdict(int)
    for r in rows:
        seen[run_key(r, grid)] += 1
    return sorted(k for k, n in seen.items() if n > 1)


def off_grid(rows: list[dict[str, Any]], plan: Plan, grid: LabelGrid | None) -> list[str]:
    """Rows at a label budget their entry does not run their arm at (:data:`LabelGrid`)."""
    if grid is None:
        return []
    return sorted(
        run_key(r, grid)
        for r in rows
        if int(r.get("label_budget", 0)) not in grid(r["arm"], plan, str(r.get("plan")))
    )


def entry_waits(
    rows: Sequence[dict[str, Any]],
    plan: Plan,
    entry_id: str,
    env_id: str,
    grid: LabelGrid | None = None,
) -> list[str]:
    """What else one env's reading of ``entry_id`` waits for, though its own runs all exist:
    the entry's runs on its other envs (an entry is read once, as a whole), and every run of the
    entries it reuses runs from (reading a reused row before its own entry is complete would be
    an early look at that entry). ``rows``: every row of the run logs."""

    def gaps(entry: str, skip: str | None) -> int:
        # another bench's entry has no label grid (B-Pref's rows carry no label budget)
        on_grid = grid if plan.entry(entry).bench == plan.entry(entry_id).bench else None
        n = 0
        for env in plan.envs(entry) or (None,):
            if env is not None and env == skip:
                continue
            own = [r for r in rows if r.get("plan") == entry and (env is None or r["env"] == env)]
            shared = [] if env is None else reused_rows(list(rows), plan, entry, env)
            n += len(missing_runs(own + shared, plan, entry, env or env_id, on_grid))
        return n

    waits = []
    if n := gaps(entry_id, env_id):
        waits.append(f"its runs on its other envs ({n} missing)")
    for source in sorted(set(plan.entry(entry_id).reuse.values())):
        if n := gaps(source, None):
            waits.append(f"`{source}`, whose runs it reuses ({n} of them missing)")
    return waits


def reused_rows(
    rows: list[dict[str, Any]], plan: Plan, entry_id: str, env_id: str
) -> list[dict[str, Any]]:
    """The rows another entry gives ``entry_id`` for the arms it reuses (its ``reuse``), at its
    evaluation seeds on ``env_id``."""
    seeds = set(plan.seeds(entry_id, env_id))
    return [
        r
        for arm, source in plan.entry(entry_id).reuse.items()
        for r in rows
        if r.get("plan") == source and r["env"] == env_id and r["arm"] == arm
        and r["seed"] in seeds
    ]  # fmt: skip


def plan_status(
    env_rows: list[dict[str, Any]],
    plan: Plan | None,
    env_id: str,
    reused: list[dict[str, Any]] | None = None,
    grid: LabelGrid | None = None,
) -> PlanStatus:
    """(the plan entry every row belongs to or None, the looks-corrected confidence, the
    report's status line) for one env's rows: rows outside one entry are exploratory. An entry
    is read once, when every planned run exists: before that the status says what is missing
    and is ``incomplete``, so that no aggregate, ratio or verdict is shown (an interim look
    would be a look the plan did not count). ``reused``: the rows of the arms the entry takes
    from another entry (:func:`reused_rows`); they count as present, not as its own rows.
    ``grid``: the label budgets per arm, for a bench that runs several (:func:`missing_runs`)."""
    checks = [check_row(r, plan) if plan else None for r in env_rows]
    entries = {c.entry for c in checks if c is not None and c.status == "planned"}
    planned = (
        plan is not None
        and len(entries) == 1
        and all(c is not None and c.status == "planned" for c in checks)
    )
    if planned and plan is not None:
        entry_id = entries.pop()
        assert entry_id is not None
        looks = plan.looks(entry_id, env_id)
        conf = corrected_confidence(0.95, looks)
        missing = missing_runs(env_rows + (reused or []), plan, entry_id, env_id, grid)
        shared = "".join(
            f"; its {arm} runs are those of `{source}`"
            for arm, source in plan.entry(entry_id).reuse.items()
        )
        twice = twice_logged(env_rows + (reused or []), grid)
        stray = off_grid(env_rows, plan, grid)
        if twice or stray:
            what = [f"two or more rows for {', '.join(twice)}"] if twice else []
            what += (
                [f"rows at budgets the entry does not run ({', '.join(stray)})"] if stray else []
            )
            return PlanStatus(
                None,
                conf,
                f"plan entry `{entry_id}`: **not read**, the run log holds {'; '.join(what)}. "
                "An entry is read from one row per planned run: remove the rows that should not "
                "count (each records its command) and make the report again",
                incomplete=True,
            )
        if missing:
            planned_runs = len(missing_runs([], plan, entry_id, env_id, grid))
            return PlanStatus(
                None,
                conf,
                f"plan entry `{entry_id}`: **incomplete**, {planned_runs - len(missing)} of "
                f"{planned_runs} planned runs (missing: {', '.join(missing)}); the entry is "
                f"read once, when every run exists: no aggregate, ratio or verdict until then{shared}",
                incomplete=True,
            )
        return PlanStatus(
            plan.entry(entry_id),
            conf,
            f"plan entry `{entry_id}`, {looks} look(s): intervals at {conf:.2%}{shared}",
        )
    reasons = sorted({x for c in checks if c is not None for x in c.reasons})
    return PlanStatus(
        None, 0.95, "**exploratory** (no verdict): " + ("; ".join(reasons) or "no plan file")
    )


def envs_under_plan(
    rows: list[dict[str, Any]],
    plan_path: Path,
    *,
    others: Sequence[dict[str, Any]] = (),
    grid: LabelGrid | None = None,
) -> Iterator[tuple[str, list[dict[str, Any]], PlanStatus]]:
    """Per env and plan entry the rows name (in the rows' order): (env, those rows,
    :func:`plan_status` of them), with the rows of the arms the entry reuses from another,
    found in ``rows`` or in ``others`` (another bench's run log, for an arm that is the same run
    there: :data:`preflab_bench._plan.SHARED_RUNS`). Experiments on one env (a pilot, another
    teacher or budget) are reported apart, and rows that name no entry never join a planned
    entry's verdict. ``grid``: label budgets per arm (:func:`missing_runs`)."""
    plan = load_plan(plan_path) if plan_path.exists() else None
    groups: dict[tuple[str, str], list[dict[str, Any]]] = defaultdict(list)
    for r in rows:
        groups[(r["env"], str(r.get("plan") or ""))].append(r)
    for (env_id, entry_id), env_rows in groups.items():
        planned = plan is not None and entry_id in plan.ids()
        shared = reused_rows([*rows, *others], plan, entry_id, env_id) if plan and planned else []
        status = plan_status(env_rows, plan, env_id, shared, grid)
        if status.entry is not None and plan is not None:
            waits = entry_waits([*rows, *others], plan, entry_id, env_id, grid)
            if waits:
                status = PlanStatus(
                    None,
                    status.confidence,
                    f"plan entry `{entry_id}`: **waiting**, its runs on this env all exist but "
                    f"the entry is read once, as a whole, and waits for {' and '.join(waits)}: "
                    "no aggregate, ratio or verdict until then",
                    incomplete=True,
                )
        yield env_id, env_rows + shared, status


def section_title(env_id: str, env_rows: list[dict[str, Any]]) -> str:
    """A report section's heading: the env and the plan entry its rows name."""
    entry = env_rows[0].get("plan")
    return f"{env_id} · " + (f"plan entry `{entry}`" if entry else "no plan entry")


def returns_by_cell(
    env_rows: list[dict[str, Any]],
) -> tuple[dict[tuple[str, int, int], float], set[int], list[int]]:
    """An env's returns keyed by (arm, label budget, seed), the seeds SAC on the true reward ran,
    and the label budgets of the preference arms (the label-grid reports' common start)."""
    val = {
        (r["arm"], int(r.get("label_budget", 0)), r["seed"]): float(r["return"])
        for r in env_rows
        if r.get("return") is not None
    }
    true_seeds = {s for (a, _b, s) in val if a == "sac_true_reward"}
    budgets = sorted({b for (a, b, _s) in val if a != "sac_true_reward"})
    return val, true_seeds, budgets


def parser() -> argparse.ArgumentParser:
    """``preflab bench bpref``'s options."""
    ap = argparse.ArgumentParser(prog="preflab bench bpref", description=__doc__.split("\n\n")[0])
    ap.add_argument(
        "--envs", nargs="+", default=["dm_control/walker-walk-v0"], choices=list(PRESETS)
    )
    ap.add_argument("--seeds", type=int, nargs="+", default=[10])
    ap.add_argument("--arms", nargs="+", choices=ARMS, default=list(ARMS))
    ap.add_argument("--labels", type=int, default=1000)
    add_budget_args(ap)
    ap.add_argument("--run-root", type=Path, default=Path("runs") / "bpref")
    ap.add_argument("--jsonl", type=Path, default=RESULTS / "bpref_runs.jsonl")
    ap.add_argument("--out", type=Path, default=RESULTS / "bpref.md")
    ap.add_argument("--report", action="store_true", help="rebuild --out from --jsonl, no runs")
    return ap


def main(argv: list[str] | None = None) -> int:
    args = parser().parse_args(argv)
    args.argv = argv

    def runs() -> Iterator[dict[str, Any]]:
        for seed in args.seeds:
            for env_id in args.envs:
                for arm in args.arms:
                    missing = not in_log(args, "bpref", env_id, arm, seed)
                    run = run_pebble if arm == "pebble" else run_sac
                    res = run(args, env_id, seed, row_missing=missing)
                    yield _row(args, env_id, arm, seed, res)

    return log_and_report(
        args,
        bench="bpref",
        title="B-Pref: PrefLab's PEBBLE vs SAC on the true reward",
        budgets="per row (steps, labels, nets and batch are stated per env below)",
        runs=runs,
        report=report,
    )
