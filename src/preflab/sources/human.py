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
    hands out sequence numbers in commit order (a counter row locked until commit), and ids
    already collected in the last window of seqs are skipped (a second guard).
    """

    persists = True

    def __init__(
        self, store: FeedbackStore, *, sources: Sequence[str] = ("human",), after_seq: int = 0
    ) -> None:
        self.store = store
        self.sources = tuple(sources)
        self.after_seq = after_seq

    def submit(self, queries: Sequence[Query], segments: Mapping[str, Segment]) -> None:
        needed = {sid for q in queries for sid in (*q.a, *q.b)}
        self.store.add_segments(segments[s] for s in needed)
        known = self.store.known_query_ids(q.id for q in queries)  # indexed, not a full scan
        self.store.add_queries(q for q in queries if q.id not in known)

    def state(self) -> dict[str, Any]:
        return {"after_seq": self.after_seq}

    def load_state(self, state: Mapping[str, Any]) -> None:
        self.after_seq = int(state["after_seq"])

    def collect(self) -> list[Judgement]:
        out: list[Judgement] = []
        for seq, j in self.store.judgements(after_seq=self.after_seq):
            self.after_seq = max(self.after_seq, seq)
            if j.source in self.sources:
                out.append(j)
        return out
