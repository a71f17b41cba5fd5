"""What a study participant is asked next (issue #61): each pair goes to k people (the study's
overlap), nobody sees a pair twice, and the next pair is the one that needs their answer most —
fewest answers first, then the selector's order (the newest round first, the most uncertain
pair first within it); attention checks (pairs with a known answer) are mixed in at the study's
rate, looking like every other pair. Also the gate: who may answer now."""

from __future__ import annotations

import hashlib
import time
from collections.abc import Callable, Sequence
from collections.abc import Set as AbstractSet

from fastapi import HTTPException, Request

from preflab.records import Annotator, Query
from preflab.store import FeedbackStore
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
        """Mark the clearest new pairs of ``qs`` as attention checks (the synthetic oracle: the
        env's own return; its gap cut against every pair considered before,
        :meth:`Studies.consider_checks`; nothing when every return is equal, i.e. no true
        reward) and every pair of ``qs`` the owner answered with a preference (source
        'owner')."""
        pairs = {q.id for q in qs if len(q.a) == len(q.b) == 1}
        self._owner_checks(store, pairs.intersection)
        self._consider(store, [q for q in qs if q.id in pairs])

    def _refresh_gold_of(
        self, store: FeedbackStore, me: Annotator, kind: str | None, exclude: Sequence[str]
    ) -> None:
        """:meth:`refresh_gold` of the queue of ``me`` (:meth:`PersonQueues.queue` with ``kind``
        and ``exclude``), looking only at its pairs not considered yet and at the pairs the
        owner answered (:meth:`Studies.undecided`, :meth:`Studies.in_queue`), never at every
        open pair."""
        self._owner_checks(
            store, lambda ids: store.studies.in_queue(me.id, ids, kind=kind, exclude=exclude)
        )
        self._consider(store, store.studies.undecided(me.id, kind=kind, exclude=exclude))

    def _owner_checks(
        self, store: FeedbackStore, among: Callable[[list[str]], AbstractSet[str]]
    ) -> None:
        """Every 10 s: the pairs (those of the query ids ``among`` keeps) that the owner
        answered with a preference become attention checks (source 'owner')."""
        if time.monotonic() < self._owner_next:
            return
        self._owner_next = time.monotonic() + OWNER_EVERY_S
        owners = [a.id for a in store.annotators.all() if a.meta.get("role") == "owner"]
        answers = [
            (j.query_id, float(j.p))
            for o in owners
            for _s, j in store.answers.by_annotator(o, limit=1000)
            if j.p in (0.0, 1.0)
        ]
        keep = among([q for q, _p in answers]) if answers else frozenset()
        store.studies.add_gold((q, p, "owner") for q, p in answers if q in keep)

    def _consider(self, store: FeedbackStore, qs: Sequence[Query]) -> None:
        """Decide which of the pairs ``qs`` (one segment a side) not considered yet become the
        oracle's attention checks."""
        new = [q for q in qs if q.id not in self._considered]
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
        limit: int | None = None,
    ) -> list[Query]:
        """The participant's queue: a check first when the draw says so, then the pairs that
        need answers (fewer than k people answered or hold them), fewest first; its first
        ``window`` turned to start after ``after`` (:func:`turn`); then its first ``limit``
        (only those are read). ``serve``: the first of them with a place free is put on their
        screen now and held for them, counted and taken in one store transaction under the
        study's lock (:meth:`Studies.reserve`), so that people asking at the same moment,
        through any studio worker, are spread over the pairs; it comes first in the list ([]
        when none has a place)."""
        need = window if window is not None else (limit if after is None else None)
        qs, gone = self._queue(store, me, config, kind=kind, exclude=exclude, limit=need)
        qs = turn(qs, after)
        if limit is not None:
            qs = qs[:limit]
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

    def counts(
        self, store: FeedbackStore, me: Annotator, config: StudyConfig, *, kind: str | None
    ) -> dict[str, int]:
        """How many queries of each kind (kinds with none left out) :meth:`queue` returns, with
        no ``window`` nor ``limit``: counted in the database."""
        check, gone = self._start(store, me, config, kind=kind, exclude=())
        out = store.studies.assignment_counts(
            me.id,
            kind=kind,
            overlap=config.overlap,
            reserved_since=time.time() - config.reserve_s,
            not_counting=gone,
            checks_apart=config.gold_rate > 0,
        )
        if check is not None:
            out[check.kind] = out.get(check.kind, 0) + 1
        return out

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
        limit: int | None = None,
    ) -> tuple[list[Query], set[str]]:
        """(the queue, or its first ``limit``; the people whose answers do not count towards the
        overlap: the excluded and ``me``). Picked in SQL (:meth:`Studies.assignment`): only
        the rows returned are read, whatever the number of open pairs."""
        check, gone = self._start(store, me, config, kind=kind, exclude=exclude)
        if limit == 0:
            return [], gone
        first = [] if check is None else [check]
        regular = store.studies.assignment(
            me.id,
            kind=kind,
            exclude=exclude,
            overlap=config.overlap,
            reserved_since=time.time() - config.reserve_s,
            not_counting=gone,
            checks_apart=config.gold_rate > 0,  # without checks every pair is an ordinary one
            limit=None if limit is None else limit - len(first),
        )
        return [*first, *regular], gone

    def _start(
        self,
        store: FeedbackStore,
        me: Annotator,
        config: StudyConfig,
        *,
        kind: str | None,
        exclude: Sequence[str],
    ) -> tuple[Query | None, set[str]]:
        """What a participant's queue starts from: (the attention check due first, or None;
        the people whose answers do not count). New checks are decided first
        (:meth:`refresh_gold`, of the pairs of their queue); a check is due when the draw of
        their answers so far says so (:func:`draw`), with or without a pair that needs them:
        the first check of their queue."""
        check = None
        if config.gold_rate > 0:  # without checks every pair is an ordinary one
            self._refresh_gold_of(store, me, kind, exclude)
            _r, n = store.answers.counts_of(me.id, round=None)
            if draw(me.id, n) < config.gold_rate:
                check = store.studies.first_check(me.id, kind=kind, exclude=exclude)
        return check, store.studies.excluded_ids() | {me.id}


def study_of(me: Annotator) -> str:
    """The id of the study ``me`` joined (their annotator's meta, set when they enrolled)."""
    return str(me.meta.get("study") or "")
