"""Turn one group judgement into pairwise labels (paper 000, §3.5 "Label generation")."""

from __future__ import annotations

import dataclasses
import hashlib
from collections.abc import Sequence

import numpy as np

from preflab.errors import DataError
from preflab.groupwise._checks import GROUP_LIMIT, check_groups
from preflab.records import Label, Query, check_probability


def expand(
    group_a: Sequence[str],
    group_b: Sequence[str],
    p: float,
    rng: np.random.Generator,
    *,
    judgement_id: str | None = None,
    product: bool = False,
    max_size: int | None = GROUP_LIMIT,
) -> list[Label]:
    """Pairwise labels of the group judgement ``P(group_a ≻ group_b) = p``.

    By default returns max(m, n) pairs (m = |group_a|, n = |group_b|): every member of the
    larger group appears exactly once, the members of the smaller group are used in a random
    order, each as evenly as possible (each at least once). Every pair crosses the groups
    (``a`` from ``group_a``, ``b`` from ``group_b``), carries the judgement's ``p`` and, when
    ``judgement_id`` is given, ``judgement_ids=(judgement_id,)``. ``product=True`` returns all
    m·n pairs instead (the ablation of Zhang et al.; the paper found it over-fits).

    Raises DataError on an empty group, a behaviour in both groups or listed twice, a group
    larger than ``max_size`` (None = no limit) and p outside [0, 1].
    """
    check_groups(group_a, group_b, max_size=max_size)
    p = check_probability(p, "group judgement p")
    prov = (judgement_id,) if judgement_id is not None else ()
    a, b = list(group_a), list(group_b)
    if product:
        return [Label(a=x, b=y, p=p, judgement_ids=prov) for x in a for y in b]
    m, n = len(a), len(b)
    k = max(m, n)
    # larger side: a random permutation, each member once; smaller side: a random permutation
    # repeated cyclically, so every member is used ⌊k/s⌋ or ⌈k/s⌉ times (≥ 1).
    ia = rng.permutation(m)
    ib = rng.permutation(n)
    if m >= n:
        rows = [(a[ia[t]], b[ib[t % n]]) for t in range(k)]
    else:
        rows = [(a[ia[t % m]], b[ib[t]]) for t in range(k)]
    return [Label(a=x, b=y, p=p, judgement_ids=prov) for x, y in rows]


def query_rng(query_id: str) -> np.random.Generator:
    """The generator that expands ``query_id``: seeded from a SHA-256 of the id, so a group
    query is expanded into the same pairs by every aggregator, in every process, every round."""
    seed = int.from_bytes(hashlib.sha256(query_id.encode()).digest()[:8], "little")
    return np.random.default_rng(seed)


def expand_group(query: Query, p: float, judgement_ids: tuple[str, ...]) -> list[Label]:
    """The labels of one answer ``p`` to a pair or group query (the one expansion rule).

    A pair query gives one label (a, b, p). A group query gives :func:`expand`'s max(m, n)
    cross pairs (every member of both groups in at least one pair), drawn with
    :func:`query_rng` of the query id. Every label carries ``judgement_ids``. Re-exported as
    :func:`preflab.aggregate.expand_group`; defined here so that groupwise code (the
    simulated decision makers) uses it without importing the aggregators.
    """
    if query.kind == "pair":
        return [Label(a=query.a[0], b=query.b[0], p=p, judgement_ids=judgement_ids)]
    if query.kind != "group":
        raise DataError(
            f"query {query.id} is a {query.kind!r} query; only pair and group answers become "
            "labels this way (rating streams go through WindowAggregator or VotingAggregator)"
        )
    labels = expand(query.a, query.b, p, query_rng(query.id), max_size=None)
    return [dataclasses.replace(lab, judgement_ids=judgement_ids) for lab in labels]
