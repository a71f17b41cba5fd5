"""Runs that fail and look fine: what a round's feedback says about whether the reward model
can learn, as warnings in CLI terms (each kind said once, loudly: :mod:`preflab.rundir.runwarnings`).

Pure functions of a :class:`RoundTally`, so every message can be checked without a run.
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from preflab.config import TrainConfig
from preflab.records import Judgement
from preflab.rundir.runwarnings import RunWarnings


@dataclass(frozen=True, kw_only=True)
class RoundTally:
    """What a round's warnings are made from."""

    config: TrainConfig
    """The run's configuration."""
    run_dir: Path
    """The run directory (named in the hint for people)."""
    round: int
    """The round just run."""
    n_labels: int
    """Labels of the last fit."""
    n_ties: int
    """Of which ties (p = 0.5)."""
    n_queries: int
    """Queries asked (withdrawn ones included)."""
    asked: int
    """Queries asked and not withdrawn."""
    judgements: tuple[Judgement, ...]
    """Judgements collected."""
    n_ratings: int
    """Real-time ratings collected."""
    streams_ratings: bool
    """The source streams ratings (Pref-GUIDE raters, people in the Rate view)."""
    source_persists: bool
    """The source's answers are in the store already (people)."""
    warns_without_labels: bool
    """The clock wants a warning for a round with 0 labels (people: its waiting lines say so)."""
    fitted: bool
    """The reward model has been fit."""
    n_recent: int
    """Segments the reward metrics were measured on."""
    reward_accuracy: float
    """The round's reward accuracy (nan when undefined)."""


def no_label_hint(t: RoundTally) -> str:
    """Why no labels came, in CLI terms (empty when nothing is known)."""
    c = t.config
    if t.n_ratings:
        return (
            f": {t.n_ratings} ratings came in, but a label compares segments inside "
            f"a window of --scalar.window {c.scalar.window} consecutive rated segments of "
            f"one episode, and no stream of --segment-length {c.segment_length} segments "
            "was that long; use --segment-length 1 or a smaller --scalar.window"
        )
    if t.streams_ratings and not t.source_persists:
        return (
            ": no ratings came in (simulated raters rate only during the live phase, "
            "--policy-reward.live-steps)"
        )
    if not t.judgements and t.asked > 0:
        if t.source_persists:
            return (
                f": nobody answered the {t.asked} queries asked. People answer in the "
                f"studio: run `preflab studio {t.run_dir}` in another terminal, or start "
                "the run with --studio"
            )
        return f": the source answered none of the {t.asked} queries asked"
    if t.judgements and all(j.p is None for j in t.judgements):
        return (
            f": all {len(t.judgements)} judgements were 'no answer' (skipped or "
            "unreadable), which give no labels"
        )
    return ""


def round_warnings(t: RoundTally) -> list[tuple[str, str]]:
    """(kind, message) for each thing wrong with the round: no labels, only ties, or reward
    metrics that are undefined."""
    out: list[tuple[str, str]] = []
    if t.n_labels == 0:
        if (t.n_queries or t.n_ratings or t.streams_ratings) and t.warns_without_labels:
            out.append(("no_labels", f"round {t.round} ended with 0 labels" + no_label_hint(t)))
    elif t.n_ties == t.n_labels and t.round >= 1:  # two rounds of evidence
        out.append(("only_ties", f"all {t.n_labels} labels are ties (p = 0.5)" + _ties_why(t)))
    if t.fitted and t.n_recent >= 2 and not math.isfinite(t.reward_accuracy):
        out.append(("nan_metrics", "reward_accuracy and reward_corr are nan" + _nan_why(t)))
    return out


def _ties_why(t: RoundTally) -> str:
    c = t.config
    absorbing = (
        ""
        if c.termination.absorbing
        else (
            "; segments that reach an episode's end are dropped unless "
            "--termination.absorbing keeps them"
        )
    )
    return (
        ": every pair of segments compared "
        "had the same true return, so the reward model has nothing to learn and "
        "reward_accuracy is nan. A reward that is the same at every step does this "
        f"(Acrobot-v1 pays -1 and CartPole-v1 +1 until the episode ends, so every "
        f"{c.segment_length}-step segment inside an episode has the same return"
        f"{absorbing}). Use an env whose reward differs between segments, or "
        "--termination.absorbing with enough --total-steps for episodes to end inside "
        "segments"
    )


def _nan_why(t: RoundTally) -> str:
    return (
        f": the {t.n_recent} most recent segments all have the same true return, so how well "
        "the learned reward orders them cannot be measured (undefined, not bad)"
    )


def round_spans(rounds: Sequence[int]) -> str:
    """Round numbers as runs of consecutive ones: [0, 1, 4, 6, 7, 8] → '0–1, 4, 6–8'."""
    spans: list[list[int]] = []
    for r in sorted(rounds):
        if spans and r == spans[-1][1] + 1:
            spans[-1][1] = r
        else:
            spans.append([r, r])
    return ", ".join(str(a) if a == b else f"{a}–{b}" for a, b in spans)


def settle_warnings(
    warnings: RunWarnings, history: Sequence[Mapping[str, Any]], t: RoundTally
) -> None:
    """Bring the round warnings to the run's end state (``history``: its metrics rows, ``t``:
    the last round's tally). A warning said in one round stays in the summary only while it
    holds: reward metrics that were nan in early rounds (too few distinct segments yet) and
    were measured in the last round are no warning at the end; metrics still nan at the end
    name every round that had them. Likewise labels that were all ties in early rounds are no
    warning once the last round's are not; still all ties at the end, the warning names the
    rounds that had labels (labels only accumulate, so each of those had only ties)."""
    if "only_ties" in warnings:
        _settle_ties(warnings, history, t)
    if "nan_metrics" not in warnings:
        return
    nan = [int(row["round"]) for row in history if _is_nan(row.get("reward_accuracy"))]
    if not history or not _is_nan(history[-1].get("reward_accuracy")):
        warnings.withdraw("nan_metrics")
        return
    warnings.restate(
        "nan_metrics",
        f"reward_accuracy and reward_corr are nan at the end of the run ({_rounds(nan)}, the "
        f"last included){_nan_why(t) if t.n_recent >= 2 else ''}",
    )


def _settle_ties(
    warnings: RunWarnings, history: Sequence[Mapping[str, Any]], t: RoundTally
) -> None:
    """``only_ties`` at the run's end: withdrawn unless the last round's labels are all ties."""
    if t.n_labels == 0 or t.n_ties != t.n_labels:
        warnings.withdraw("only_ties")
        return
    labelled = [int(row["round"]) for row in history if int(row.get("n_labels") or 0) > 0]
    which = f" ({_rounds(labelled)}, the last included)" if labelled else ""
    warnings.restate(
        "only_ties",
        f"all {t.n_labels} labels are ties (p = 0.5) at the end of the run{which}" + _ties_why(t),
    )


def _rounds(rounds: Sequence[int]) -> str:
    """'round 3' or 'rounds 0–1, 3–4'."""
    return f"round {rounds[0]}" if len(rounds) == 1 else f"rounds {round_spans(rounds)}"


def end_warnings(
    warnings: RunWarnings,
    history: Sequence[Mapping[str, Any]],
    t: RoundTally,
    ended_by: str,
    true_return: float,
) -> tuple[str, ...]:
    """The run's warnings at its end: a run that ended without labels, the round warnings
    brought to the end state (:func:`settle_warnings`) and a final evaluation without a finite
    return (``t``: the last round's tally)."""
    if t.n_labels == 0:
        warnings.warn(
            "ended_without_labels",
            f"the run ended ({ended_by}) with 0 labels: the policy trained on an untrained "
            f"reward, so its return says nothing about preference learning" + no_label_hint(t),
        )
    settle_warnings(warnings, history, t)  # only what holds
    if not math.isfinite(true_return):
        warnings.warn(
            "nan_return",
            f"true_return is nan: the {t.config.eval_episodes} evaluation episode(s) "
            "gave no finite return; check the env's rewards and --eval-episodes",
        )
    return tuple(warnings.messages)


def _is_nan(value: object) -> bool:
    """A metric that was not measured (nan or missing)."""
    return not isinstance(value, (int, float)) or not math.isfinite(value)
