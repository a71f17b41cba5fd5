"""Ranking of k clips: an annotator orders k behaviours (k = 3–6, default 4) from best to
worst; ties are allowed.

**The answer.** A judgement about a ranking query holds the rank of each of the query's
segments, in the query's order, in ``meta["ranks"]`` (0 = best; equal ranks are ties; the
ranks are dense: 0, 1, … with no gap). Its ``p`` is the ranking's agreement with the query's
order, the share of the query's pairs (i < j) that it puts i above j (a tie counts ½), so that
``p = None`` keeps meaning "can't tell" everywhere and a ranking of two clips has exactly the p
of the pairwise answer.

**The label rule: full rank-breaking.** A ranking of k clips gives all k(k−1)/2 ordered pairs as
labels (i above j → p = 1; a tie → p = 0.5), each with the judgement's id, and the reward model
is fitted with the same Bradley–Terry loss as pairwise labels. Why this and not a
Plackett–Luce likelihood in the fit: for Plackett–Luce rankings, the Bradley–Terry estimate on
the fully broken pairs is consistent (Azari Soufiani et al., "Generalized Method-of-Moments for
Rank Aggregation", NeurIPS 2013; breaking into adjacent pairs only is not), it handles ties,
which Plackett–Luce does not, and it keeps one fit, one ensemble bootstrap and one label
convention for every kind. Crowd aggregators vote on each pair of a ranking separately (the
pairs are the ranking's items).
"""

from __future__ import annotations

from collections.abc import Sequence
from itertools import combinations
from typing import Any

from preflab.errors import DataError
from preflab.kinds.base import Comparer, FeedbackKind, Item
from preflab.records import Judgement, Label, Query, Segment, new_id

RANK_SIZES = range(2, 9)
"""Clips a ranking query may hold: 2 to 8 (the studio's Rank view is laid out for 3 to 6)."""
DEFAULT_RANK_SIZE = 4
"""Clips per ranking query by default."""


def _pair_item(i: int, j: int) -> Item:
    return f"{i}>{j}"


def _parse_item(query: Query, item: Item) -> tuple[int, int]:
    try:
        i, j = (int(x) for x in item.split(">"))
    except ValueError:
        raise DataError(f"ranking query {query.id}: {item!r} is no pair item 'i>j'") from None
    if not 0 <= i < j < len(query.a):
        raise DataError(f"ranking query {query.id}: item {item!r} is out of range")
    return i, j


def check_ranks(ranks: Sequence[Any], k: int, *, what: str = "ranks") -> tuple[int, ...]:
    """``ranks`` as dense ranks (0 = best, ties share a rank, no gaps), one for each of ``k``
    clips; a DataError saying what was expected otherwise."""
    if isinstance(ranks, str | bytes) or not isinstance(ranks, Sequence):
        raise DataError(f"{what} must be a list of {k} integers (0 = best), got {ranks!r}")
    if len(ranks) != k:
        raise DataError(f"{what} must give one rank for each of the {k} clips, got {len(ranks)}")
    if not all(isinstance(r, int) and not isinstance(r, bool) for r in ranks):
        raise DataError(f"{what} must be whole numbers (0 = best), got {list(ranks)!r}")
    used = sorted(set(ranks))
    if used != list(range(len(used))):
        raise DataError(
            f"{what} must be dense ranks 0, 1, … (ties share a rank, no gaps), got {list(ranks)!r}"
        )
    return tuple(int(r) for r in ranks)


def dense_ranks(scores: Sequence[float]) -> tuple[int, ...]:
    """Dense ranks of ``scores``, highest first (equal scores tie)."""
    order = sorted(set(scores), reverse=True)
    where = {s: r for r, s in enumerate(order)}
    return tuple(where[s] for s in scores)


def pair_p(ri: int, rj: int) -> float:
    """P(i ≻ j) of ranks ``ri`` and ``rj``: 1 when i is ranked above j, 0.5 for a tie."""
    return 1.0 if ri < rj else 0.0 if ri > rj else 0.5


def agreement(ranks: Sequence[int]) -> float:
    """A ranking's p: the mean of :func:`pair_p` over the query's pairs i < j."""
    pairs = list(combinations(range(len(ranks)), 2))
    return sum(pair_p(ranks[i], ranks[j]) for i, j in pairs) / len(pairs)


class RankingKind(FeedbackKind):
    """k segments in ``a`` (``b`` is empty), to be ordered from best to worst."""

    name = "ranking"
    title = "ranking"
    studio_view = "rank"
    answer_field = "ranks"

    def check(self, query: Query) -> None:
        if query.b:
            raise DataError(
                f"ranking query {query.id}: side b must be empty (the clips to order are "
                f"all in a), got {len(query.b)} segment(s)"
            )
        if len(query.a) not in RANK_SIZES or len(set(query.a)) != len(query.a):
            raise DataError(
                f"ranking query {query.id} needs {RANK_SIZES.start} to {RANK_SIZES.stop - 1} "
                f"different segments, got {len(query.a)} ({len(set(query.a))} different)"
            )

    def query(self, segment_ids: Sequence[str], *, round: int = 0, **meta: Any) -> Query:
        """A new ranking query over ``segment_ids``."""
        return Query(id=new_id("q"), kind=self.name, a=tuple(segment_ids), round=round, meta=meta)

    def answer(self, ranks: Sequence[Any], k: int) -> tuple[float, dict[str, object]]:
        """``(p, meta)`` of a judgement giving ``ranks`` to ``k`` clips (checked)."""
        r = check_ranks(ranks, k)
        return agreement(r), {"ranks": list(r)}

    def answer_help(self, query: Query) -> str:
        k = len(query.a)
        return (
            f"ranks (one rank per clip in the query's order, 0 = best, ties share a rank, e.g. "
            f"{list(range(k))}) or ranks: null for can't tell"
        )

    def answer_from(self, query: Query, value: Any) -> tuple[float | None, dict[str, object]]:
        if value is None:
            return None, {}
        return self.answer(value, len(query.a))

    def answer_value(self, query: Query, judgement: Judgement) -> Any:
        ranks = self.ranks(query, judgement)
        return None if ranks is None else list(ranks)

    def ranks(self, query: Query, judgement: Judgement) -> tuple[int, ...] | None:
        """The ranks a judgement gives (None for a skip)."""
        if judgement.p is None:
            return None
        raw = judgement.meta.get("ranks") if judgement.meta else None
        if raw is None:
            raise DataError(
                f"judgement {judgement.id} answers ranking query {query.id} but has no "
                "meta['ranks']; give one rank per clip (0 = best)"
            )
        return check_ranks(raw, len(query.a), what=f"judgement {judgement.id} ranks")

    def check_answer(self, query: Query, judgement: Judgement) -> None:
        ranks = self.ranks(query, judgement)
        if ranks is not None and abs(agreement(ranks) - float(judgement.p or 0.0)) > 1e-9:
            raise DataError(
                f"judgement {judgement.id}: p = {judgement.p} is not the ranking's agreement "
                f"{agreement(ranks):.6g}; build ranking answers with RANKING.answer(ranks, k)"
            )

    def items(self, query: Query) -> tuple[Item, ...]:
        return tuple(_pair_item(i, j) for i, j in combinations(range(len(query.a)), 2))

    def votes(self, query: Query, judgement: Judgement) -> tuple[tuple[Item, float], ...]:
        ranks = self.ranks(query, judgement)
        if ranks is None:
            return ()
        return tuple(
            (_pair_item(i, j), pair_p(ranks[i], ranks[j]))
            for i, j in combinations(range(len(ranks)), 2)
        )

    def item_labels(
        self, query: Query, item: Item, p: float, judgement_ids: tuple[str, ...]
    ) -> list[Label]:
        i, j = _parse_item(query, item)
        return [Label(a=query.a[i], b=query.a[j], p=p, judgement_ids=judgement_ids)]

    def simulate(
        self, comparer: Comparer, query: Query, segments: Sequence[Segment]
    ) -> tuple[float | None, dict[str, object]]:
        ranks = comparer.rank(segments)
        if ranks is None:
            return None, {}
        return self.answer(list(ranks), len(segments))


RANKING = RankingKind()
"""The ranking kind."""
