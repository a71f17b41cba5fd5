"""Validation of groups shared by labels, scores and selectors."""

from __future__ import annotations

from collections.abc import Hashable, Sequence

from preflab.errors import DataError

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
