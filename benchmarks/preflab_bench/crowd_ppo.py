"""Crowd-PrefPPO (paper 003, Fig. 3): PPO from a crowd's preferences aggregated by SML or by
majority, against the oracle teacher, reported under the protocol (IQM, stratified bootstrap).

Arms (any subset per invocation; every run appends a row, with its command and ``--plan``
entry, to ``crowd_ppo_runs.jsonl``, and ``--report`` rebuilds ``crowd_ppo.md`` from it):

- ``sml`` / ``majority``: a crowd of ``--users`` simulated users (stochastic preference model,
  Crowd-PrefRL's ranges γ ∈ [0.98, 1], β ∈ [0.1, 10], ε ∈ [0, 0.2]) answers every query of the
  core loop (``preflab.runs.train``) through ``CrowdSource``; the labels come from
  ``SMLAggregator`` or ``MajorityAggregator``.
- ``oracle``: the loop's perfect synthetic teacher.

Every arm of a seed gets the same budget and the same crowd: Fig. 3a's choice, among
``--candidates`` random crowds the one where SML is expected to beat majority most, screened on
pairs of random-policy segments (``--screen-steps`` env steps of them; not the run's own
queries; seeded by the run seed). On
walker_walk the runs use B-Pref's PrefPPO preset (``bpref/walker_walk-prefppo``, as Crowd-PrefRL
ran it) at this bench's env steps and labels; other envs a small PPO set-up. Returns are those
of 10 deterministic evaluation episodes at the end; the label error of the aggregated labels
against the oracle's is recorded per feedback round (Fig. 3's bottom row).

The report gives per env the IQM return of each arm with its interval and the paired ratios
IQM(sml) / IQM(majority) and IQM(sml) / IQM(oracle), at the confidence corrected for the plan
entry's looks; a row outside the entry's evaluation seeds is exploratory. Beside them, for the
runs the run log holds (finished runs only; never a directory without its row), each arm's
training curve read back from its run directory's ``metrics.csv``: the IQM across seeds of
``train_true_return`` (the mean true return of the last 10 training episodes at each round)
against env steps with its stratified bootstrap band, and the IQM label error per feedback
round, drawn into ``<out>_curves.png``, with a table of the IQM return at 25/50/75/100 % of the
steps. A run directory that is missing is named in the report.
"""

from __future__ import annotations

import argparse
import dataclasses
import json
import logging
import math
import shlex
from collections.abc import Iterator, Mapping, Sequence
from pathlib import Path
from typing import Any

import numpy as np
import torch

from preflab.aggregate import CrowdAggregator, Feedback, majority, sml
from preflab.config import TrainConfig
from preflab.config.file import load_config
from preflab.crowd import (
    CrowdConfig,
    CrowdSource,
    answer_pairs,
    error_rates,
    sample_users,
    truth_labels,
)
from preflab.presets import preset_path
from preflab.records import Label, Query, Segment
from preflab_bench._crowd_common import random_pairs, segment_pool
from preflab_bench._plan import add_plan_options
from preflab_bench._protocol import fmt_interval, iqm_ci, markdown_table, ratio_ci
from preflab_bench._report import RESULTS, in_log, log_and_report, log_row
from preflab_bench._run_curves import Curve, Panel, at_fractions, iqm_curve, plot, read_column
from preflab_bench.bpref import PlanStatus, envs_under_plan, section_title, train_row

log = logging.getLogger(__name__)


class ScoredCrowd(CrowdSource):
    """A CrowdSource that remembers the oracle answer of every pair it was asked and the error
    of each round's aggregated labels (for scoring); its state carries both, so a run stopped
    and continued reports the errors of all its rounds."""

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self.truth: dict[tuple[str, str], float] = {}
        self.errors: list[float] = []
        """The error of each round's aggregated labels against the oracle answers."""
        self.user_errors = np.zeros(0)
        """Each user's error rate on the latest round's votes."""

    def submit(self, queries: Sequence[Query], segments: Mapping[str, Segment]) -> None:
        for q in queries:
            ra, rb = segments[q.a[0]].true_return, segments[q.b[0]].true_return
            self.truth[(q.a[0], q.b[0])] = 1.0 if ra > rb else 0.0 if rb > ra else 0.5
        super().submit(queries, segments)

    def state(self) -> dict[str, Any]:
        return super().state() | {
            "truth": [[a, b, t] for (a, b), t in self.truth.items()],
            "errors": list(self.errors),
            "user_errors": self.user_errors.tolist(),
        }

    def load_state(self, state: Mapping[str, Any]) -> None:
        super().load_state(state)
        self.truth = {(a, b): float(t) for a, b, t in state["truth"]}
        self.errors = [float(e) for e in state["errors"]]
        self.user_errors = np.asarray(state["user_errors"], dtype=np.float64)


class ScoredAggregator(CrowdAggregator):
    """Records the error of the labels it returns against the crowd's oracle answers (in the
    crowd, whose state the run's checkpoints keep)."""

    def __init__(self, method: str, crowd: ScoredCrowd) -> None:
        super().__init__(method, diagonal="auto")  # paper 003's SML estimator
        self.crowd = crowd

    def labels(self, feedback: Feedback) -> list[Label]:
        labels = super().labels(feedback)
        queries = feedback.queries
        scored = [
            (lab.p, self.crowd.truth[(lab.a, lab.b)])
            for lab in labels
            if self.crowd.truth.get((lab.a, lab.b), 0.5) != 0.5
        ]
        if scored:
            self.crowd.errors.append(float(np.mean([p != t for p, t in scored])))
        tab = self.last_table
        if tab is not None and tab.votes.shape[1]:
            t = np.array(
                [
                    {1.0: 1, 0.0: -1}.get(
                        self.crowd.truth.get((queries[q].a[0], queries[q].b[0]), 0.5), 0
                    )
                    for q in tab.query_ids
                ]
            )
            self.crowd.user_errors = error_rates(tab.votes.toarray(), t)
        return labels


def pick_crowd(
    env_id: str,
    cfg: CrowdConfig,
    n_candidates: int,
    rng: np.random.Generator,
    *,
    screen_steps: int,
) -> tuple[list, float]:
    """The paper's Fig. 3a choice: among candidate crowds, the one where SML is expected to beat
    majority most, judged on pairs of random-policy segments (not the run's own queries)."""
    segs = segment_pool(env_id, rng, ppo_steps=0, steps=screen_steps)
    rewards = np.stack([s.true_rewards for s in segs]).astype(np.float64)
    pairs = random_pairs(len(segs), 1000, rng)
    ra, rb = rewards[pairs[:, 0]], rewards[pairs[:, 1]]
    truth = truth_labels(ra, rb)
    best, best_gain = None, -np.inf
    for _ in range(n_candidates):
        users = sample_users(cfg, rng)
        votes = answer_pairs(users, ra, rb, rng, return_scale=cfg.return_scale)
        gain = float((majority(votes) != truth).mean() - (sml(votes).labels != truth).mean())
        if gain > best_gain:
            best, best_gain = users, gain
    assert best is not None
    return best, best_gain


ARMS = ("sml", "majority", "oracle")
PRESETS = {"dm_control/walker-walk-v0": "bpref/walker_walk-prefppo"}
"""Env → its PrefPPO preset (B-Pref's, as Crowd-PrefRL ran it)."""


def default_return_scale(env_id: str) -> float:
    """Returns are divided by this before β: 1 on DeepMind Control (per-step rewards in [0, 1],
    as B-Pref and the paper apply β), 30 on gymnasium MuJoCo (user errors at the paper's
    15–40 %, see crowd_fig2)."""
    return 1.0 if env_id.startswith("dm_control/") else 30.0


def run_config(args: argparse.Namespace, env_id: str, seed: int) -> TrainConfig:
    """The env's PrefPPO preset (or a small PPO set-up) at this bench's budget."""
    if env_id in PRESETS:
        base = load_config(preset_path(PRESETS[env_id]))
    else:
        base = TrainConfig(
            env_id=env_id,
            algo="ppo",
            initial_steps=2_000,
            steps_per_round=4_096,
            segment_length=50,
            n_envs=4,
            selector="disagreement",
            net_arch=(64, 64),
        )
    budget: dict[str, Any] = {
        "seed": seed,
        "total_steps": args.steps,
        "total_labels": args.labels,
        "eval_episodes": args.eval_episodes,
        "torch_threads": args.threads,
    }
    if args.smoke:  # the test suite: a few rounds of a tiny PPO
        kw = json.loads(base.agent_kwargs or "{}")
        budget |= {
            "n_envs": 2,
            "initial_steps": 128,
            "steps_per_round": 256,
            "pool_size": 64,
            "net_arch": (16, 16),
            "agent_kwargs": json.dumps(kw | {"n_steps": 128, "batch_size": 64}),
            "first_fit_epochs": 2,
            "fit": dataclasses.replace(base.fit, epochs=2),
            "reward": dataclasses.replace(base.reward, hidden=(16, 16)),
        }
    return dataclasses.replace(base, **budget)


def run_dir_name(env_id: str, arm: str, seed: int) -> str:
    """The directory of one run under ``--run-root``."""
    return f"{env_id.replace('/', '_')}-{arm}-s{seed}"


def run_arm(args: argparse.Namespace, env_id: str, arm: str, seed: int) -> dict[str, Any]:
    """One run of ``arm``; the run-log fields of its result."""
    scale = args.return_scale or default_return_scale(env_id)
    crowd_cfg = CrowdConfig(n_users=args.users, return_scale=scale)
    users, gain = pick_crowd(
        env_id,
        crowd_cfg,
        args.candidates,
        np.random.default_rng(1000 + seed),
        screen_steps=args.screen_steps,
    )
    log.warning("seed %d: crowd picked with expected SML gain %.3f over majority", seed, gain)
    cfg = run_config(args, env_id, seed)
    run_dir = args.run_root / run_dir_name(env_id, arm, seed)
    crowd = None
    missing = not in_log(args, "crowd_ppo", env_id, arm, seed)
    if arm == "oracle":
        res = train_row(cfg, run_dir, row_missing=missing)
    else:
        crowd = ScoredCrowd(crowd_cfg, np.random.default_rng(2000 + seed), users=users)
        aggregator = ScoredAggregator(arm, crowd)
        res = train_row(cfg, run_dir, source=crowd, aggregator=aggregator, row_missing=missing)
    errors = crowd.errors if crowd is not None else []
    user_errors = crowd.user_errors if crowd is not None else np.zeros(0)
    return {
        "return": res["return"],
        "return_std": res["return_std"],
        "labels": res["labels"],
        "steps": res["steps"],
        "wall_s": res["wall_s"],
        "reward_corr": res["reward_corr"],
        "screened_gain": gain,
        "return_scale": scale,
        "users": args.users,
        "label_error": errors[-1] if errors else None,
        "label_errors": errors,
        "user_error_mean": float(user_errors.mean()) if user_errors.size else None,
        "user_error_best": float(user_errors.min()) if user_errors.size else None,
        "user_error_worst": float(user_errors.max()) if user_errors.size else None,
    }


def _row(
    args: argparse.Namespace, env_id: str, arm: str, seed: int, res: dict[str, Any]
) -> dict[str, Any]:
    return log_row("crowd_ppo", args, env_id, arm, seed, **res)


def _fmt(v: Any, digits: int = 4) -> str:
    return "—" if v is None else f"{float(v):.{digits}g}"


def report(
    rows: list[dict[str, Any]],
    plan_path: Path,
    *,
    run_root: Path | None = None,
    curves: Path | None = None,
) -> str:
    """The markdown report of ``rows`` (see the module docstring). With ``run_root`` and
    ``curves`` (the PNG to draw), every section with an aggregate also gets its arms' training
    curves (:func:`curves_section`)."""
    out = []
    panels: list[Panel] = []
    for env_id, env_rows, status in envs_under_plan(rows, plan_path):
        entry, conf = status.entry, status.confidence
        out.append(f"## {section_title(env_id, env_rows)}\n")
        out.append(
            f"Steps per run {sorted({r['steps'] for r in env_rows})}, labels "
            f"{sorted({r['labels'] for r in env_rows})}, crowd of "
            f"{sorted({r['users'] for r in env_rows})} users, return scale "
            f"{sorted({r['return_scale'] for r in env_rows})}.\n"
        )
        out.append(status.line + "\n")
        val = {(r["arm"], r["seed"]): float(r["return"]) for r in env_rows}
        arms = [a for a in ARMS if any(k[0] == a for k in val)]
        seeds = sorted(
            set.intersection(*({s for (a2, s) in val if a2 == a} for a in arms)) if arms else set()
        )
        if seeds and not status.incomplete:  # an incomplete entry: its runs only, below
            scores = {a: np.array([[val[(a, s)]] for s in seeds]) for a in arms}
            out.append(f"Seeds with every arm present: {seeds}.\n")
            out.append(markdown_table(iqm_ci(scores, confidence=conf)) + "\n")
            for num, den in (("sml", "majority"), ("sml", "oracle")):
                if num in scores and den in scores and len(seeds) > 1:
                    ratio = ratio_ci(scores[num], scores[den], paired=True, confidence=conf)
                    line = f"IQM {num} / IQM {den} (paired by seed): {fmt_interval(ratio)}"
                    if entry is not None and den == entry.arms[1]:
                        line += entry.verdict_clause(ratio.lo, ratio.hi)
                    out.append(line + "\n")
            if run_root is not None and curves is not None:
                text, panel = curves_section(
                    section_title(env_id, env_rows),
                    [r for r in env_rows if r["seed"] in seeds and r["arm"] in arms],
                    status,
                    run_root,
                    curves.name,
                )
                out.append(text)
                panels.append(panel)
        elif not seeds:
            out.append("No seed has every arm yet.\n")
        if status.incomplete:  # read once, when every run exists: which runs exist, no result
            out.append("| arm | seed | steps | wall (s) | command |\n|---|---|---|---|---|")
            for r in sorted(env_rows, key=lambda r: (ARMS.index(r["arm"]), r["seed"])):
                out.append(
                    f"| {r['arm']} | {r['seed']} | {r['steps']} | {r['wall_s']:.0f} "
                    f"| `{r['command']}` |"
                )
            out.append("")
            continue
        out.append(
            "| arm | seed | return | label error (final) | label error per round | "
            "user error mean (best, worst) | screened gain MAJ−SML | labels | steps | wall (s) "
            "| command |"
        )
        out.append("|---|---|---|---|---|---|---|---|---|---|---|")
        for r in sorted(env_rows, key=lambda r: (ARMS.index(r["arm"]), r["seed"])):
            per_round = " ".join(f"{e:.2f}" for e in r.get("label_errors") or [])
            users = (
                f"{_fmt(r['user_error_mean'], 3)} ({_fmt(r['user_error_best'], 3)}, "
                f"{_fmt(r['user_error_worst'], 3)})"
                if r.get("user_error_mean") is not None
                else "—"
            )
            out.append(
                f"| {r['arm']} | {r['seed']} | {_fmt(r['return'])} | {_fmt(r['label_error'], 3)} "
                f"| {per_round or '—'} | {users} | {r['screened_gain']:+.3f} | {r['labels']} "
                f"| {r['steps']} | {r['wall_s']:.0f} | `{r['command']}` |"
            )
        out.append("")
    if curves is not None and plot(panels, curves) is None:
        curves.unlink(missing_ok=True)  # no panel has a point: no figure (nor an old one)
    return "\n".join(out)


CURVE_COLUMN = "train_true_return"
"""The metrics.csv column of the training curves: the mean true return of the last 10 training
episodes (``preflab.loop.results.RECENT_EPISODES``) at the end of each round."""
CURVE_FRACTIONS = (0.25, 0.5, 0.75, 1.0)
"""Fractions of the step budget the curves' table reads the IQM at."""


def _trimmed_iqm(values: Sequence[float]) -> float:
    """The interquartile mean (scipy's 25 % trimmed mean, rliable's ``aggregate_iqm``)."""
    from scipy.stats import trim_mean

    return float(trim_mean(np.asarray(values, dtype=float), 0.25, axis=None))


def command_run_root(command: str) -> Path | None:
    """The ``--run-root`` a run-log row's command gave, if it names one."""
    try:
        words = shlex.split(command)
    except ValueError:
        return None
    for i, w in enumerate(words):
        if w == "--run-root" and i + 1 < len(words):
            return Path(words[i + 1])
        if w.startswith("--run-root="):
            return Path(w.split("=", 1)[1])
    return None


def run_curve(row: Mapping[str, Any], run_root: Path) -> tuple[dict[float, float] | None, str]:
    """The training curve (env steps → :data:`CURVE_COLUMN`) of the finished run ``row``
    records, looked for under ``run_root`` and then under the ``--run-root`` of the row's own
    command; (None, why) when neither holds it. A directory counts only when its summary.json
    is the row's (same env steps and return): a half-finished or another run is never read."""
    name = run_dir_name(row["env"], row["arm"], int(row["seed"]))
    roots = [run_root]
    own = command_run_root(str(row.get("command") or ""))
    if own is not None and own != run_root:
        roots.append(own)
    why = []
    for d in (root / name for root in roots):
        if not d.is_dir():
            why.append(f"{d} missing")
            continue
        try:
            summary = json.loads((d / "summary.json").read_text())
            same = int(summary["env_steps"]) == int(row["steps"]) and math.isclose(
                float(summary["true_return"]), float(row["return"]), rel_tol=1e-9
            )
        except (OSError, ValueError, KeyError, TypeError):
            why.append(f"{d} (no finished run: no readable summary.json)")
            continue
        if not same:
            why.append(f"{d} (another run: its summary.json is not this row's)")
            continue
        curve = read_column(d / "metrics.csv", CURVE_COLUMN)
        if curve is None:
            why.append(f"{d} (no metrics.csv)")
            continue
        return curve, ""
    return None, "; ".join(why)


def curves_section(
    title: str,
    rows: list[dict[str, Any]],
    status: PlanStatus,
    run_root: Path,
    png: str,
) -> tuple[str, Panel]:
    """One section's curves: the markdown (what the figure ``png`` shows, the IQM return per arm
    at :data:`CURVE_FRACTIONS` of the steps with its interval, the true reward's reference,
    the run directories not found) and the figure's panel."""
    conf = status.confidence
    runs: dict[str, dict[int, dict[float, float]]] = {}
    errors: dict[str, dict[int, list[float]]] = {}
    missing = []
    for r in sorted(rows, key=lambda r: (ARMS.index(r["arm"]), r["seed"])):
        curve, why = run_curve(r, run_root)
        if curve is None:
            missing.append(f"{r['arm']} seed {r['seed']}: {why}")
        else:
            runs.setdefault(r["arm"], {})[int(r["seed"])] = curve
        if r.get("label_errors"):
            errors.setdefault(r["arm"], {})[int(r["seed"])] = [float(e) for e in r["label_errors"]]
    curves: dict[str, Curve] = {
        arm: iqm_curve(list(by_seed.values()), confidence=conf) for arm, by_seed in runs.items()
    }
    total = max(float(r["steps"]) for r in rows)
    pct = f"{100 * conf:.4g}%"
    what = (
        f"IQM across seeds of `{CURVE_COLUMN}` (the mean true return of the last 10 training "
        "episodes, stochastic policy, at the end of each round; from each run's metrics.csv) "
        f"against env steps, with its {pct} stratified bootstrap band; beside it the IQM across "
        "seeds of the aggregated labels' error per feedback round (run log). The last point is "
        "a training-episode return, not the deterministic evaluation of the table above.\n"
    )
    if any(c.points for c in curves.values()):
        lead = f"![training curves per arm]({png}) — "
    else:
        lead = (
            f"No run has a finite `{CURVE_COLUMN}` at a step all its arm's seeds have: no "
            "figure of the "
        )
    out = ["### Training curves\n", lead + what]
    head = ["arm", "seeds"] + [f"{100 * f:.0f} % ({f * total:,.0f} steps)" for f in CURVE_FRACTIONS]
    out += ["| " + " | ".join(head) + " |", "|" + "---|" * len(head)]
    for arm in sorted({r["arm"] for r in rows}, key=ARMS.index):
        c = curves.get(arm)
        found = at_fractions(c, total, CURVE_FRACTIONS) if c else [None] * len(CURVE_FRACTIONS)
        cells = ["—" if p is None else f"{fmt_interval(p[1])} at {p[0]:,.0f}" for p in found]
        out.append(f"| {arm} | {c.n_runs if c else 0} | " + " | ".join(cells) + " |")
    out.append(
        f"\nIQM {CURVE_COLUMN} [{pct} stratified bootstrap CI] at the last round at or below "
        "each fraction of the steps (the step it was read at after 'at').\n"
    )
    entry = status.entry
    ref = entry.budget.get("true_reward_return") if entry is not None else None
    if ref is not None:
        out.append(f"True reward's reference (the entry's `true_reward_return`): {ref}.\n")
    else:
        out.append(
            "True reward's reference: none (no arm of this bench trains on the true reward, "
            "and the plan entry's budget names no `true_reward_return`); the oracle arm, "
            "perfect labels, is the nearest.\n"
        )
    if missing:
        out.append(
            f"Runs in the run log whose run directory was not found ({len(missing)}; left out "
            "of the curves): " + "; ".join(missing) + ".\n"
        )
    per_round: dict[str, list[float]] = {}
    for arm, by_seed in errors.items():
        n = min(len(v) for v in by_seed.values())
        per_round[arm] = [float(_trimmed_iqm([v[k] for v in by_seed.values()])) for k in range(n)]
    panel = Panel(
        title=title,
        curves=curves,
        ylabel=f"IQM {CURVE_COLUMN}\n(mean true return, last 10 training episodes)",
        reference=float(ref) if ref is not None else None,
        reference_label="true reward (reference)",
        per_round=per_round,
        per_round_label="IQM label error of the aggregated labels",
    )
    return "\n".join(out) + "\n", panel


def parse(argv: list[str] | None = None) -> argparse.Namespace:
    """This bench's command line (``--smoke`` sets its tiny budgets)."""
    ap = argparse.ArgumentParser(
        prog="preflab bench crowd_ppo", description=__doc__.split("\n\n")[0]
    )
    ap.add_argument("--envs", nargs="+", default=["dm_control/walker-walk-v0"])
    ap.add_argument("--seeds", type=int, nargs="+", default=[30])
    ap.add_argument("--arms", nargs="+", choices=ARMS, default=list(ARMS))
    ap.add_argument("--steps", type=int, default=400_000)
    ap.add_argument("--labels", type=int, default=1000)
    ap.add_argument("--users", type=int, default=15)
    ap.add_argument(
        "--return-scale",
        type=float,
        default=None,
        help="returns divided by this before β (default 1 on DeepMind Control, 30 otherwise)",
    )
    ap.add_argument(
        "--candidates",
        type=int,
        default=30,
        help="crowds screened for the largest expected SML gain (1 = a random crowd)",
    )
    ap.add_argument(
        "--screen-steps",
        type=int,
        default=8_000,
        help="random-policy env steps whose segments the candidate crowds are screened on",
    )
    ap.add_argument("--eval-episodes", type=int, default=10)
    ap.add_argument("--threads", type=int, default=1, help="torch threads of each run")
    add_plan_options(ap)
    ap.add_argument("--run-root", type=Path, default=Path("runs") / "crowd_ppo")
    ap.add_argument("--jsonl", type=Path, default=RESULTS / "crowd_ppo_runs.jsonl")
    ap.add_argument("--out", type=Path, default=RESULTS / "crowd_ppo.md")
    ap.add_argument("--report", action="store_true", help="rebuild --out from --jsonl, no runs")
    ap.add_argument("--smoke", action="store_true", help="tiny budgets (the test suite)")
    args = ap.parse_args(argv)
    args.argv = argv
    if args.smoke:
        # three aggregations, at 128, 384 and 640 steps (the end): a run stopped in its second
        # has one finished before it and one to go (tests/bench/test_crowd_ppo.py)
        args.steps, args.labels, args.candidates, args.users = 640, 8, 1, 5
        args.screen_steps = 400  # 8 segments: the one candidate crowd is not compared
        args.eval_episodes = 1
    return args


def main(argv: list[str] | None = None) -> int:
    args = parse(argv)
    logging.basicConfig(level=logging.WARNING)
    torch.set_num_threads(args.threads)

    def runs() -> Iterator[dict[str, Any]]:
        for seed in args.seeds:
            for env_id in args.envs:
                for arm in args.arms:
                    yield _row(args, env_id, arm, seed, run_arm(args, env_id, arm, seed))

    return log_and_report(
        args,
        bench="crowd_ppo",
        title="Crowd-PrefPPO: SML vs majority vs oracle labels",
        budgets="per row (steps, labels and crowd as in each row's command)",
        runs=runs,
        report=lambda rows, plan_path: report(
            rows,
            plan_path,
            run_root=args.run_root,
            curves=args.out.with_name(args.out.stem + "_curves.png"),
        ),
    )


if __name__ == "__main__":
    raise SystemExit(main())
