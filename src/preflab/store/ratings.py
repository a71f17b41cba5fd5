"""Ratings: real-time scalar values in [-1, 1] a person sends about the current step of a
stream (the rating stream kind's answers)."""

from __future__ import annotations

from collections.abc import Iterable, Sequence

from sqlalchemy import insert, select
from sqlalchemy.exc import IntegrityError

from preflab.errors import DataError
from preflab.records import Rating, Row
from preflab.store import schema as S
from preflab.store.repository import Repository, allocate


class Ratings(Repository):
    """Append-only ratings, each with a seq in commit order."""

    def add(self, ratings: Iterable[Rating]) -> None:
        """Append real-time ratings; a duplicated (annotator, stream, time) is rejected whole."""
        rs = list(ratings)
        if not rs:
            return
        try:
            with self.db.write() as c:
                seq0 = allocate(c, "ratings", len(rs))
                c.execute(
                    insert(S.ratings),
                    [
                        {
                            "seq": seq0 + k,
                            "annotator_id": r.annotator_id,
                            "stream_id": r.stream_id,
                            "step": r.step,
                            "t": r.t,
                            "value": r.value,
                        }
                        for k, r in enumerate(rs)
                    ],
                )
        except IntegrityError as exc:
            raise DataError(
                "duplicated rating timestamp for an annotator and stream; nothing was written. "
                "Each rating needs its own time"
            ) from exc

    def all(self, *, stream_id: str | None = None, annotator_id: str | None = None) -> list[Rating]:
        """Ratings of a stream and/or annotator (every one by default), ordered by stream,
        annotator and time."""
        with self.db.read() as c:
            q = select(S.ratings).order_by(
                S.ratings.c.stream_id, S.ratings.c.annotator_id, S.ratings.c.t
            )
            if stream_id is not None:
                q = q.where(S.ratings.c.stream_id == stream_id)
            if annotator_id is not None:
                q = q.where(S.ratings.c.annotator_id == annotator_id)
            rows = c.execute(q).mappings().all()
        return [_rating(r) for r in rows]

    def after(self, seq: int) -> list[tuple[int, Rating]]:
        """(seq, rating) pairs with a seq above ``seq``, in the order they were stored (a
        reader's cursor, like :meth:`preflab.store.answers.Answers.judgements`)."""
        q = select(S.ratings).where(S.ratings.c.seq > seq).order_by(S.ratings.c.seq)
        with self.db.read() as c:
            rows = c.execute(q).mappings().all()
        return [(int(r["seq"]), _rating(r)) for r in rows]

    def at(self, annotator_id: str, stream_id: str, ts: Sequence[float]) -> list[Rating]:
        """This annotator's stored ratings of ``stream_id`` at the times ``ts``."""
        with self.db.read() as c:
            rows = c.execute(
                select(S.ratings).where(
                    S.ratings.c.annotator_id == annotator_id,
                    S.ratings.c.stream_id == stream_id,
                    S.ratings.c.t.in_(list(ts)),
                )
            ).mappings()
            return [_rating(r) for r in rows]

    def count(self) -> int:
        """Number of stored ratings."""
        return self._count(S.ratings)

    def max_seq(self) -> int:
        """The highest rating sequence number (0 when none)."""
        return self._max_seq(S.ratings)


def _rating(r: Row) -> Rating:
    return Rating(
        annotator_id=r["annotator_id"],
        stream_id=r["stream_id"],
        step=r["step"],
        t=r["t"],
        value=r["value"],
    )
