"""A study's report (issue #61): the quality statistics of :mod:`preflab.studio.study_quality`
over the store's answers, each participant's standing, and the payments table (platform ids,
time on task, answers counted, completion code shown). The Owner page, the export and
``preflab studio study --payments`` read it."""

from __future__ import annotations

import csv
import io
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np

from preflab.kinds import kind_of
from preflab.records import Judgement
from preflab.store import FeedbackStore
from preflab.store.studies import Participant, Study
from preflab.studio import study as S
from preflab.studio.study_config import StudyConfig
from preflab.studio.study_quality import Answer, CrowdStats, crowd_stats

PAYMENT_COLUMNS = (
    "annotator_id",
    "PROLIFIC_PID",
    "STUDY_ID",
    "SESSION_ID",
    "pid",
    "enrolled_at",
    "consent_at",
    "minutes_on_task",
    "answers_counted",
    "completed",
    "completion_code_shown",
    "excluded",
    "flags",
)
"""The payments table's columns, in order."""


@dataclass(frozen=True)
class Report:
    """What the owner sees of a study."""

    study: Study
    config: StudyConfig
    participants: tuple[Participant, ...]
    stats: CrowdStats
    minutes: dict[str, float]
    """annotator id → minutes on task."""
    clip_s: float
    """Seconds the clips of a pair take to play (the 'fast' rule's bound)."""


def answers_of(store: FeedbackStore, people: set[str]) -> tuple[list[Answer], dict[str, Any]]:
    """The counted answers of ``people`` to two-sided queries, and those queries by id."""
    return _pair_answers(store, _judgements_of(store, people))


def _judgements_of(store: FeedbackStore, people: set[str]) -> list[Judgement]:
    """The judgements of ``people`` that count (undone ones left out), oldest first."""
    return [j for _s, j in store.answers.judgements() if j.annotator_id in people]


def _pair_answers(
    store: FeedbackStore, rows: list[Judgement]
) -> tuple[list[Answer], dict[str, Any]]:
    qs = {q.id: q for q in store.queries.get_many(sorted({j.query_id for j in rows}))}
    out = [
        Answer(j.annotator_id, j.query_id, j.p, j.response_time_s, j.created_at)
        for j in rows
        if j.query_id in qs and not kind_of(qs[j.query_id]).streams
    ]
    return out, qs


def minutes_on_task(
    people: Sequence[Participant], judgements: Sequence[Judgement]
) -> dict[str, float]:
    """annotator id → minutes on task, as :func:`preflab.studio.study.progress` counts them
    (from :func:`~preflab.studio.study.started_at` to their latest answer that counts), for
    all ``people`` at once from their ``judgements`` that count, oldest first (one read of the
    store instead of two per person)."""
    last: dict[str, float] = {}
    for j in judgements:  # oldest first: the last one seen is the latest
        last[j.annotator_id] = j.created_at
    out = {}
    for p in people:
        start = S.started_at(p)
        end = last.get(p.annotator_id, start)
        out[p.annotator_id] = max(0.0, (end - start) / 60.0) if start and end else 0.0
    return out


def clip_seconds(store: FeedbackStore, queries: dict[str, Any], fps: float) -> float:
    """Median over the answered pairs of the longer side's length at ``fps`` (both clips of a
    pair play side by side)."""
    ids = sorted({s for q in queries.values() for s in (*q.a, *q.b)})
    if not ids:
        return 0.0
    info = store.segments.info(ids)
    spans = [
        max(
            sum(info.get(s, {}).get("length", 0) for s in q.a),
            sum(info.get(s, {}).get("length", 0) for s in q.b),
        )
        / fps
        for q in queries.values()
    ]
    return float(np.median(spans)) if spans else 0.0


def report(store: FeedbackStore, *, fps: float = 30.0, n_boot: int = 500) -> Report | None:
    """The study's report, or None when the run has no study."""
    loaded = S.load(store)
    if loaded is None:
        return None
    study, config = loaded
    people = store.studies.participants(study.id)
    rows = _judgements_of(store, {p.annotator_id for p in people})
    answers, queries = _pair_answers(store, rows)
    clip_s = config.clip_s or clip_seconds(store, queries, fps)
    stats = crowd_stats(
        answers,
        gold=store.studies.gold(),
        config=config,
        clip_s=clip_s,
        people=[p.annotator_id for p in people],
        excluded={p.annotator_id for p in people if p.excluded_at is not None},
        rng=np.random.default_rng(0),
        n_boot=n_boot,
    )
    minutes = minutes_on_task(people, rows)
    return Report(study, config, tuple(people), stats, minutes, clip_s)


def payments(r: Report) -> list[dict[str, Any]]:
    """One row per participant who consented (the payments table)."""
    by_id = {s.annotator_id: s for s in r.stats.people}
    rows = []
    for p in r.participants:
        if p.consent_at is None:
            continue
        s = by_id.get(p.annotator_id)
        rows.append(
            {
                "annotator_id": p.annotator_id,
                **{k: p.platform.get(k, "") for k in S.PLATFORM_KEYS},
                "enrolled_at": round(p.enrolled_at, 3),
                "consent_at": round(p.consent_at, 3),
                "minutes_on_task": round(r.minutes.get(p.annotator_id, 0.0), 2),
                "answers_counted": 0 if p.excluded_at is not None else (s.answers if s else 0),
                "completed": p.completed_at is not None,
                "completion_code_shown": r.config.completion_code
                if p.completed_at is not None
                else "",
                "excluded": p.excluded_at is not None,
                "flags": " ".join(s.flags) if s else "",
            }
        )
    return rows


def payments_csv(r: Report) -> str:
    """The payments table as CSV (header first)."""
    buf = io.StringIO()
    w = csv.DictWriter(buf, fieldnames=list(PAYMENT_COLUMNS), lineterminator="\n")
    w.writeheader()
    w.writerows(payments(r))
    return buf.getvalue()


def people_json(r: Report) -> dict[str, Any]:
    """The study's agreement and trust statistics as JSON (study_agreement.json)."""
    s = r.stats
    excluded = {p.annotator_id for p in r.participants if p.excluded_at is not None}
    return {
        "study": r.study.id,
        "config": r.config.to_json(),
        "clip_s": r.clip_s,
        "aggregator": s.aggregator,
        "krippendorff_alpha": s.alpha,
        "alpha_interval_95": [s.alpha_low, s.alpha_high],
        "alpha_units": s.alpha_units,
        "crowd_accuracy_sml": s.crowd_accuracy,
        "labels_per_hour": s.labels_per_hour,
        "people": [
            {
                **{k: v for k, v in vars(p).items() if k != "flags"},
                "flags": list(p.flags),
                "minutes_on_task": r.minutes.get(p.annotator_id, 0.0),
                "excluded": p.annotator_id in excluded,
            }
            for p in s.people
        ],
    }


def export_files(store: FeedbackStore, *, fps: float = 30.0) -> dict[str, str]:
    """The study's files for an export (empty without a study): study_payments.csv and
    study_agreement.json."""
    import json

    r = report(store, fps=fps)
    if r is None:
        return {}
    return {
        "study_payments.csv": payments_csv(r),
        "study_agreement.json": json.dumps(people_json(r), indent=2, allow_nan=False) + "\n",
    }
