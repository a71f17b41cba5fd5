"""Turn one group judgement into pairwise labels (paper 000, §3.5 "Label generation")."""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np

from preflab.groupwise._checks import GROUP_LIMIT, check_groups
from preflab.records import Label, check_probability


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
