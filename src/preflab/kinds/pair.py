"""Pairwise comparison (paper 002): one behaviour against one other; the answer is
p = P(a ≻ b), one label (a, b, p)."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from preflab.errors import DataError
from preflab.kinds.base import Comparer, Item, OneAnswerKind
from preflab.records import Label, Query, Segment, new_id


class PairKind(OneAnswerKind):
    """A pair (a, b) of single segments."""

    name = "pair"
    title = "pairwise comparison"
    studio_view = "compare"
    consistency_checks = True

    def check(self, query: Query) -> None:
        if len(query.a) != 1 or len(query.b) != 1:
            raise DataError(
                f"pair query {query.id} needs exactly one segment a side, got "
                f"{len(query.a)} and {len(query.b)}"
            )

    def query(self, a: str, b: str, *, round: int = 0, **meta: Any) -> Query:
        """A new pairwise query between segments ``a`` and ``b``."""
        return Query(id=new_id("q"), kind=self.name, a=(a,), b=(b,), round=round, meta=meta)

    def as_pair(self, query: Query) -> tuple[str, str] | None:
        return query.a[0], query.b[0]

    def item_labels(
        self, query: Query, item: Item, p: float, judgement_ids: tuple[str, ...]
    ) -> list[Label]:
        return [Label(a=query.a[0], b=query.b[0], p=p, judgement_ids=judgement_ids)]

    def simulate(
        self, comparer: Comparer, query: Query, segments: Sequence[Segment]
    ) -> tuple[float | None, dict[str, object]]:
        return comparer.judge(segments[0], segments[1]), {}


PAIR = PairKind()
"""The pairwise kind."""
