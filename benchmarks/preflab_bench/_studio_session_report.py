"""The report of ``preflab bench studio_session``: the sessions' table and the issue's targets,
the Groups view against pairs (Amendment 5b), and the new-behaviour arms (5c)."""

from __future__ import annotations

import argparse
import math
from pathlib import Path
from typing import Any

from preflab.rundir.reporting import fmt_ci, md_table, mean_ci
from preflab.sources.routing.calibration import wilson_interval
from preflab.store import FeedbackStore
from preflab_bench._report import header
from preflab_bench._studio_person import label_errors

PLAN = "benchmarks/plans/studio_session.md"
"""The plan every session and report of this benchmark belongs to."""


def _with_label_errors(row: dict[str, Any]) -> dict[str, Any]:
    """A session row logged before label errors were: counted now from its run's store, when
    the run directory is still on this machine (the store keeps every answer)."""
    db = Path(str(row.get("run_dir", ""))) / "feedback.db"
    if row["arm"] != "studio" or "label_errors" in row or not db.exists():
        return row
    store = FeedbackStore(db, array_dir=db.parent / "segments")
    try:
        wrong, n = label_errors(store, row.get("prefer", "true"), _env_of(row), "pair")
    finally:
        store.close()
    return row | {"answers_kept": n, "label_errors": wrong, "label_error": wrong / max(1, n)}


def _env_of(row: dict[str, Any]) -> str:
    words = str(row["trainer_command"]).split()
    return words[words.index("--env-id") + 1]


def _vals(rows: list[dict[str, Any]], key: str) -> list[float]:
    return [float(r[key]) for r in rows if r.get(key) is not None]


def report(args: argparse.Namespace, argv: list[str], rows: list[dict[str, Any]]) -> str:
    studio = [r for r in rows if r["arm"] == "studio"]
    oracle = {r["seed"]: r for r in rows if r["arm"] == "oracle"}
    budgets = (
        f"{args.env_id}, {args.labels} labels, {args.total_steps} env steps, "
        f"{args.steps_per_round} steps per round, --max-minutes {args.max_minutes}, "
        f"seeds {args.seeds}, prefer {args.prefer}"
        + (f", steps per label {args.steps_per_label}" if args.steps_per_label else "")
        + (f", trainer flags `{args.train_args}`" if args.train_args else "")
    )
    md = header("A person teaches the agent through the studio", "studio_session", argv, budgets)
    md += f"Plan: `{PLAN}`. Trainer commands:\n\n"
    md += "".join(f"- `{r['trainer_command']}`\n" for r in rows if "trainer_command" in r)
    md += "\n## Sessions\n\n"
    head = [
        "seed",
        "session min",
        "labels/min",
        "answers",
        "undone ok/tried",
        "lost (not stored)",
        "stored",
        "collected",
        "stored after last collect",
        "skips",
        "pairs answered twice",
        "pairs shown again",
        "UI wait %",
        "spinners after 1st",
        "no pair offered s",
        "trainer waited %",
        "label error %",
        "ratings",
        "ended_by",
        "labels (run)",
        "return",
        "oracle return",
    ]
    table = []
    for r in studio:
        o = oracle.get(r["seed"], {})
        table.append(
            [
                r["seed"],
                r["session_s"] / 60,
                r["labels_per_min"],
                r["answers_given"],
                f"{r['undos_ok']}/{r['undos']}",
                r["answers_lost"],
                r["judgements_stored"],
                r["judgements_collected"],
                r["judgements_stored"] - r["judgements_collected"],
                r["skips"],
                r["pairs_answered_twice"],
                r["pairs_shown_again"],
                100 * r["ui_wait_share"],
                r["spinner_after_first"],
                r["empty_s"],
                100 * r["trainer_wait_share"],
                100 * r["label_error"] if r.get("label_error") is not None else "–",
                r["ratings"],
                r["ended_by"],
                r["n_labels"],
                r["true_return"] if r["true_return"] is not None else "–",
                o.get("true_return") if o.get("true_return") is not None else "–",
            ]
        )
    md += md_table(head, table)
    ratios = [
        float(r["true_return"]) / float(oracle[r["seed"]]["true_return"])
        for r in studio
        if r.get("true_return") is not None
        and oracle.get(r["seed"], {}).get("true_return") not in (None, 0)
    ]
    n = len(studio)
    few = f"n={n} seed(s); the plan needs 3 for a verdict"

    def verdict(ok: bool, measured: bool = True) -> str:
        if not measured:
            return "not measured"
        return ("met" if ok else "missed") + ("" if n >= 3 else f" ({few})")

    tgt = []
    tgt.append(
        [
            "every answer counts except those undone",
            "; ".join(
                f"s{r['seed']}: {r['judgements_collected']} collected of "
                f"{r['answers_expected']} (given − undone)"
                for r in studio
            ),
            verdict(all(r["judgements_collected"] == r["answers_expected"] for r in studio), n > 0),
        ]
    )
    tgt.append(
        [
            "0 pairs asked twice",
            fmt_ci(_vals(studio, "pairs_shown_again"), n="never")
            + " shown again; "
            + fmt_ci(_vals(studio, "pairs_answered_twice"), n="never")
            + " answered twice",
            verdict(
                all(r["pairs_shown_again"] == 0 and r["pairs_answered_twice"] == 0 for r in studio),
                n > 0,
            ),
        ]
    )
    tried = sum(r["undos"] for r in studio)
    tgt.append(
        [
            "100% of undos within the grace period succeed",
            f"{sum(r['undos_ok'] for r in studio)} of {tried}",
            verdict(all(r["undos_ok"] == r["undos"] for r in studio), tried > 0),
        ]
    )
    ui = [100 * x for x in _vals(studio, "ui_wait_share")]
    tgt.append(
        [
            "person waits on the UI < 2% of the session",
            fmt_ci(ui, 2, n="never") + " %",
            verdict(bool(ui) and mean_ci(ui)[0] < 2 and max(ui) < 2, bool(ui)),
        ]
    )
    tgt.append(
        [
            "no spinner after the first pair",
            f"{sum(r['spinner_after_first'] for r in studio)} spinners",
            verdict(all(r["spinner_after_first"] == 0 for r in studio), n > 0),
        ]
    )
    level = 1 - 0.05 / args.looks  # Bonferroni over the plan's looks at this target
    m, h = mean_ci([100 * x for x in ratios], level)
    tgt.append(
        [
            "return ≥ 80% of the oracle's at equal labels",
            (
                fmt_ci([100 * x for x in ratios], 1)
                + f" % (95% t-CI); {100 * level:.1f}% CI over {args.looks} look(s): "
                + f"[{m - h:.1f}, {m + h:.1f}] %"
            )
            if ratios
            else "–",
            return_verdict(m - h, m + h) + ("" if n >= 3 or not ratios else f" ({few})")
            if ratios
            else "not measured",
        ]
    )
    big = [r for r in studio if args.labels >= 200]
    tgt.append(
        [
            "Hopper session of ≥ 200 labels in ≤ 40 min",
            "; ".join(
                f"s{r['seed']}: {r['answers_expected']} labels in {r['session_s'] / 60:.1f} min"
                for r in studio
            ),
            verdict(
                all(r["answers_expected"] >= 200 and r["session_s"] <= 2400 for r in big),
                bool(big) and args.env_id.startswith("Hopper"),
            ),
        ]
    )
    md += "\n## Targets\n\n" + md_table(["target", "measured", "verdict"], tgt)
    md += (
        "\nDefinitions. *Session*: from opening the owner link to the person's stop (label budget "
        "met and nothing left to answer, the run ended, or --max-minutes + 2 passed). *UI wait*: "
        "per pair on screen, the time until the answer keys opened beyond the clips' own playing "
        "time (the longer clip; 1 s minimum; 1 s for a pair shown again after a skip or undo), "
        "plus the time from each key press until the next pair or the empty state was on screen. "
        "*No pair offered*: the Compare view's empty state (the person waits on the trainer). "
        "*Trainer waited*: share of the session the latest round's status was 'waiting' "
        "(`store.rounds.all()`, polled every 0.5 s). *Collected*: the person's judgements not "
        "undone at or below the trainer's cursor. *Pairs shown again*: shows of a pair beyond the first, "
        "less the person's own skips and successful undos of it. *Labels/min*: answers given "
        "less those undone, per minute of session.\n"
    )
    md += _groups_section(rows) + _rank_section(rows) + _target_section(rows)
    errs = [e for r in rows for e in r.get("page_errors", [])]
    if errs:
        md += "\nPage errors: " + "; ".join(f"`{e[:120]}`" for e in errs[:5]) + "\n"
    return md


def _pairs_error(k: int, n: int) -> tuple[float | None, str]:
    """The pairwise sessions' label error, k wrong of the n answers they kept: the upper end of
    its 95 % Wilson interval (the library's :func:`wilson_interval`) and its text for the
    verdict line; (None, a sentence) when they kept no answers. Wilson's interval of 0 of 0 is
    the whole of [0, 1], and a bound of 1 would let any error count as "within": with no
    answers the pairs' error is unknown and there is no verdict on it."""
    if n == 0:
        return None, "pairs – (0/0: the pairwise sessions kept no answers)"
    upper = wilson_interval(k, n)[1]
    return upper, f"pairs {100 * k / n:.1f} % ({k}/{n}; 95 % Wilson upper end {100 * upper:.1f} %)"


_NOTHING_LABELLED = (
    "\nThe pairwise sessions labelled nothing (0 labels/min): no ratio, no verdict.\n"
)
"""The Groups and Rank sections' close when no pairwise session has labels per minute."""


def _no_labels(what: str, labels: int, pairs_n: int) -> str | None:
    """The verdict when one side has nothing to compare: no labels of ``what``, or no pairwise
    answers kept (None when both sides have some)."""
    if pairs_n == 0:
        return "no verdict (no pairwise answers kept: the pairs' label error is unknown)"
    if labels == 0:
        return f"no verdict (no {what} labels: the {what} label error is unknown)"
    return None


def _groups_section(rows: list[dict[str, Any]]) -> str:
    """The Groups-view sessions against the pairwise sessions (Amendment 5b's verdict)."""
    groups = [r for r in rows if r["arm"] == "groups"]
    pairs = [r for r in rows if r["arm"] == "studio" and r.get("answers_kept") is not None]
    if not groups:
        return ""
    head = [
        "view",
        "seed",
        "session min",
        "answers",
        "labels",
        "labels/answer",
        "mean clips/answer",
        "labels/min",
        "label error %",
        "viewing s",
        "clips loading s",
        "ended_by",
        "return",
    ]
    table = [
        [
            "groups",
            r["seed"],
            r["session_s"] / 60,
            r["group_judgements"],
            r["labels"],
            r["labels_per_answer"],
            r["mean_clips"],
            r["labels_per_min"],
            100 * r["label_error"],
            r["watch_s"],
            r["clips_load_s"],
            r["ended_by"],
            r["true_return"] if r.get("true_return") is not None else "–",
        ]
        for r in groups
    ] + [
        [
            "pairs",
            r["seed"],
            r["session_s"] / 60,
            r["answers_given"],
            r["answers_kept"],
            1,
            2,
            r["labels_per_min"],
            100 * r["label_error"],
            "–",
            "–",
            r["ended_by"],
            r["true_return"] if r.get("true_return") is not None else "–",
        ]
        for r in pairs
    ]
    md = "\n## Groups view against pairs (paper 000)\n\n" + md_table(head, table)
    if not pairs:
        return md + "\nNo pairwise session in these rows: no ratio.\n"
    top = max(r["labels_per_min"] for r in pairs)
    if top <= 0:
        return md + _NOTHING_LABELLED
    ratios = [r["labels_per_min"] / top for r in groups]
    k = sum(int(r["label_errors"]) for r in pairs)
    n = sum(int(r["answers_kept"]) for r in pairs)
    g_n = sum(int(r["labels"]) for r in groups)
    g_err = sum(int(r["label_errors"]) for r in groups) / max(1, g_n)
    upper, pairs_text = _pairs_error(k, n)
    fast = bool(ratios) and min(ratios) >= 3
    known = upper is not None and g_n > 0
    equal = known and upper is not None and g_err <= upper
    within = ("yes" if equal else "no") if known else "unknown"
    verdict = "met" if fast and equal else "missed"
    if len(groups) < 3:
        verdict = f"no verdict (n={len(groups)} groups seed(s); the plan needs 3)"
    verdict = _no_labels("groups", g_n, n) or verdict
    g_text = f"{100 * g_err:.1f} %" if g_n else "– (no labels)"
    md += (
        f"\nGroups labels/min against the highest pairwise seed ({top:.2f}/min): "
        + ", ".join(f"s{r['seed']} {x:.2f}×" for r, x in zip(groups, ratios, strict=True))
        + f". Label error: groups {g_text} (pooled labels) against {pairs_text}. "
        f"Target ≥ 3× at equal error: **{verdict}** "
        f"(≥ 3× on every seed: {'yes' if fast else 'no'}; error within: {within}).\n"
    )
    return md


def _rank_section(rows: list[dict[str, Any]]) -> str:
    """The Rank-view sessions against the Compare sessions beside them (Amendment 11)."""
    rank = [r for r in rows if r["arm"] == "rank"]
    pairs = [r for r in rows if r["arm"] == "studio" and r.get("answers_kept") is not None]
    if not rank:
        return ""
    head = [
        "view",
        "seed",
        "session min",
        "answers kept",
        "labels",
        "labels/answer",
        "labels/min",
        "answers/min",
        "label error %",
        "viewing s (clips until all played)",
        "undone ok/tried",
        "no query offered s",
        "ended_by",
    ]
    table = [
        [
            "rank",
            r["seed"],
            r["session_s"] / 60,
            r["rankings"],
            r["labels"],
            r["labels_per_answer"],
            r["labels_per_min"],
            r["answers_per_min"],
            100 * r["label_error"],
            r["watch_s"],
            f"{r['undos_ok']}/{r['undos']}",
            r["nothing_offered_s"],
            r["ended_by"],
        ]
        for r in rank
    ] + [
        [
            "pairs",
            r["seed"],
            r["session_s"] / 60,
            r["answers_kept"],
            r["answers_kept"],
            1,
            r["labels_per_min"],
            r["labels_per_min"],
            100 * r["label_error"],
            "–",
            f"{r['undos_ok']}/{r['undos']}",
            r["empty_s"],
            r["ended_by"],
        ]
        for r in pairs
    ]
    md = "\n## Rank view against pairs (issue 57)\n\n" + md_table(head, table)
    if not pairs:
        return md + "\nNo pairwise session in these rows: no ratio.\n"
    top = max(r["labels_per_min"] for r in pairs)
    if top <= 0:
        return md + _NOTHING_LABELLED
    ratios = [r["labels_per_min"] / top for r in rank]
    k = sum(int(r["label_errors"]) for r in pairs)
    n = sum(int(r["answers_kept"]) for r in pairs)
    rk = sum(int(r["label_errors"]) for r in rank)
    rn = sum(int(r["labels"]) for r in rank)
    r_err = rk / max(1, rn)
    upper, pairs_text = _pairs_error(k, n)
    fast = bool(ratios) and min(ratios) >= 3
    known = upper is not None and rn > 0
    equal = known and upper is not None and r_err <= upper
    verdict = "met" if fast and equal else "missed"
    if len(rank) < 3 or len(pairs) < 3:
        verdict = f"no verdict (n={len(rank)} rank, {len(pairs)} pairs seed(s); the plan needs 3)"
    verdict = _no_labels("rank", rn, n) or verdict
    within = ("yes" if equal else "no") if known else "unknown"
    below = ("yes" if r_err <= k / n else "no") if known else "unknown"
    md += (
        f"\nRank labels/min against the highest pairwise seed ({top:.2f}/min): "
        + ", ".join(f"s{r['seed']} {x:.2f}×" for r, x in zip(rank, ratios, strict=True))
        + " (answers/min: "
        + ", ".join(f"s{r['seed']} {r['answers_per_min'] / top:.2f}×" for r in rank)
        + f"). Label error: rank {100 * r_err:.1f} % ({rk}/{rn} pooled labels) against "
        f"{pairs_text}. "
        f"Target ≥ 3× the pairwise labels/min at a label error no higher: **{verdict}** "
        f"(≥ 3× on every seed: {'yes' if fast else 'no'}; error within: {within}; "
        f"rank's pooled error at or below pairs' point estimate: {below}).\n"
    )
    return md


def _target_section(rows: list[dict[str, Any]]) -> str:
    """The new-behaviour demonstration (Amendment 5c): backwards speed of each arm."""
    direct = [r for r in rows if r["arm"] == "direct"]
    if not direct:
        return ""
    head = ["seed", "env", "env steps", "studio m/s", "direct PPO m/s", "untrained m/s", "toward"]
    table = [
        [
            r["seed"],
            r["env_id"],
            r["steps"],
            f"{r['studio_speed']:.3f} ± {r['studio_speed_std']:.3f}",
            f"{r['direct_speed']:.3f} ± {r['direct_speed_std']:.3f}",
            f"{r['untrained_speed']:.3f} ± {r['untrained_speed_std']:.3f}",
            f"{100 * r['toward_target']:.0f} %",
        ]
        for r in direct
    ]
    return (
        "\n## A behaviour the env's reward does not hold: running backwards\n\n"
        + md_table(head, table)
        + "\nBackwards speed = −(mean x velocity) over 5 deterministic episodes of 1,000 steps "
        "(± std over episodes). *Direct PPO*: the studio run's PPO hyperparameters, trained by "
        "SB3 on reward = −x velocity for the same env steps and seed. *Toward*: (studio − "
        "untrained) / (direct − untrained). One seed: a demonstration, no verdict.\n"
    )


def return_verdict(lo: float, hi: float) -> str:
    """The return target (≥ 80 % of the oracle) on the looks-corrected interval [lo, hi] (%):
    met when all of it clears 80, missed when all of it is below, else not shown (a NaN bound,
    from one seed, shows nothing)."""
    if not (math.isfinite(lo) and math.isfinite(hi)):
        return "not shown: one seed gives no interval"
    if lo >= 80:
        return "met"
    if hi < 80:
        return "missed"
    return "not shown: the corrected interval contains 80 %"
