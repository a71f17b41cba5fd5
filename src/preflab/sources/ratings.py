"""Rating streams from sources to the loop: item segments, 'rating' queries and Rating rows.

A source that gathers real-time ratings (simulated evaluators rating live, people rating
published streams in the studio) also has a ``ratings(segments)`` drain. The loop calls it
every round when it collects judgements, with its recently recorded segments (a live rater
cuts its streams from them; a store-backed source ignores them), and gets a
:class:`RatingBatch`: the stream items (short
segments, stored like any segment), the streams (queries of kind 'rating' whose ``a`` lists
consecutive items) and the new :class:`~preflab.records.Rating` rows (``stream_id`` = the
query id, ``step`` = the step within the stream). :func:`absorb_ratings` stores what the
source has not stored itself; the loop passes every rating to the aggregator in
``Feedback.ratings``.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Protocol, runtime_checkable

from preflab.records import Query, Rating, Segment
from preflab.store import FeedbackStore


@dataclass(frozen=True)
class RatingBatch:
    """What a rating source produced since its last drain."""

    segments: tuple[Segment, ...] = ()
    """Item segments of new streams (empty when the source stored them already)."""
    queries: tuple[Query, ...] = ()
    """New streams: queries of kind 'rating' (empty when they were published through the loop)."""
    ratings: tuple[Rating, ...] = ()
    """New ratings, each naming a stream (query id) and a step within it."""

    def __len__(self) -> int:
        return len(self.ratings)


@runtime_checkable
class RatingSource(Protocol):
    """A feedback source that also delivers real-time ratings."""

    persists: bool
    """True when the source's rows are in the store already (the loop must not add them)."""

    def ratings(self, segments: Sequence[Segment] = ()) -> RatingBatch:
        """Streams and ratings that arrived since the last call (never blocks); ``segments``
        are the loop's recently recorded segments (the items a live rater has rated)."""
        ...


def absorb_ratings(
    source: RatingSource, store: FeedbackStore, segments: Sequence[Segment] = ()
) -> RatingBatch:
    """Drain ``source.ratings(segments)``; store segments, queries and ratings unless the
    source persists them itself."""
    batch = source.ratings(segments)
    if not source.persists:
        if batch.segments:
            store.segments.add(batch.segments)
        # a resumed round recreates rows an interrupted one may have stored already: skip them
        qids = [q.id for q in batch.queries]
        stored = store.queries.known_ids(qids) if qids else set()
        store.queries.add([q for q in batch.queries if q.id not in stored])
        done = {
            rating_key(r)
            for qid in {r.stream_id for r in batch.ratings} & stored
            for r in store.ratings.all(stream_id=qid)
        }
        store.ratings.add([r for r in batch.ratings if rating_key(r) not in done])
    return batch


def rating_key(r: Rating) -> tuple[str, str, float]:
    """(annotator, stream, time): the store's unique key of a rating."""
    return r.annotator_id, r.stream_id, r.t


class RatingLog:
    """Every rating a run has taken in, once each (by its store key), for ``Feedback.ratings``.

    :meth:`take` drains a rating source each round (:func:`absorb_ratings`) and adds the new
    streams and items to the run's ``queries`` and ``segments``. Its first call also reads back
    the stored ratings of streams the run already knows (a resumed run); rows that come twice
    (a replayed round, a re-read cursor) are kept once.
    """

    def __init__(self) -> None:
        self.ratings: list[Rating] = []
        """Ratings in the order they were taken in."""
        self._keys: set[tuple[str, str, float]] = set()
        self._synced = False

    def take(
        self,
        source: RatingSource,
        store: FeedbackStore,
        recorded: Sequence[Segment],
        queries: dict[str, Query],
        segments: dict[str, Segment],
    ) -> RatingBatch:
        """Drain ``source`` (``recorded``: the run's recent segments); update the run's
        ``queries`` and ``segments`` in place; return what the source gave."""
        if not self._synced:
            self._synced = True
            self._add(
                [r for r in store.ratings.all() if r.stream_id in queries], store, queries, segments
            )
        batch = absorb_ratings(source, store, recorded)
        segments.update({s.id: s for s in batch.segments})
        queries.update({q.id: q for q in batch.queries})
        self._add(batch.ratings, store, queries, segments)
        return batch

    def _add(
        self,
        ratings: Sequence[Rating],
        store: FeedbackStore,
        queries: dict[str, Query],
        segments: dict[str, Segment],
    ) -> None:
        new = [r for r in ratings if rating_key(r) not in self._keys]
        missing = {s for r in new for s in queries[r.stream_id].a} - set(segments)
        if missing:
            segments.update({s.id: s for s in store.segments.get(sorted(missing))})
        self.ratings.extend(new)
        self._keys.update(rating_key(r) for r in new)
