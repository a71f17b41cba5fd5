"""The round warnings as pure functions of a tally: each case names its cause and fix."""

from __future__ import annotations

import math
from dataclasses import replace
from pathlib import Path

from preflab.config import TrainConfig
from preflab.loop.diagnosis import (
    RoundTally,
    no_label_hint,
    round_spans,
    round_warnings,
    settle_warnings,
)
from preflab.rundir.runwarnings import RunWarnings
from preflab.testing.factories import make_judgement

BASE = RoundTally(
    config=TrainConfig(),
    run_dir=Path("runs/x"),
    round=2,
    n_labels=0,
    n_ties=0,
    n_queries=5,
    asked=4,
    judgements=(),
    n_ratings=0,
    streams_ratings=False,
    source_persists=False,
    warns_without_labels=True,
    fitted=False,
    n_recent=10,
    reward_accuracy=math.nan,
)


def kinds(t: RoundTally) -> list[str]:
    return [k for k, _ in round_warnings(t)]


def test_no_labels_says_why_in_cli_terms() -> None:
    assert no_label_hint(BASE) == ": the source answered none of the 4 queries asked"
    people = replace(BASE, source_persists=True)
    assert "preflab studio runs/x" in no_label_hint(people)
    skipped = replace(BASE, judgements=(make_judgement("j", "q", "u", None),))
    assert "'no answer'" in no_label_hint(skipped)
    rated = replace(BASE, n_ratings=7, streams_ratings=True)
    assert "7 ratings came in" in no_label_hint(rated) and "--scalar.window" in no_label_hint(rated)
    live = replace(BASE, streams_ratings=True, n_queries=0, asked=0)
    assert "live phase" in no_label_hint(live)
    assert kinds(BASE) == ["no_labels"]


def test_people_get_time_and_nothing_asked_is_no_warning() -> None:
    assert kinds(replace(BASE, warns_without_labels=False)) == []
    assert kinds(replace(BASE, n_queries=0, asked=0)) == []


def test_only_ties_from_the_second_round_and_undefined_metrics() -> None:
    ties = replace(BASE, n_labels=6, n_ties=6)
    assert kinds(ties) == ["only_ties"]
    assert kinds(replace(ties, round=0)) == []
    assert kinds(replace(ties, n_ties=5)) == []
    nan = replace(BASE, n_labels=6, fitted=True)
    assert kinds(nan) == ["nan_metrics"]
    assert kinds(replace(nan, reward_accuracy=0.8)) == []
    assert kinds(replace(nan, n_recent=1)) == []


def _run_warnings(history: list[dict[str, float]]) -> RunWarnings:
    """The warnings of a run whose rounds had ``history``'s reward accuracies, said the way
    the loop says them (round_warnings each round), brought to the run's end."""
    w = RunWarnings()
    tallies = [
        replace(
            BASE,
            round=int(row["round"]),
            n_labels=6,
            fitted=True,
            n_recent=14,
            reward_accuracy=row["reward_accuracy"],
        )
        for row in history
    ]
    for t in tallies:
        for kind, message in round_warnings(t):
            w.warn(kind, message)
    w.warn("judge", "2 answers were unreadable")  # another kind: untouched
    settle_warnings(w, history, tallies[-1])
    return w


def test_nan_metrics_of_early_rounds_are_no_warning_once_measured() -> None:
    # rounds 0-1 had too few distinct segments (nan); rounds 2-3 measured 0.6 and 0.596
    acc = [math.nan, math.nan, 0.6, 0.596]
    w = _run_warnings([{"round": r, "reward_accuracy": a} for r, a in enumerate(acc)])
    assert "nan_metrics" not in w and w.messages == ["2 answers were unreadable"]


def test_nan_metrics_at_the_end_name_their_rounds() -> None:
    acc = [math.nan, math.nan, 0.6, math.nan, math.nan]
    w = _run_warnings([{"round": r, "reward_accuracy": a} for r, a in enumerate(acc)])
    (nan,) = [m for m in w.messages if "nan" in m]
    assert nan.startswith(
        "reward_accuracy and reward_corr are nan at the end of the run (rounds 0–1, 3–4, the "
        "last included): the 14 most recent segments all have the same true return"
    )
    assert w.messages[-1] == "2 answers were unreadable"  # in the order they came
    assert round_spans([0, 1, 4, 6, 7, 8]) == "0–1, 4, 6–8" and round_spans([3]) == "3"


def _ties_run(ties_at_end: bool) -> RunWarnings:
    """Round 0 without labels, rounds 1-3 with 6 labels, all ties (warned from round 1); the
    last round's 8 labels all ties too, or one of them no tie."""
    w = RunWarnings()
    history = [{"round": r, "n_labels": [0, 6, 6, 6, 8][r]} for r in range(5)]
    tallies = [replace(BASE, round=r, n_labels=6, n_ties=6) for r in range(1, 4)]
    tallies.append(replace(BASE, round=4, n_labels=8, n_ties=8 if ties_at_end else 7))
    for t in tallies:
        for kind, message in round_warnings(t):
            w.warn(kind, message)
    assert "only_ties" in w
    settle_warnings(w, history, tallies[-1])
    return w


def test_only_ties_of_early_rounds_are_no_warning_once_a_label_is_not_a_tie() -> None:
    w = _ties_run(ties_at_end=False)
    assert "only_ties" not in w and w.messages == []


def test_only_ties_at_the_end_name_their_rounds() -> None:
    w = _ties_run(ties_at_end=True)
    (ties,) = w.messages
    assert ties.startswith(
        "all 8 labels are ties (p = 0.5) at the end of the run (rounds 1–4, the last "
        "included): every pair of segments compared had the same true return"
    )
    assert w.count("only_ties") == 4  # said once, counted each round
