"""Real-time rating stream (paper 001, Pref-GUIDE): a person watches consecutive segments of
an episode and moves a slider in [−1, 1]; the answers are :class:`preflab.records.Rating` rows,
and the window or voting aggregator turns them into labels."""

from __future__ import annotations

from collections.abc import Sequence

from preflab.errors import DataError
from preflab.kinds.base import Comparer, FeedbackKind, Item, refuse_streams
from preflab.records import Judgement, Label, Query, Segment


class RatingKind(FeedbackKind):
    """A stream: ``a`` lists the episode's segments in order, ``b`` is empty."""

    name = "rating"
    title = "real-time rating stream"
    answered_by = "ratings"
    studio_view = "rate"

    def check(self, query: Query) -> None:
        if query.b:
            raise DataError(
                f"rating query {query.id}: side b must be empty (a stream lists its segments "
                f"in a), got {len(query.b)} segment(s)"
            )

    def clip_sides(self, query: Query) -> tuple[tuple[str, ...], ...]:
        return (tuple(query.a),)

    def items(self, query: Query) -> tuple[Item, ...]:
        return ()

    def votes(self, query: Query, judgement: Judgement) -> tuple[tuple[Item, float], ...]:
        raise refuse_streams(self, query)

    def item_labels(
        self, query: Query, item: Item, p: float, judgement_ids: tuple[str, ...]
    ) -> list[Label]:
        raise refuse_streams(self, query)

    def simulate(
        self, comparer: Comparer, query: Query, segments: Sequence[Segment]
    ) -> tuple[float | None, dict[str, object]]:
        raise DataError(
            f"query {query.id} is a rating stream; a comparing annotator cannot answer it. "
            "Use a scalar evaluator (preflab.sources.raters) for rating streams"
        )


RATING = RatingKind()
"""The rating-stream kind."""
