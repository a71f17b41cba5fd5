"""The groupwise bench's run log and report: each run's identity in the log
(:func:`run_key`), the analysis (held-out accuracy, paired differences, the paper's
direction) and the markdown of all runs (:func:`report`; what it holds: ``groupwise.py``'s
module doc)."""

from __future__ import annotations

import json
import math
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import numpy as np

from preflab.rundir.reporting import fmt_ci, md_table, mean_ci, read_jsonl
from preflab.rundir.reporting import paired_differences as differences
from preflab.rundir.reporting import verdict as ci_verdict
from preflab_bench._groupwise_envs import FLAG_BONUS, PAPER, SPECS
from preflab_bench._groupwise_plan import REFERENCE, incomplete_report, verdict_section
from preflab_bench._plan import PLAN
from preflab_bench._report import header

DMS = ("pairwise", "groupwise", "interactive")
ARMS = (*DMS, REFERENCE)
LEARNS_ACCURACY = 0.65
"""An environment is reported only when the mean held-out pair accuracy of its learned rewards
is at least this and the lower end of its 95% CI is above chance (0.5)."""


def run_key(r: dict[str, Any]) -> tuple[str, str, int, str]:
    """Identity of a run in the jsonl: environment, decision maker, seed and its budgets."""
    return (r["env"], r["dm"], int(r["seed"]), json.dumps(r["budget"], sort_keys=True))


# ----- jsonl ---------------------------------------------------------------------------------
def load_runs(path: Path) -> list[dict[str, Any]]:
    """Every run record of a jsonl file (the last record wins for a repeated key)."""
    if not path.exists():
        return []
    return list({run_key(r): r for r in read_jsonl(path)}.values())


# ----- analysis ------------------------------------------------------------------------------
def paired_differences(
    rows: Sequence[dict[str, Any]], env: str, a: str, b: str, field: str
) -> list[float]:
    """Per seed: ``field`` of decision maker a minus that of b (seeds both ran)."""
    va = {r["seed"]: float(r[field]) for r in rows if r["env"] == env and r["dm"] == a}
    vb = {r["seed"]: float(r[field]) for r in rows if r["env"] == env and r["dm"] == b}
    return differences(va, vb)


def reward_learns(
    rows: Sequence[dict[str, Any]], env: str, threshold: float = LEARNS_ACCURACY
) -> tuple[bool, float, float]:
    """(learns, mean, CI half-width) of the held-out pair accuracy over the env's runs: the
    mean is at least ``threshold`` and (for a threshold above chance) the CI is above 0.5."""
    acc = [r["heldout_accuracy"] for r in rows if r["env"] == env and r["dm"] in DMS]
    m, h = mean_ci(acc)
    low = m - h if math.isfinite(h) else m
    return bool(m >= threshold and (threshold <= 0.5 or low > 0.5)), m, h


def verdict(values: Sequence[float], better: int) -> str:
    """Whether the paired differences show the paper's direction (better = +1 higher is
    better, −1 lower is better): 'shown' when the 95% CI excludes 0 on that side."""
    shown, opposite = "shown (paper's direction)", "opposite (CI excludes 0)"
    if better > 0:
        return ci_verdict(values, above=shown, below=opposite)
    return ci_verdict(values, above=opposite, below=shown)


def _ci(values: Sequence[float], scale: float = 1.0, nd: int = 1) -> str:
    return fmt_ci([scale * v for v in values], nd, n="single", empty="–")


def overlap_text(budget: dict[str, Any]) -> str:
    """The overlap and editing rules of a run's decision makers, in words."""
    if budget.get("overlap_rule", "discordance") == "border":
        text = (
            "as in the paper's released code, the border is the midpoint of the two groups' "
            "perceived mean returns, a group comparison is skipped when more than half of "
            "either group is perceived beyond it"
        )
    else:
        text = (
            "a group comparison is skipped when more than "
            f"{budget.get('max_discordance', 0):.0%} of its cross pairs are perceived against "
            "the decision"
        )
    if budget.get("clean_groups"):
        text += (
            ", and the members perceived beyond the border are removed before answering "
            "(the user's edit in the released code)"
        )
    return text + "."


def _table(head: Sequence[str], rows: Sequence[Sequence[object]]) -> str:
    """A markdown table, or a sentence when there is nothing to put in it."""
    no_rows = "No rows: no environment where the reward learned, or no paired seeds.\n"
    return md_table(head, rows, empty=no_rows)


def _no_flag_note(rows: Sequence[dict[str, Any]], kept: list[str]) -> list[str]:
    """A note when no MountainCar run (reference included) reached the flag: its returns are
    then the action cost alone and cannot order the decision makers."""
    if "MountainCar" not in kept:
        return []
    rets = [r["true_return"] for r in rows if r["env"] == "MountainCar"]
    if not rets or max(rets) >= 1.0:
        return []
    steps = SPECS["MountainCar"].total_steps
    return [
        f"MountainCar: no run reached the flag within {steps:,} PPO steps, not even on the true "
        f"reward (best return {max(rets):.2f}; reaching it pays +{FLAG_BONUS:g}), so its returns "
        "are the action cost alone and cannot order the decision makers; its label-error and "
        "held-out-accuracy rows stand.",
        "",
    ]


def _protocol_section(
    rows: Sequence[dict[str, Any]], kept: Sequence[str], *, planned: bool = False
) -> list[str]:
    """Final return under the reporting protocol: per env, each decision maker's IQM over seeds
    and the group decision makers' IQM differences from PAIRWISE-DM (final return, label error),
    paired by seed, with 95% stratified bootstrap intervals. Without a plan entry (``planned``
    False) the runs are exploratory and get no verdict; with one, the entry's verdict is
    :func:`verdict_section`'s and these intervals describe the runs beside it."""
    from preflab_bench._protocol import difference_ci, fmt_interval, iqm_ci

    table = []
    for e in kept:
        by = {d: {r["seed"]: r for r in rows if r["env"] == e and r["dm"] == d} for d in ARMS}
        scores = {d: np.array([[r["true_return"]] for r in by[d].values()]) for d in ARMS if by[d]}
        iqm = {d: fmt_interval(a.iqm) for d, a in iqm_ci(scores).items()}
        for a, b in (("interactive", "pairwise"), ("groupwise", "pairwise")):
            seeds = sorted(by[a].keys() & by[b].keys())
            if len(seeds) < 2:
                continue
            cells = []
            for key, scale in (("true_return", 1.0), ("dm_label_error_rate", 100.0)):
                x, y = (np.array([[scale * by[d][s][key]] for s in seeds]) for d in (a, b))
                cells.append(fmt_interval(difference_ci(x, y, paired=True), 3))
            table.append([e, iqm.get(a, "–"), iqm.get(b, "–"), f"{a} − {b}", len(seeds), *cells])
    if not table:
        return []
    return [
        "## Under the reporting protocol" + ("" if planned else " (exploratory)"),
        "",
        "IQM over seeds with 95% stratified bootstrap intervals; differences of IQMs paired by "
        "seed. "
        + (
            "The plan entry's verdict is the section above; these intervals describe the runs."
            if planned
            else "These runs were not pre-registered (no plan entry): no verdict."
        ),
        "",
        _table(
            [
                "Environment",
                "IQM return (first DM)",
                "IQM return (PAIRWISE-DM)",
                "difference",
                "seeds",
                "IQM return difference",
                "IQM label-error difference (pp)",
            ],
            table,
        ),
        "",
    ]


def report(
    rows: Sequence[dict[str, Any]],
    argv: Sequence[str],
    runs_path: Path,
    threshold: float = LEARNS_ACCURACY,
    plan_path: Path = PLAN,
) -> str:
    """The markdown of all runs (see the module doc); for the runs of a plan entry with
    planned runs missing, the list of runs made only."""
    if (runs_only := incomplete_report(rows, plan_path)) is not None:
        title = "Groupwise comparison: paper 000, Table 1, at CPU size"
        return header(title, "groupwise", list(argv), "see the plan entry") + runs_only
    envs = [e for e in SPECS if any(r["env"] == e for r in rows)]
    budgets = []
    for env in envs:
        b = next(r["budget"] for r in rows if r["env"] == env)
        budgets.append(
            f"{env}: {b['env_id']}, PPO {b['total_steps']} env steps, {b['comparisons']} "
            f"comparisons per decision maker, segments of {b['segment_length']} steps, rounds "
            f"of {b['steps_per_round']} steps, pool of {b['pool']} recent segments"
        )
    b0 = rows[0]["budget"] if rows else {}
    seeds = sorted({r["seed"] for r in rows})
    cmds = sorted({(r.get("command", ""), r.get("note", "")) for r in rows if r.get("command")})
    wall_min = sum(r["wall_s"] for r in rows) / 60
    cpu_min = sum(r.get("cpu_s", r["wall_s"]) for r in rows) / 60
    threads = ", ".join(str(t) for t in sorted({int(r.get("threads", 1)) for r in rows}))
    out = [
        header(
            "Groupwise comparison: paper 000, Table 1, at CPU size",
            "groupwise",
            list(argv),
            "; ".join(budgets)
            + f". Seeds {seeds}; summed run time {wall_min:.1f} min wall, {cpu_min:.1f} min CPU "
            f"(one process, torch threads {threads}).",
        ),
        "Runs were made by (each appends to `"
        + runs_path.name
        + "`; a run already there is not repeated):\n\n"
        + "\n".join(f"- `{c}`" + (f" ({note})" if note else "") for c, note in cmds)
        + "\n",
        "Supersedes the earlier result (`groupwise.md`, `groupwise_part{A,B}.md` and their "
        "`_runs.json` at commit 2f3be02: 40 comparisons, 8–10k PPO steps, 2 seeds, skips "
        "consuming the budget, percentages of near-zero means); they are in git history.",
        "",
        "Set-up as in the paper (§5): three simulated decision makers, the same number of "
        "comparisons each; PAIRWISE-DM asks the pair of highest ensemble variance, GROUPWISE-DM "
        "the pair of DTW-tree groups (≤ 8 members) of highest s_g, INTERACTIVE-DM builds "
        "return-homogeneous groups (≤ 8 members) from the tree and spreads its comparisons over "
        "the range of true returns. Answers follow Eq. 1 with Gaussian ε per behaviour, "
        f"σ = {b0.get('noise_frac')} × the std of random-policy segment returns; "
        + overlap_text(b0)
        + (
            " A skipped comparison counts toward the budget (the paper's label counts suggest "
            "it does); a group may "
            if b0.get("skips_use_budget", False)
            else " A skipped comparison is replaced (it does not consume the budget); a group may "
        )
        + f"be used in up to {b0.get('max_group_uses')} comparisons of a round. "
        "Reward ensemble 3 × (64, 64), PPO. Reward learning is checked on held-out segments "
        "(random-policy and final-policy segments never labelled): the share of random pairs "
        "the learned reward orders like the true reward (chance 0.5). Label error: share of "
        "labels whose preferred behaviour has the lower true return.",
        "",
        "What is scaled down: PPO runs for "
        + ", ".join(
            f"{e} {next(r['budget']['total_steps'] for r in rows if r['env'] == e)}" for e in envs
        )
        + " env steps, not the paper's millions, so returns are early-training returns and "
        "are not on the paper's scale (our GridWorld is a small 8 × 8 grid, not the paper's). "
        "Comparisons per decision maker: "
        + ", ".join(
            f"{e} {next(r['budget']['comparisons'] for r in rows if r['env'] == e)}" for e in envs
        )
        + " (paper: 400).",
        "",
    ]
    learn = {e: reward_learns(rows, e, threshold) for e in envs}
    out += [
        "## Does the reward model learn? (held-out pair accuracy, mean ± 95% CI)",
        "",
        "Held-out segments: random-policy and final-policy segments, never labelled; chance "
        f"is 0.5. An environment is reported when the accuracy over all its runs is ≥ "
        f"{threshold} with a CI above 0.5; a decision maker whose own accuracy stays below "
        "that is named under the table.",
        "",
        _table(
            ["Environment", "all runs", *(f"{d}" for d in DMS), "correlation", "reported"],
            [
                [
                    e,
                    _ci(
                        [r["heldout_accuracy"] for r in rows if r["env"] == e and r["dm"] in DMS],
                        nd=3,
                    ),
                    *(
                        _ci(
                            [r["heldout_accuracy"] for r in rows if r["env"] == e and r["dm"] == d],
                            nd=3,
                        )
                        for d in DMS
                    ),
                    _ci(
                        [r["heldout_corr"] for r in rows if r["env"] == e and r["dm"] in DMS], nd=3
                    ),
                    "yes" if learn[e][0] else f"no: dropped (needs ≥ {threshold} and CI above 0.5)",
                ]
                for e in envs
            ],
        ),
    ]
    weak = [
        f"{d} in {e} ({_ci(acc, nd=3)})"
        for e in envs
        if learn[e][0]
        for d in DMS
        if (acc := [r["heldout_accuracy"] for r in rows if r["env"] == e and r["dm"] == d])
        and not (mean_ci(acc)[0] >= threshold)
    ]
    if weak:
        out += [
            "Decision makers whose own learned reward stays below the threshold (their return "
            "differences compare a learned reward with one near chance): " + "; ".join(weak) + ".",
            "",
        ]
    kept = [e for e in envs if learn[e][0]]
    out += [
        "## Table 1: final true return (paper: mean ± std over 5; ours: mean ± 95% CI)",
        "",
        _table(
            ["Environment"] + [f"paper {d}" for d in DMS] + [f"ours {d}" for d in ARMS],
            [
                [e]
                + [f"{PAPER[e][d][0]:g} ± {PAPER[e][d][1]:g}" if e in PAPER else "–" for d in DMS]
                + [
                    _ci([r["true_return"] for r in rows if r["env"] == e and r["dm"] == d])
                    for d in ARMS
                ]
                for e in kept
            ],
        ),
        "`ours true-reward`: the same PPO (steps, seed, hyperparameters) trained on the "
        "environment's own reward, unnormalised, whereas the learned reward reaches the "
        "policy normalised to zero mean and unit std: a reference for what the step budget "
        "allows, not an upper bound.",
        "",
        *_no_flag_note(rows, kept),
        "## Labels: comparisons, skips, labels, label error rate (mean ± 95% CI over seeds)",
        "",
        "Paper (over all environments): 400 comparisons each; labels 400 (pairwise), 690 "
        '(interactive), 1209 (groupwise); a "slight decrease in errors" for the group '
        "decision makers (no number given).",
        "",
        _table(
            [
                "Environment",
                "DM",
                "comparisons",
                "skipped",
                "labels",
                "label error %",
                "held-out acc",
            ],
            [
                [
                    e,
                    d,
                    _ci([r["dm_comparisons"] for r in rs], nd=0),
                    _ci([r["dm_skipped"] for r in rs], nd=0),
                    _ci([r["dm_labels"] for r in rs], nd=0),
                    _ci([r["dm_label_error_rate"] for r in rs], scale=100),
                    _ci([r["heldout_accuracy"] for r in rs], nd=3),
                ]
                for e in kept
                for d in DMS
                if (rs := [r for r in rows if r["env"] == e and r["dm"] == d])
            ],
        ),
    ]
    diff_rows = []
    for e in kept:
        for a, b in (("interactive", "pairwise"), ("groupwise", "pairwise")):
            err = paired_differences(rows, e, a, b, "dm_label_error_rate")
            ret = paired_differences(rows, e, a, b, "true_return")
            if not err:
                continue
            paper = f"{PAPER[e][a][0] - PAPER[e][b][0]:+g}" if e in PAPER else "–"
            diff_rows.append(
                [
                    e,
                    f"{a} − {b}",
                    len(err),
                    _ci(err, scale=100),
                    verdict(err, -1),
                    _ci(ret, nd=2),
                    verdict(ret, +1),
                    paper,
                ]
            )
    out += [
        "## Paired differences at equal comparisons (per seed, mean ± 95% CI)",
        "",
        "The paper's direction: lower label error and higher final return for the group "
        "decision makers (INTERACTIVE-DM above PAIRWISE-DM in every environment of Table 1).",
        "",
        _table(
            [
                "Environment",
                "difference",
                "seeds",
                "label error (pp)",
                "error verdict",
                "final return",
                "return verdict",
                "paper Δ return",
            ],
            diff_rows,
        ),
    ]
    verdicts = verdict_section(rows, kept, plan_path)
    out += verdicts + _protocol_section(rows, kept, planned=bool(verdicts))
    dropped = [e for e in envs if e not in kept]
    if dropped:
        out += [
            "Dropped (reward at chance, see the first table): " + ", ".join(dropped) + ".",
            "",
        ]
    out += [
        "## Runs",
        "",
        _table(
            [
                "env",
                "dm",
                "seed",
                "return",
                "comparisons",
                "skipped",
                "labels",
                "err %",
                "held-out acc",
                "corr",
                "wall s",
                "CPU s",
            ],
            [
                [
                    r["env"],
                    r["dm"],
                    r["seed"],
                    f"{r['true_return']:.2f}",
                    *(
                        [
                            r["dm_comparisons"],
                            r["dm_skipped"],
                            r["dm_labels"],
                            f"{100 * r['dm_label_error_rate']:.1f}",
                            f"{r['heldout_accuracy']:.3f}",
                            f"{r['heldout_corr']:.3f}",
                        ]
                        if r["dm"] in DMS
                        else ["–"] * 6
                    ),
                    f"{r['wall_s']:.0f}",
                    f"{r.get('cpu_s', float('nan')):.0f}",
                ]
                for r in sorted(rows, key=lambda r: (r["env"], r["seed"], ARMS.index(r["dm"])))
            ],
        ),
    ]
    return "\n".join(out)
