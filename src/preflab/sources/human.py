"""Human feedback through the store: the studio (another process) writes judgements there."""

from __future__ import annotations

import time
from collections.abc import Callable, Mapping, Sequence
from typing import Any

from preflab.errors import DataError
from preflab.kinds import kind_of
from preflab.records import Judgement, Query, Segment
from preflab.sources.base import check_state
from preflab.sources.ratings import RatingBatch
from preflab.store import FeedbackStore


class StoreSource:
    """Publishes queries (and their segments) to the store and reads judgements as they arrive.

    ``collect`` returns judgements of the given source kinds that other processes have written
    since the last call and that count (the store leaves undone ones out); it never blocks. The judgements are already stored (``persists``).
    The cursor ``after_seq`` is the highest store sequence number read so far; ``state()``
    saves it (with the pending gaps below it) and ``load_state`` restores it, so a resumed run
    reads each judgement once. Every committed judgement is collected exactly once whatever the
    commit order (see :meth:`collect`).

    Undo grace: a judgement made in the studio (``meta["ui"] == "studio"``) is collected only
    once its undo window has passed since it was stored (``meta["undo_s"]``, the studio's
    ``--undo-s``; ``grace_s`` for judgements that do not say), so its author can undo it until
    then (the store refuses to undo what the trainer collected; the collection mark names the
    pending gaps below it, whose answers stay undoable until collected). Judgements are read in
    store order, so a judgement still in its grace period also holds back the ones stored after
    it.
    When the run ends, :meth:`close_undo` closes every window at once (the store refuses to undo
    from then on), so the last collection takes the answers given in the final seconds too.
    """

    persists = True
    """collect() returns judgements other processes already stored."""

    def __init__(
        self,
        store: FeedbackStore,
        *,
        sources: Sequence[str] = ("human",),
        after_seq: int = 0,
        grace_s: float = 10.0,
        clock: Callable[[], float] = time.time,
    ) -> None:
        if not grace_s >= 0:
            raise DataError(f"grace_s must be ≥ 0 seconds, got {grace_s}")
        self.store = store
        self.grace_s = float(grace_s)
        """Seconds a studio judgement stays undoable before :meth:`collect` takes it."""
        self.clock = clock
        """Wall-clock time in seconds (the clock the studio stamps judgements with)."""
        self.sources = tuple(sources)
        self.after_seq = after_seq
        self._low = after_seq  # every seq ≤ _low is collected or will never appear
        self._seen: set[int] = set()  # collected seqs above _low
        self._pending: dict[int, int] = {}  # missing seq above _low → xid horizon when seen
        self._undo_closed = False  # the run ended: collect without waiting for undo windows
        self.ratings_after = 0
        """Highest rating sequence number :meth:`ratings` returned (not saved with the state:
        after a resume the loop reads every rating once more and drops the ones it knows)."""

    # ----- real-time ratings (the studio's rating mode) -----------------------------------------
    def ratings(self, segments: Sequence[Segment] = ()) -> RatingBatch:
        """Rating rows people wrote since the last call (by store sequence number), with the
        'rating' queries (streams) they name and those streams' item segments. Never blocks;
        ``segments`` is unused (the streams are in the store)."""
        rows = self.store.ratings.after(self.ratings_after)
        if not rows:
            return RatingBatch()
        self.ratings_after = max(seq for seq, _r in rows)
        out = tuple(r for _seq, r in rows)
        wanted = {r.stream_id for r in out}
        queries = tuple(q for q in self.store.queries.stored_among(wanted) if kind_of(q).streams)
        seg_ids = sorted({s for q in queries for s in q.a})
        return RatingBatch(
            segments=tuple(self.store.segments.get(seg_ids)), queries=queries, ratings=out
        )

    def _undo_s(self, j: Judgement) -> float:
        """The undo window the studio gave ``j`` (``meta["undo_s"]``), else ``grace_s``."""
        given = j.meta.get("undo_s")
        if isinstance(given, int | float) and 0 <= given <= 3600:
            return float(given)
        return self.grace_s

    def close_undo(self) -> None:
        """The run ends: every judgement stored so far counts now. The store refuses to undo
        them (and says the run has ended) before this source reads them, and :meth:`collect`
        no longer waits for their undo windows. Not saved with the state: a resumed run that
        ends closes the windows again."""
        self.store.answers.close_undo()
        self._undo_closed = True

    def submit(self, queries: Sequence[Query], segments: Mapping[str, Segment]) -> None:
        """Nothing to do: the loop has stored the queries and their segments, and the studio
        shows what the store holds."""

    def collect(self) -> list[Judgement]:
        """Judgements committed since the last call, each exactly once.

        On PostgreSQL seqs come from a sequence without a lock, so a judgement may commit after
        one with a higher seq. Seqs missing below the highest one read stay pending and are
        re-read until they appear, or until every transaction that could hold them has ended:
        writers take their transaction id before their seq, so a gap's writer has an id below
        the bound taken when the gap was first seen
        (:meth:`~preflab.store.answers.Answers.transaction_id_bound`, taken after the read), and
        once a snapshot's xmin (read *before* the rows) has reached that bound the gap is a
        rolled-back write. On SQLite seqs are handed out in commit order and there are no gaps.
        """
        xmin = self.store.answers.oldest_open_transaction()
        # only those that count (not undone)
        rows = self.store.answers.judgements(after_seq=self._low)
        now = self.clock()
        out: list[Judgement] = []
        for seq, j in rows:
            if seq in self._seen:
                continue
            if (
                not self._undo_closed
                and j.meta.get("ui") == "studio"
                and j.created_at + self._undo_s(j) > now
            ):
                break  # still undoable: it and every later one wait for a later call
            self._seen.add(seq)
            self._pending.pop(seq, None)
            self.after_seq = max(self.after_seq, seq)
            if j.source in self.sources:
                out.append(j)
        top = max(self._seen, default=self._low)
        new_gaps = [
            g for g in range(self._low + 1, top) if g not in self._seen and g not in self._pending
        ]
        if new_gaps:
            bound = self.store.answers.transaction_id_bound() or 0
            self._pending.update(dict.fromkeys(new_gaps, bound))
        while True:
            nxt = self._low + 1
            if nxt in self._seen:
                self._seen.discard(nxt)
            elif nxt in self._pending and (xmin is None or self._pending[nxt] <= xmin):
                del self._pending[nxt]  # its writer has ended without committing it
            else:
                break
            self._low = nxt
        if out:  # from now on these count for good: the studio no longer lets them be undone
            # a pending gap's answer (not committed when read past) stays undoable till read
            self.store.answers.mark_collected(self.after_seq, gaps=sorted(self._pending))
            # an undo that came between the read and the mark succeeded: it does not count
            out = self.store.answers.counted(out, excluded=False)
        return out

    def state(self) -> dict[str, Any]:
        """The read cursor: ``{"kind": "store", "after_seq": n, "low": ..., "seen": [...],
        "pending": [[seq, xid horizon], ...]}`` (the last three only matter on PostgreSQL)."""
        return {
            "kind": "store",
            "after_seq": self.after_seq,
            "low": self._low,
            "seen": sorted(self._seen),
            "pending": [[g, x] for g, x in sorted(self._pending.items())],
        }

    def load_state(self, state: Mapping[str, Any]) -> None:
        """Continue reading after the saved cursor (a state without gaps reads as before)."""
        check_state(state, "store", ("after_seq",))
        seq = state["after_seq"]
        if not isinstance(seq, int) or seq < 0:
            raise DataError(f"store source cursor after_seq must be an int ≥ 0, got {seq!r}")
        try:
            low = int(state.get("low", seq))
            seen = {int(s) for s in state.get("seen", ())}
            pending = {int(g): int(x) for g, x in state.get("pending", ())}
        except (TypeError, ValueError) as exc:
            raise DataError(f"store source state has malformed gaps: {exc}") from exc
        if low > seq or any(s <= low for s in seen):
            raise DataError("store source state is inconsistent (low > after_seq); save it again")
        self.after_seq, self._low, self._seen, self._pending = seq, low, seen, pending
