"""Human feedback through the store: the studio (another process) writes judgements there."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from preflab.records import Judgement, Query, Segment
from preflab.store import FeedbackStore


class StoreSource:
    """Publishes queries (and their segments) to the store and reads judgements as they arrive.

    ``collect`` returns judgements of the given source kinds that other processes have written
    since the last call; it never blocks. The judgements are already stored (``persists``).
    Every committed judgement is collected exactly once whatever the commit order: the store
    hands out sequence numbers in commit order (a counter row locked until commit), so no
    judgement can become visible below a seq this source has already passed.
    """

    persists = True

    def __init__(
        self, store: FeedbackStore, *, sources: Sequence[str] = ("human",), after_seq: int = 0
    ) -> None:
        self.store = store
        self.sources = tuple(sources)
        self.after_seq = after_seq
        """Highest seq collected so far."""
        self._low = after_seq  # every seq ≤ _low is collected or will never appear
        self._seen: set[int] = set()  # collected seqs above _low
        self._pending: dict[int, int] = {}  # missing seq above _low → xid horizon when seen

    def submit(self, queries: Sequence[Query], segments: Mapping[str, Segment]) -> None:
        needed = {sid for q in queries for sid in (*q.a, *q.b)}
        self.store.add_segments(segments[s] for s in needed)
        known = self.store.known_query_ids(q.id for q in queries)  # indexed, not a full scan
        self.store.add_queries(q for q in queries if q.id not in known)

    def state(self) -> dict[str, Any]:
        return {
            "after_seq": self.after_seq,
            "low": self._low,
            "seen": sorted(self._seen),
            "pending": [[g, x] for g, x in sorted(self._pending.items())],
        }

    def load_state(self, state: Mapping[str, Any]) -> None:
        self.after_seq = int(state["after_seq"])
        self._low = int(state.get("low", self.after_seq))
        self._seen = {int(s) for s in state.get("seen", ())}
        self._pending = {int(g): int(x) for g, x in state.get("pending", ())}

    def collect(self) -> list[Judgement]:
        """Judgements committed since the last call, each exactly once.

        On PostgreSQL seqs come from a sequence without a lock, so a judgement may commit after
        one with a higher seq. Seqs missing below the highest one read stay pending and are
        re-read until they appear, or until every transaction that could hold them has ended
        (the snapshot's xmin passed the xid horizon noted when the gap was first seen; writers
        take their xid before their seq): then the gap is a rolled-back write.
        """
        before = self.store.snapshot_bounds()
        rows = self.store.judgements(after_seq=self._low)
        after = self.store.snapshot_bounds()
        out: list[Judgement] = []
        for seq, j in rows:
            if seq in self._seen:
                continue
            self._seen.add(seq)
            self._pending.pop(seq, None)
            self.after_seq = max(self.after_seq, seq)
            if j.source in self.sources:
                out.append(j)
        top = max(self._seen, default=self._low)
        horizon = after[1] if after else 0
        for g in range(self._low + 1, top):
            if g not in self._seen and g not in self._pending:
                self._pending[g] = horizon
        xmin = before[0] if before else None
        while True:
            nxt = self._low + 1
            if nxt in self._seen:
                self._seen.discard(nxt)
            elif nxt in self._pending and (xmin is None or self._pending[nxt] <= xmin):
                del self._pending[nxt]  # its writer has ended without committing it
            else:
                break
            self._low = nxt
        return out
