"""What a study participant is asked next (issue #61): each pair goes to k people (the study's
overlap), nobody sees a pair twice, and the next pair is the one that needs their answer most —
fewest answers first, then the selector's order (the newest round first, the most uncertain
pair first within it); attention checks (pairs with a known answer) are mixed in at the study's
rate, looking like every other pair. Also the gate: who may answer now."""

from __future__ import annotations

import hashlib
import time
from collections.abc import Sequence

from fastapi import HTTPException, Request

from preflab.kinds import kind_of
from preflab.records import Annotator, Query
from preflab.store import FeedbackStore
from preflab.store.person_queue import pair_key
from preflab.store.studies import Participant
from preflab.studio import study as S
from preflab.studio.study_config import StudyConfig

OWNER_EVERY_S = 10.0
"""How often (seconds) the owner's answers are looked at for new attention checks."""
GOLD_QUANTILE = 0.75
"""A pair is an oracle attention check when its return gap is in the top quarter of the gaps of
every pair considered so far, itself included (clear answers: a careful person rarely fails
them)."""
QUOTA_REACHED = (
    "you have reached this study's quota, thank you: your completion code is on the page study/done"
)
"""Why a participant's answer is refused once they reached the quota (403)."""
PAIR_FILLED = (
    "this pair already has its answers: your hold on it lapsed while it was on your screen and "
    "other people answered it meanwhile, so your answer is not needed; here is your next one"
)
"""Why a participant's late answer is refused (409): the pair's overlap was filled by others."""


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


def turn(qs: Sequence[Query], after: str | None) -> list[Query]:
    """``qs`` starting after ``after`` (the page's cursor: the query whose answer is still on
    its way), which goes last, or is left out when others remain; as it is without it."""
    ids = [q.id for q in qs]
    if after is None or after not in ids:
        return list(qs)
    k = ids.index(after)
    return [*qs[k + 1 :], *qs[:k]] or list(qs)


class Assigner:
    """Study queues over the store. Which pairs became attention checks is decided once and
    stored (:meth:`Studies.consider_checks`); the assigner remembers only which it saw decided."""

    def __init__(self) -> None:
        self._considered: set[str] = set()
        self._owner_next = 0.0

    def refresh_gold(self, store: FeedbackStore, qs: Sequence[Query]) -> None:
        """Mark the clearest new pairs as attention checks (the synthetic oracle: the env's own
        return; its gap cut against every pair considered before, :meth:`Studies.consider_checks`;
        nothing when every return is equal, i.e. no true reward) and every pair the owner
        answered with a preference (source 'owner')."""
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
        new = [q for q in qs if q.id in pairs and q.id not in self._considered]
        if not new:
            return
        self._considered.update(store.studies.considered(q.id for q in new))  # by another worker
        new = [q for q in new if q.id not in self._considered]
        if not new:
            return
        rets = store.studies.true_returns([s for q in new for s in (*q.a, *q.b)])
        gaps = {q.id: rets.get(q.a[0], 0.0) - rets.get(q.b[0], 0.0) for q in new}
        store.studies.consider_checks(gaps, quantile=GOLD_QUANTILE)
        self._considered.update(gaps)  # once stored: a failed write is tried again

    def queue(
        self,
        store: FeedbackStore,
        me: Annotator,
        config: StudyConfig,
        *,
        kind: str | None,
        exclude: Sequence[str] = (),
        serve: bool = False,
        after: str | None = None,
        window: int | None = None,
    ) -> list[Query]:
        """The participant's queue: a check first when the draw says so, then the pairs that
        need answers (fewer than k people answered or hold them), fewest first; its first
        ``window`` turned to start after ``after`` (:func:`turn`). ``serve``: the first of them
        with a place free is put on their screen now and held for them, counted and taken in
        one store transaction under the study's lock (:meth:`Studies.reserve`), so that people
        asking at the same moment, through any studio worker, are spread over the pairs; it
        comes first in the list ([] when none has a place)."""
        qs, _gold, gone = self._queue(store, me, config, kind=kind, exclude=exclude)
        qs = turn(qs if window is None else qs[:window], after)
        if not serve or not qs:
            return qs
        got = store.studies.reserve(
            study_of(me),
            me.id,
            qs,
            overlap=config.overlap,
            reserve_s=config.reserve_s,
            exclude=gone,
        )
        return [] if got is None else [got, *(q for q in qs if q.id != got.id)]

    def hold(self, store: FeedbackStore, me: Annotator, q: Query) -> bool:
        """``q`` is on the screen of ``me`` (shown again, or being answered): whether it is
        theirs to answer. A study participant's hold on one of its pair's places starts again
        when it is still theirs or a place is free (:meth:`Studies.reserve`); False when their
        hold lapsed and other people fill the pair meanwhile. True for everyone else."""
        found = participant_of(store, me)
        if found is None:
            return True
        p, config = found
        got = store.studies.reserve(
            p.study_id,
            me.id,
            [q],
            overlap=config.overlap,
            reserve_s=config.reserve_s,
            exclude=store.studies.excluded_ids() | {me.id},
        )
        return got is not None

    def check_hold(self, store: FeedbackStore, me: Annotator, q: Query) -> None:
        """409 (:data:`PAIR_FILLED`) when ``q`` is no longer theirs to answer (:meth:`hold`)."""
        if not self.hold(store, me, q):
            raise HTTPException(409, PAIR_FILLED)

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
        counts = store.studies.pair_counts(
            reserved_since=time.time() - config.reserve_s, exclude=gone
        )
        regular = [
            q for q in base if q.id not in gold and counts.get(pair_key(q), 0) < config.overlap
        ]
        regular.sort(key=lambda q: counts.get(pair_key(q), 0))  # stable: the selector's order
        checks = [q for q in base if q.id in gold]
        if checks:  # a check is due by the draw, with or without a pair that needs them
            _r, n = store.answers.counts_of(me.id, round=None)
            if draw(me.id, n) < config.gold_rate:
                return [checks[0], *regular], gold, gone
        return regular, gold, gone


def study_of(me: Annotator) -> str:
    """The id of the study ``me`` joined (their annotator's meta, set when they enrolled)."""
    return str(me.meta.get("study") or "")
