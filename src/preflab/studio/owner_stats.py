"""What the owner sees about annotators: agreement on shared queries and SML weights."""

from __future__ import annotations

import logging
from collections import defaultdict
from collections.abc import Sequence
from itertools import combinations
from statistics import median
from typing import Any

from preflab.errors import PrefLabError
from preflab.records import Judgement

log = logging.getLogger(__name__)


def latest_votes(judgements: Sequence[Judgement]) -> dict[str, dict[str, int]]:
    """query id → annotator id → vote (+1 a preferred, −1 b preferred; ties and skips left
    out), the latest judgement of each annotator per query counting."""
    latest: dict[tuple[str, str], Judgement] = {}
    for j in judgements:
        key = (j.query_id, j.annotator_id)
        if key not in latest or j.created_at >= latest[key].created_at:
            latest[key] = j
    votes: dict[str, dict[str, int]] = defaultdict(dict)
    for (qid, aid), j in latest.items():
        if j.p is not None and j.p != 0.5:
            votes[qid][aid] = 1 if j.p > 0.5 else -1
    return votes


def agreement(votes: dict[str, dict[str, int]]) -> tuple[dict[str, float | None], list[dict]]:
    """Per annotator: share of agreeing votes over every query shared with someone else; and
    the pairwise table [{a, b, shared, agreed}]."""
    pair_counts: dict[tuple[str, str], list[int]] = defaultdict(lambda: [0, 0])
    for by_ann in votes.values():
        for x, y in combinations(sorted(by_ann), 2):
            c = pair_counts[(x, y)]
            c[0] += 1
            c[1] += int(by_ann[x] == by_ann[y])
    per: dict[str, list[int]] = defaultdict(lambda: [0, 0])
    pairs = []
    for (x, y), (shared, agreed) in sorted(pair_counts.items()):
        pairs.append({"a": x, "b": y, "shared": shared, "agreed": agreed})
        for z in (x, y):
            per[z][0] += shared
            per[z][1] += agreed
    return {a: (g / s if s else None) for a, (s, g) in per.items()}, pairs


def sml_weights(votes: dict[str, dict[str, int]]) -> dict[str, float]:
    """SML weights (preflab.aggregate.sml) of the annotators of queries that ≥ 3 people
    answered; empty until there are at least 3 such annotators."""
    shared = {q: v for q, v in votes.items() if len(v) >= 3}
    annotators = sorted({a for v in shared.values() for a in v})
    if len(annotators) < 3:
        return {}
    import numpy as np

    from preflab.aggregate import sml

    index = {a: i for i, a in enumerate(annotators)}
    m = np.zeros((len(annotators), len(shared)))
    for k, v in enumerate(shared.values()):
        for a, vote in v.items():
            m[index[a], k] = vote
    try:
        result = sml(m)
    except PrefLabError as exc:
        log.info("no SML weights yet: %s", exc)
        return {}
    return {a: float(result.weights[i]) for a, i in index.items()}


def owner_overview(
    annotators: Sequence[Any], activity: dict, judgements: Sequence[Judgement]
) -> tuple[list[dict], list[dict]]:
    """The owner overview: a row per annotator (counts from ``activity``: id → (judgements,
    ratings); role; share of agreeing votes; SML weight) and the pairwise agreement table
    (:func:`agreement`), from one count of the votes and of their agreement."""
    votes = latest_votes(judgements)
    agree, pairs = agreement(votes)
    return _rows(annotators, activity, agree, sml_weights(votes)), pairs


def _rows(
    annotators: Sequence[Any],
    activity: dict,
    agree: dict[str, float | None],
    weights: dict[str, float],
) -> list[dict]:
    rows = []
    for a in annotators:
        n_j, n_r = activity.get(a.id, (0, 0))
        rows.append(
            {
                "id": a.id,
                "name": a.name,
                "role": "owner" if a.meta.get("role") == "owner" else "annotator",
                "source": a.source,
                "n_judgements": n_j,
                "n_ratings": n_r,
                "agreement": agree.get(a.id),
                "sml_weight": weights.get(a.id),
            }
        )
    return rows


# ----- activity per annotator (issue #25: the owner page) --------------------------------------
RATE_WINDOW_S = 600.0
"""Answers per minute are counted over the last 10 minutes."""


def activity_rows(
    annotators: Sequence[Any],
    judgements: Sequence[Judgement],
    everything: Sequence[Judgement],
    *,
    now: float,
    with_token: set[str],
    revoked: dict[str, Any],
) -> list[dict[str, Any]]:
    """Per annotator: answers that count, answers per minute over the last
    :data:`RATE_WINDOW_S` (or since their first answer when that is shorter, at least a
    minute), median response time, last active (latest answer, undone ones included) and
    whether their link was revoked. ``judgements`` are the ones that count, ``everything``
    includes undone ones."""
    by: dict[str, list[Judgement]] = defaultdict(list)
    for j in judgements:
        by[j.annotator_id].append(j)
    last: dict[str, float] = {}
    for j in everything:
        last[j.annotator_id] = max(last.get(j.annotator_id, 0.0), j.created_at)
    rows = []
    for a in annotators:
        counting = by.get(a.id, [])
        times = sorted(j.created_at for j in counting)
        rate = None
        if times:
            window = min(RATE_WINDOW_S, max(60.0, now - times[0]))
            rate = round(sum(t >= now - window for t in times) / (window / 60.0), 2)
        rts = [j.response_time_s for j in counting if j.response_time_s is not None]
        rows.append(
            {
                "id": a.id,
                "name": a.name,
                "role": "owner" if a.meta.get("role") == "owner" else "annotator",
                "n_answers": len(counting),
                "answers_per_min": rate,
                "median_response_s": round(float(median(rts)), 2) if rts else None,
                "last_active": last.get(a.id),
                "revoked": a.id in revoked and a.id not in with_token,
            }
        )
    return rows


def latest_reward_accuracy(rounds: Sequence[dict[str, Any]]) -> tuple[float | None, int | None]:
    """(reward_accuracy, round) of the latest round whose metrics carry a finite
    ``reward_accuracy`` (the trainer publishes it when the env has a true reward)."""
    for r in reversed(rounds):
        v = (r.get("metrics") or {}).get("reward_accuracy")
        if isinstance(v, int | float) and v == v and abs(v) != float("inf"):
            return float(v), int(r["round"])
    return None, None
