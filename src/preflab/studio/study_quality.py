"""Whom to trust in a study (issue #61): per person — answers, attention-check accuracy, agreement
with the crowd's label, SML weight, median response time, side bias, flags — and for the study
Krippendorff's α with a bootstrap interval, the SML's estimated crowd accuracy and labels per
hour. Pure functions over answer rows, so the flag rules are tested on synthetic streams."""

from __future__ import annotations

import math
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field

import numpy as np

from preflab.aggregate.agreement import alpha_interval
from preflab.aggregate.majority import majority
from preflab.aggregate.sml import sml
from preflab.errors import DataError
from preflab.studio.study_config import StudyConfig


@dataclass(frozen=True)
class Answer:
    """One counted answer of a pair query."""

    annotator_id: str
    query_id: str
    p: float | None
    """P(a ≻ b): 1 left, 0 right, 0.5 equal, None can't tell."""
    response_time_s: float | None
    created_at: float


@dataclass(frozen=True)
class PersonStats:
    """What the Owner page and the export show of one person."""

    annotator_id: str
    answers: int
    gold_answered: int
    gold_correct: int
    gold_accuracy: float | None
    agreement: float | None
    """Share of their decisive answers that match the majority of the other people's decisive
    answers to the same pair (pairs where the others tie or nobody else answered left out)."""
    sml_weight: float | None
    sml_accuracy: float | None
    median_response_s: float | None
    left_share: float | None
    side_z: float | None
    """|left − n/2| / (√n / 2) over their decisive answers."""
    flags: tuple[str, ...] = field(default_factory=tuple)
    """'gold' (failed too many checks), 'fast' (faster than the clips play), 'side' (one side
    far more than chance), 'crowd' (agrees with the others less than ``min_agreement``)."""


@dataclass(frozen=True)
class CrowdStats:
    """The study as a whole."""

    people: tuple[PersonStats, ...]
    alpha: float | None
    alpha_low: float | None
    alpha_high: float | None
    alpha_units: int
    aggregator: str
    """'sml' (k ≥ 3 and at least three people) or 'majority'."""
    crowd_accuracy: float | None
    """Mean SML-estimated accuracy of the people (None with majority)."""
    labels: dict[str, int]
    """query id → the crowd's label (+1 left, −1 right) where it has one."""
    labels_per_hour: float | None


def side(p: float | None) -> int:
    """+1 left (a), −1 right (b), 0 equal or can't tell."""
    if p is None or p == 0.5:
        return 0
    return 1 if p > 0.5 else -1


def flags_of(
    *,
    answers: int,
    gold_answered: int,
    gold_correct: int,
    median_response_s: float | None,
    decisive: int,
    left: int,
    config: StudyConfig,
    clip_s: float,
    compared: int = 0,
    agreed: int = 0,
) -> tuple[tuple[str, ...], float | None]:
    """The flag rules; returns (flags, side z-score). ``compared``/``agreed``: decisive answers
    that could be compared with the others' majority, and how many matched it."""
    out = []
    failed = gold_answered - gold_correct
    if gold_answered >= config.min_gold and failed / gold_answered > config.gold_fail_share:
        out.append("gold")
    if (
        answers >= config.min_answers
        and median_response_s is not None
        and clip_s > 0
        and median_response_s < clip_s
    ):
        out.append("fast")
    z = None
    if decisive > 0:
        z = abs(left - decisive / 2) / (math.sqrt(decisive) / 2)
        if decisive >= config.min_answers and z > config.side_z:
            out.append("side")
    if compared >= config.min_answers and agreed / compared < config.min_agreement:
        out.append("crowd")
    return tuple(out), z


def crowd_stats(
    answers: Sequence[Answer],
    *,
    gold: Mapping[str, float],
    config: StudyConfig,
    clip_s: float,
    people: Iterable[str],
    excluded: Iterable[str] = (),
    rng: np.random.Generator,
    n_boot: int = 500,
) -> CrowdStats:
    """Per-person and study statistics. Excluded people get their own row (and flags) but their
    answers count neither in the crowd's labels, the SML nor α."""
    people = list(dict.fromkeys(people))
    gone = set(excluded)
    by_person: dict[str, list[Answer]] = {a: [] for a in people}
    for a in answers:
        by_person.setdefault(a.annotator_id, []).append(a)
    counted = [a for a in answers if a.annotator_id not in gone and side(a.p) != 0]
    # the crowd's labels, over the queries that are not attention checks and the checks alike
    raters = sorted({a.annotator_id for a in counted})
    qids = sorted({a.query_id for a in counted})
    r_ix = {a: i for i, a in enumerate(raters)}
    q_ix = {q: i for i, q in enumerate(qids)}
    votes = np.zeros((len(raters), len(qids)))
    for a in counted:
        votes[r_ix[a.annotator_id], q_ix[a.query_id]] = side(a.p)
    weights: dict[str, float] = {}
    accuracy: dict[str, float] = {}
    aggregator = "majority"
    labels_arr = majority(votes) if qids else np.zeros(0, np.int8)
    if config.overlap >= 3 and len(raters) >= 3:
        try:
            res = sml(votes)
        except DataError:
            res = None
        if res is not None:
            aggregator = "sml"
            labels_arr = res.labels
            for rater, i in r_ix.items():
                weights[rater] = float(res.weights[i])
                if not math.isnan(float(res.accuracy[i])):
                    accuracy[rater] = float(res.accuracy[i])
    labels = {q: int(labels_arr[i]) for q, i in q_ix.items() if labels_arr[i] != 0}
    sums: dict[str, int] = {}  # query → sum of the counted decisive votes
    for a in counted:
        sums[a.query_id] = sums.get(a.query_id, 0) + side(a.p)
    rows = []
    for aid in by_person:
        mine = by_person[aid]
        g_ans = [a for a in mine if a.query_id in gold]
        g_ok = sum(side(a.p) == side(gold[a.query_id]) for a in g_ans)
        times = [a.response_time_s for a in mine if a.response_time_s is not None]
        med = float(np.median(times)) if times else None
        dec = [side(a.p) for a in mine if side(a.p) != 0]
        left = sum(s > 0 for s in dec)
        agree = []
        for a in mine:
            mine_side = side(a.p)
            if mine_side == 0 or a.query_id not in sums:
                continue
            own = mine_side if aid not in gone else 0  # an excluded vote is not in the sum
            others = sums[a.query_id] - own
            if others != 0:
                agree.append((others > 0) == (mine_side > 0))
        flags, z = flags_of(
            answers=len(mine),
            gold_answered=len(g_ans),
            gold_correct=g_ok,
            median_response_s=med,
            decisive=len(dec),
            left=left,
            config=config,
            clip_s=clip_s,
            compared=len(agree),
            agreed=sum(agree),
        )
        rows.append(
            PersonStats(
                annotator_id=aid,
                answers=len(mine),
                gold_answered=len(g_ans),
                gold_correct=g_ok,
                gold_accuracy=g_ok / len(g_ans) if g_ans else None,
                agreement=sum(agree) / len(agree) if agree else None,
                sml_weight=weights.get(aid),
                sml_accuracy=accuracy.get(aid),
                median_response_s=med,
                left_share=left / len(dec) if dec else None,
                side_z=z,
                flags=flags,
            )
        )
    units: dict[str, list[int]] = {}
    for a in counted:
        units.setdefault(a.query_id, []).append(side(a.p))
    ai = alpha_interval(list(units.values()), rng=rng, n_boot=n_boot)
    times_all = [a.created_at for a in counted]
    per_hour = None
    if len(times_all) >= 2 and max(times_all) > min(times_all):
        per_hour = len(times_all) / ((max(times_all) - min(times_all)) / 3600.0)
    crowd_acc = float(np.mean(list(accuracy.values()))) if accuracy else None
    return CrowdStats(
        people=tuple(rows),
        alpha=_num(ai.alpha),
        alpha_low=_num(ai.low),
        alpha_high=_num(ai.high),
        alpha_units=ai.units,
        aggregator=aggregator,
        crowd_accuracy=crowd_acc,
        labels=labels,
        labels_per_hour=per_hour,
    )


def _num(x: float) -> float | None:
    return None if math.isnan(x) else float(x)
