"""Group comparison (paper 000): group G1 against group G2 of behaviours; the answer is
p = P(G1 ≻ G2), and the label rule (§3.5 "Label generation") turns it into max(m, n) pairs, every
member of both groups in at least one pair (not the m·n product).

The rule and the group checks live here, low, so that aggregators, the studio and the
groupwise code (tree, selector, simulated decision makers) share one definition.
"""

from __future__ import annotations

import dataclasses
import hashlib
from collections.abc import Hashable, Sequence

import numpy as np

from preflab.errors import DataError
from preflab.kinds.base import Comparer, Item, OneAnswerKind
from preflab.records import Label, Query, Segment, check_probability

GROUP_LIMIT = 8
"""Largest group the paper suggests (§5.1): more is hard for a person to compare at once."""


def check_groups(
    group_a: Sequence[Hashable],
    group_b: Sequence[Hashable],
    *,
    min_size: int = 1,
    max_size: int | None = GROUP_LIMIT,
) -> None:
    """Raise a DataError unless both groups are non-empty, sized within limits and disjoint."""
    for name, g in (("group_a", group_a), ("group_b", group_b)):
        if len(g) == 0:
            raise DataError(
                f"{name} is empty; a group comparison needs at least one behaviour a side"
            )
        if len(g) < min_size:
            raise DataError(
                f"{name} has {len(g)} member(s), expected at least {min_size}; "
                "compare single behaviours as a pair (pair_variance[i, j]) instead"
            )
        if max_size is not None and len(g) > max_size:
            raise DataError(
                f"{name} has {len(g)} members, more than the limit of {max_size}; split it into "
                "smaller groups (pick a lower tree node) or raise max_size"
            )
        if len(set(g)) != len(g):
            dup = sorted({str(x) for x in g if list(g).count(x) > 1})
            raise DataError(f"{name} lists behaviour(s) {dup[:5]} more than once; list each once")
    both = set(group_a) & set(group_b)
    if both:
        raise DataError(
            f"behaviour(s) {sorted(str(x) for x in both)[:5]} are in both groups; "
            "a behaviour can only be on one side of a comparison"
        )


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


class GroupKind(OneAnswerKind):
    """Two disjoint groups of segments, each of at most :data:`GROUP_LIMIT`."""

    name = "group"
    title = "group comparison"
    studio_view = "groups"

    def check(self, query: Query) -> None:
        if not query.b:
            raise DataError(f"group query {query.id}: side b is empty")

    def item_labels(
        self, query: Query, item: Item, p: float, judgement_ids: tuple[str, ...]
    ) -> list[Label]:
        labels = expand(query.a, query.b, p, query_rng(query.id), max_size=None)
        return [dataclasses.replace(lab, judgement_ids=judgement_ids) for lab in labels]

    def simulate(
        self, comparer: Comparer, query: Query, segments: Sequence[Segment]
    ) -> tuple[float | None, dict[str, object]]:
        m = len(query.a)
        return comparer.judge_groups(segments[:m], segments[m:]), {}


GROUP = GroupKind()
"""The group kind."""
