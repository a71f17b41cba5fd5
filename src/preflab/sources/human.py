"""Human feedback through the store: the studio (another process) writes judgements there."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from preflab.errors import DataError
from preflab.records import Judgement, Query, Segment
from preflab.sources.base import check_state
from preflab.sources.ratings import RatingBatch
from preflab.store import FeedbackStore


class StoreSource:
    """Publishes queries (and their segments) to the store and reads judgements as they arrive.

    ``collect`` returns judgements of the given source kinds that other processes have written
    since the last call; it never blocks. The judgements are already stored (``persists``).
    The cursor ``after_seq`` is the highest store sequence number read so far; ``state()``
    saves it and ``load_state`` restores it, so a resumed run reads each judgement once.
    """

    persists = True
    """collect() returns judgements other processes already stored."""

    def __init__(
        self, store: FeedbackStore, *, sources: Sequence[str] = ("human",), after_seq: int = 0
    ) -> None:
        self.store = store
        self.sources = tuple(sources)
        self.after_seq = after_seq
        self.ratings_after = 0
        """Highest rating sequence number :meth:`ratings` returned (not saved with the state:
        after a resume the loop reads every rating once more and drops the ones it knows)."""

    # ----- real-time ratings (the studio's rating mode) -----------------------------------------
    def ratings(self, segments: Sequence[Segment] = ()) -> RatingBatch:
        """Rating rows people wrote since the last call (by store sequence number), with the
        'rating' queries (streams) they name and those streams' item segments. Never blocks;
        ``segments`` is unused (the streams are in the store)."""
        from sqlalchemy import select

        from preflab.records import Rating
        from preflab.store import schema as S

        with self.store.engine.connect() as c:
            rows = (
                c.execute(
                    select(S.ratings)
                    .where(S.ratings.c.seq > self.ratings_after)
                    .order_by(S.ratings.c.seq)
                )
                .mappings()
                .all()
            )
        if not rows:
            return RatingBatch()
        self.ratings_after = max(int(r["seq"]) for r in rows)
        out = tuple(
            Rating(
                annotator_id=r["annotator_id"],
                stream_id=r["stream_id"],
                step=r["step"],
                t=r["t"],
                value=r["value"],
            )
            for r in rows
        )
        wanted = {r.stream_id for r in out}
        queries = tuple(q for q in self.store.queries() if q.id in wanted and q.kind == "rating")
        seg_ids = sorted({s for q in queries for s in q.a})
        return RatingBatch(
            segments=tuple(self.store.segments(seg_ids)), queries=queries, ratings=out
        )

    def submit(self, queries: Sequence[Query], segments: Mapping[str, Segment]) -> None:
        needed = {sid for q in queries for sid in (*q.a, *q.b)}
        self.store.add_segments(segments[s] for s in needed)
        known = {q.id for q in self.store.queries()}
        self.store.add_queries(q for q in queries if q.id not in known)

    def collect(self) -> list[Judgement]:
        out: list[Judgement] = []
        for seq, j in self.store.judgements(after_seq=self.after_seq):
            self.after_seq = max(self.after_seq, seq)
            if j.source in self.sources:
                out.append(j)
        if out:  # the studio lets people undo answers the trainer has not read yet
            self.store.set_cursor("trainer", self.after_seq)
        return out

    def state(self) -> dict[str, Any]:
        """The read cursor: ``{"kind": "store", "after_seq": n}``."""
        return {"kind": "store", "after_seq": self.after_seq}

    def load_state(self, state: Mapping[str, Any]) -> None:
        """Continue reading after the saved cursor."""
        check_state(state, "store", ("after_seq",))
        seq = state["after_seq"]
        if not isinstance(seq, int) or seq < 0:
            raise DataError(f"store source cursor after_seq must be an int ≥ 0, got {seq!r}")
        self.after_seq = seq
