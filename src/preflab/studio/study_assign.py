"""What a study participant is asked next (issue #61): each pair goes to k people (the study's
overlap), nobody sees a pair twice, and the next pair is the one that needs their answer most —
fewest answers first, then the selector's order (the newest round first, the most uncertain
pair first within it); attention checks (pairs with a known answer) are mixed in at the study's
rate, looking like every other pair. Also the gate: who may answer now."""

from __future__ import annotations

import hashlib
import threading
import time
from collections.abc import Sequence

import numpy as np
from fastapi import HTTPException, Request

from preflab.kinds import kind_of
from preflab.records import Annotator, Query
from preflab.store import FeedbackStore
from preflab.store.studies import Participant
from preflab.studio import study as S
from preflab.studio.study_config import StudyConfig

OWNER_EVERY_S = 10.0
"""How often (seconds) the owner's answers are looked at for new attention checks."""
GOLD_QUANTILE = 0.75
"""A pair is an oracle attention check when its return gap is in the top quarter of the pairs
considered with it (clear answers: a careful person rarely fails them)."""
QUOTA_REACHED = (
    "you have reached this study's quota, thank you: your completion code is on the page study/done"
)
"""Why a participant's answer is refused once they reached the quota (403)."""


def participant_of(store: FeedbackStore, me: Annotator) -> tuple[Participant, StudyConfig] | None:
    """The study participant ``me`` is, with their study's config, or None."""
    if not me.meta.get("study"):
        return None
    p = store.studies.participant(me.id)
    if p is None:
        return None
    loaded = S.load(store, p.study_id)
    return None if loaded is None else (p, loaded[1])


def gate(request: Request, me: Annotator) -> tuple[Participant, StudyConfig] | None:
    """403 saying what to do when a participant may not be asked or answer now (no consent,
    practice not done, quota reached); None for people who are not study participants."""
    found = participant_of(request.app.state.store, me)
    if found is None:
        return None
    p, cfg = found
    where = S.step(p, cfg)
    if where == "declined":
        raise HTTPException(403, "you declined the study's consent; nothing is asked of you")
    if where == "consent":
        raise HTTPException(403, "accept the study's consent first: open the study link again")
    if where == "instructions":
        raise HTTPException(
            403, "finish the practice pairs first: open study/instructions (or the study link)"
        )
    if where == "done" or S.progress(request.app.state.store, p, cfg).done:
        raise HTTPException(403, QUOTA_REACHED)
    return found


def refuse_participant(request: Request, me: Annotator, what: str) -> None:
    """403 for a study participant: a study asks the pairs it assigns (overlap, attention
    checks, quota), so ``what`` (group comparisons, ratings) is not theirs to give."""
    if is_participant(request, me):
        raise HTTPException(
            403,
            f"{what} are not part of this study: it asks you the pairs it assigns, on the "
            "Compare tab",
        )


def is_participant(request: Request, me: Annotator) -> bool:
    """Whether ``me`` joined by a study link (and so is asked only the study's pairs)."""
    return participant_of(request.app.state.store, me) is not None


def draw(annotator_id: str, n: int) -> float:
    """A uniform number in [0, 1) fixed by (person, how many answers they gave): whether their
    next pair is an attention check (the same on a reload)."""
    digest = hashlib.sha256(f"{annotator_id}\x00{n}".encode()).digest()
    return int.from_bytes(digest[:8], "big") / 2.0**64


class Assigner:
    """Study queues over the store; remembers which pairs it already considered as oracle
    checks (per process: another worker considers them once too, with the same outcome)."""

    def __init__(self) -> None:
        self._considered: set[str] = set()
        self._lock = threading.Lock()
        self._serving = threading.Lock()  # one assignment at a time: no two take the last slot
        self._owner_next = 0.0

    def refresh_gold(self, store: FeedbackStore, qs: Sequence[Query]) -> None:
        """Mark the clearest new pairs as attention checks (the synthetic oracle: the env's own
        return; nothing when every return is equal, i.e. no true reward) and every pair the
        owner answered with a preference (source 'owner')."""
        pairs = {q.id for q in qs if len(q.a) == len(q.b) == 1}
        if time.monotonic() >= self._owner_next:  # the owner's answers: looked at every 10 s
            self._owner_next = time.monotonic() + OWNER_EVERY_S
            owners = [a.id for a in store.annotators.all() if a.meta.get("role") == "owner"]
            store.studies.add_gold(
                (j.query_id, float(j.p), "owner")
                for o in owners
                for _s, j in store.answers.by_annotator(o, limit=1000)
                if j.query_id in pairs and j.p in (0.0, 1.0)
            )
        with self._lock:  # marked considered once stored: a failed write is tried again
            new = [q for q in qs if q.id not in self._considered and q.id in pairs]
            if not new:
                return
            rets = store.studies.true_returns([s for q in new for s in (*q.a, *q.b)])
            gaps = {q.id: rets.get(q.a[0], 0.0) - rets.get(q.b[0], 0.0) for q in new}
            if len(set(rets.values())) > 1:
                cut = float(np.quantile([abs(g) for g in gaps.values()], GOLD_QUANTILE))
                store.studies.add_gold(
                    (qid, 1.0 if g > 0 else 0.0, "oracle")
                    for qid, g in gaps.items()
                    if g != 0 and abs(g) >= cut
                )
            self._considered.update(q.id for q in new)

    def queue(
        self,
        store: FeedbackStore,
        me: Annotator,
        config: StudyConfig,
        *,
        kind: str | None,
        exclude: Sequence[str] = (),
        serve: bool = False,
    ) -> list[Query]:
        """The participant's queue: a check first when the draw says so, then the pairs that
        need answers (fewer than k people answered or hold them), fewest first. ``serve``: the
        first is put on their screen now (reserved for them), in one step with choosing it, so
        that people asking at the same moment (in this process) are spread over the pairs."""
        qs, gold, gone = self._queue(store, me, config, kind=kind, exclude=exclude)
        if not serve or not qs:
            return qs
        with self._serving:  # count again and reserve in one step: nobody takes a last slot twice
            counts = store.studies.overlap_counts(
                reserved_since=time.time() - config.reserve_s, exclude=gone
            )
            free = [q for q in qs if q.id in gold or counts.get(q.id, 0) < config.overlap]
            if free:
                store.people.mark_served(me.id, free[0].id)
        return free

    def _queue(
        self,
        store: FeedbackStore,
        me: Annotator,
        config: StudyConfig,
        *,
        kind: str | None,
        exclude: Sequence[str],
    ) -> tuple[list[Query], dict[str, float], set[str]]:
        """(the queue, the attention checks' answers, the people whose answers do not count
        towards the overlap: the excluded and ``me``)."""
        base = store.people.queue(me.id, kind=kind, exclude=exclude)
        base = [q for q in base if not kind_of(q).streams]
        gold: dict[str, float] = {}
        if config.gold_rate > 0:  # without checks every pair is an ordinary one
            self.refresh_gold(store, base)
            gold = store.studies.gold()
        gone = store.studies.excluded_ids() | {me.id}
        counts = store.studies.overlap_counts(
            reserved_since=time.time() - config.reserve_s, exclude=gone
        )
        regular = [q for q in base if q.id not in gold and counts.get(q.id, 0) < config.overlap]
        regular.sort(key=lambda q: counts.get(q.id, 0))  # stable: the selector's order next
        checks = [q for q in base if q.id in gold]
        if not regular:
            return [], gold, gone  # nothing needs them now: wait for the next round
        _r, n = store.answers.counts_of(me.id, round=None)
        if checks and draw(me.id, n) < config.gold_rate:
            return [checks[0], *regular], gold, gone
        return regular, gold, gone
