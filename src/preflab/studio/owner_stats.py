"""What the owner sees about annotators: agreement on shared queries and SML weights."""

from __future__ import annotations

import logging
from collections import defaultdict
from collections.abc import Sequence
from itertools import combinations
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


def overview_rows(
    annotators: Sequence[Any], activity: dict, judgements: Sequence[Judgement]
) -> list[dict]:
    votes = latest_votes(judgements)
    agree, _pairs = agreement(votes)
    weights = sml_weights(votes)
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
