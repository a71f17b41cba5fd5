"""Studies with real people (issue #61): the study (its link's hash and settings), the people who
joined by the link (pseudonymous annotators with their platform ids, consent, practice,
completion, exclusion) and the attention checks (pair queries whose answer is known)."""

from __future__ import annotations

import hashlib
import threading
import time
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

import numpy as np
from sqlalchemy import Subquery, func, insert, or_, select, text, union, update
from sqlalchemy.exc import IntegrityError

from preflab.errors import ConflictError, DataError
from preflab.kinds import stream_kind_names
from preflab.records import Query
from preflab.store import schema as S
from preflab.store.person_queue import fresh_conditions, pair_key, queue_select, sides_key
from preflab.store.repository import Database, Repository, jsonable, max_seq, upsert
from preflab.store.schema import not_retracted

STUDY_LOCK = 0x73747564
"""The first key of the PostgreSQL advisory lock :func:`lock_study` takes (the second names the
study, or the attention checks)."""
CHECKS_LOCK = "\x00checks"
"""The name :meth:`Studies.consider_checks` locks (the attention checks are the store's, not one
study's)."""


def lock_study(c: Any, name: str) -> None:
    """Serialise this write transaction with every other that counts and takes places of the
    study ``name`` (:meth:`Studies.reserve`), in any process (each studio worker has its own
    app). PostgreSQL: a transaction-scoped advisory lock keyed by the name; SQLite: nothing, its
    write transactions run one at a time (BEGIN IMMEDIATE), across processes too."""
    if c.dialect.name == "postgresql":
        key = int.from_bytes(hashlib.sha256(name.encode()).digest()[:4], "big") - 2**31
        c.execute(text("SELECT pg_advisory_xact_lock(:ns, :key)"), {"ns": STUDY_LOCK, "key": key})


class StudyFullError(ConflictError):
    """The study has as many participants as its cap allows."""


class StudyClosedError(ConflictError):
    """The owner closed the study's enrolment."""


@dataclass(frozen=True)
class Study:
    """A stored study."""

    id: str
    """The study's id (one study per run is the usual case: 'main')."""
    config: Mapping[str, Any]
    """Its settings as JSON (``preflab.studio.study_config.StudyConfig.to_json``)."""
    closed_at: float | None
    """When the owner closed enrolment (None: open)."""
    created_at: float
    """When it was created."""


@dataclass(frozen=True)
class Participant:
    """A person who joined a study by its link."""

    annotator_id: str
    study_id: str
    platform_pid: str | None
    """The platform's participant id (Prolific's PROLIFIC_PID, or ?pid=), None without one."""
    platform: Mapping[str, str]
    """Every platform id the link carried (PROLIFIC_PID, STUDY_ID, SESSION_ID, pid)."""
    enrolled_at: float
    consent_at: float | None
    consent_sha256: str | None
    """SHA-256 of the consent text they accepted."""
    declined_at: float | None
    practice: tuple[Mapping[str, Any], ...] = field(default_factory=tuple)
    """Their practice answers in order (never counted as labels)."""
    practice_done_at: float | None = None
    completed_at: float | None = None
    excluded_at: float | None = None
    excluded_reason: str | None = None


class Studies(Repository):
    """Studies, their participants and their attention checks."""

    def __init__(self, db: Database) -> None:
        super().__init__(db)
        self._pairs = _PairIndex()
        """pair key → ids of the queries that ask it (what :meth:`reserve` counts)."""
        self._undecided = _Undecided()
        """The queries that may still become oracle attention checks (:meth:`undecided`)."""

    # ----- the study ----------------------------------------------------------------------------
    def put(self, study_id: str, *, link_hash: str | None, config: Mapping[str, Any]) -> None:
        """Create the study (``link_hash`` required) or replace its settings (and its link's
        hash when one is given)."""
        values: dict[str, Any] = {"config": jsonable(config)}
        if link_hash is not None:
            values["link_hash"] = link_hash
        with self.db.write() as c:
            n = c.execute(
                update(S.studies).where(S.studies.c.id == study_id).values(**values)
            ).rowcount
            if not n:
                if link_hash is None:
                    raise DataError(f"no study {study_id!r} yet: create it with a link first")
                c.execute(
                    insert(S.studies),
                    [{"id": study_id, **values, "closed_at": None, "created_at": time.time()}],
                )

    def get(self, study_id: str) -> Study | None:
        """The study with this id, or None."""
        with self.db.read() as c:
            r = c.execute(select(S.studies).where(S.studies.c.id == study_id)).mappings().first()
        return _study(r) if r else None

    def by_link(self, link_hash: str) -> Study | None:
        """The study whose link's secret has this SHA-256, or None."""
        with self.db.read() as c:
            r = (
                c.execute(select(S.studies).where(S.studies.c.link_hash == link_hash))
                .mappings()
                .first()
            )
        return _study(r) if r else None

    def all(self) -> list[Study]:
        """Every study, oldest first."""
        with self.db.read() as c:
            rows = c.execute(select(S.studies).order_by(S.studies.c.created_at)).mappings().all()
        return [_study(r) for r in rows]

    def set_closed(self, study_id: str, closed: bool) -> None:
        """Close (or reopen) the study's enrolment; people who joined may go on."""
        with self.db.write() as c:
            n = c.execute(
                update(S.studies)
                .where(S.studies.c.id == study_id)
                .values(closed_at=time.time() if closed else None)
            ).rowcount
        if not n:
            raise DataError(f"no study {study_id!r} in the store; create it first")

    # ----- participants ---------------------------------------------------------------------------
    def enrol(
        self,
        study_id: str,
        annotator_id: str,
        *,
        key_hash: str,
        platform: Mapping[str, str],
        platform_pid: str | None,
        cap: int,
    ) -> None:
        """Add a participant (and their pseudonymous annotator, with no name and no token yet)
        in one transaction. Raises :class:`StudyClosedError`, :class:`StudyFullError`, or
        :class:`ConflictError` when the platform id already joined (resume them instead)."""
        now = time.time()
        p = S.participants
        try:
            with self.db.write() as c:
                st = c.execute(
                    select(S.studies.c.closed_at)
                    .where(S.studies.c.id == study_id)
                    .with_for_update()
                ).first()
                if st is None:
                    raise DataError(f"no study {study_id!r} in the store")
                if st[0] is not None:
                    raise StudyClosedError("the study's enrolment is closed")
                n = c.execute(
                    select(func.count()).select_from(p).where(p.c.study_id == study_id)
                ).scalar_one()
                if int(n) >= cap:
                    raise StudyFullError(f"the study has reached its cap of {cap} participants")
                c.execute(
                    insert(S.annotators),
                    [
                        {
                            "id": annotator_id,
                            "source": "human",
                            "name": annotator_id,  # the pseudonym: no name is asked
                            "token_hash": None,
                            "meta": {"role": "annotator", "study": study_id},
                            "created_at": now,
                        }
                    ],
                )
                c.execute(
                    insert(p),
                    [
                        {
                            "annotator_id": annotator_id,
                            "study_id": study_id,
                            "key_hash": key_hash,
                            "platform_pid": platform_pid,
                            "platform": dict(platform),
                            "enrolled_at": now,
                            "practice": [],
                        }
                    ],
                )
        except IntegrityError as exc:
            raise ConflictError(
                f"participant {platform_pid!r} already joined study {study_id!r}"
            ) from exc

    def participant(self, annotator_id: str) -> Participant | None:
        """The participant with this annotator id, or None."""
        return self._one(S.participants.c.annotator_id == annotator_id)

    def by_key(self, key_hash: str) -> Participant | None:
        """The participant whose study key has this SHA-256, or None."""
        return self._one(S.participants.c.key_hash == key_hash)

    def by_pid(self, study_id: str, platform_pid: str) -> Participant | None:
        """The participant of ``study_id`` with this platform id, or None."""
        p = S.participants
        return self._one((p.c.study_id == study_id) & (p.c.platform_pid == platform_pid))

    def _one(self, where: Any) -> Participant | None:
        with self.db.read() as c:
            r = c.execute(select(S.participants).where(where)).mappings().first()
        return _participant(r) if r else None

    def participants(self, study_id: str) -> list[Participant]:
        """The study's participants in the order they joined."""
        p = S.participants
        with self.db.read() as c:
            rows = (
                c.execute(select(p).where(p.c.study_id == study_id).order_by(p.c.enrolled_at))
                .mappings()
                .all()
            )
        return [_participant(r) for r in rows]

    def rekey(self, annotator_id: str, key_hash: str, *, token_hash: str | None) -> None:
        """A returning participant's new study key (the cookie); ``token_hash`` (their studio
        token, when they consented) is set on their annotator in the same transaction."""
        with self.db.write() as c:
            self._update(c, annotator_id, key_hash=key_hash)
            if token_hash is not None:
                c.execute(
                    update(S.annotators)
                    .where(S.annotators.c.id == annotator_id)
                    .values(token_hash=token_hash)
                )

    def consent(self, annotator_id: str, *, consent_sha256: str, token_hash: str) -> None:
        """They accepted the consent text with this SHA-256 now: their studio token works from
        now on (set in the same transaction)."""
        with self.db.write() as c:
            self._update(
                c,
                annotator_id,
                consent_at=time.time(),
                consent_sha256=consent_sha256,
                declined_at=None,
            )
            c.execute(
                update(S.annotators)
                .where(S.annotators.c.id == annotator_id)
                .values(token_hash=token_hash)
            )

    def decline(self, annotator_id: str) -> None:
        """They declined the consent: nothing of theirs is asked or counted."""
        with self.db.write() as c:
            self._update(c, annotator_id, declined_at=time.time(), consent_at=None)
            c.execute(
                update(S.annotators)
                .where(S.annotators.c.id == annotator_id)
                .values(token_hash=None)
            )

    def add_practice(
        self, annotator_id: str, answer: Mapping[str, Any], *, index: int | None = None
    ) -> bool:
        """Append one practice answer (JSON-able) to theirs; with ``index``, only when it is
        their ``index``-th (0-based), read and written in one transaction, so a form sent twice
        at once stores one answer. Whether it was stored."""
        with self.db.write() as c:
            r = c.execute(
                select(S.participants.c.practice)
                .where(S.participants.c.annotator_id == annotator_id)
                .with_for_update()
            ).first()
            if r is None:
                raise DataError(f"no participant {annotator_id!r}")
            given = list(r[0] or [])
            if index is not None and len(given) != index:
                return False
            self._update(c, annotator_id, practice=[*given, jsonable(answer)])
            return True

    def practice_done(self, annotator_id: str) -> None:
        """They finished the practice (their answers count from now on)."""
        self._stamp(annotator_id, "practice_done_at")

    def complete(self, annotator_id: str) -> None:
        """They reached their quota and saw the completion code (the first time counts)."""
        self._stamp(annotator_id, "completed_at")

    def _stamp(self, annotator_id: str, column: str) -> None:
        p = S.participants
        with self.db.write() as c:
            c.execute(
                update(p)
                .where(p.c.annotator_id == annotator_id, p.c[column].is_(None))
                .values({column: time.time()})
            )

    def exclude(self, annotator_id: str, reason: str) -> None:
        """The owner excluded them: their answers, earlier and later, stop counting. They are not
        told and may go on answering (the studio does not turn them away)."""
        with self.db.write() as c:
            self._update(c, annotator_id, excluded_at=time.time(), excluded_reason=reason[:500])

    def include(self, annotator_id: str) -> None:
        """Undo an exclusion."""
        with self.db.write() as c:
            self._update(c, annotator_id, excluded_at=None, excluded_reason=None)

    def excluded_ids(self) -> set[str]:
        """Annotator ids the owner excluded (in any study)."""
        p = S.participants
        with self.db.read() as c:
            return set(
                c.execute(select(p.c.annotator_id).where(p.c.excluded_at.is_not(None))).scalars()
            )

    def _update(self, c: Any, annotator_id: str, **values: Any) -> None:
        n = c.execute(
            update(S.participants)
            .where(S.participants.c.annotator_id == annotator_id)
            .values(**values)
        ).rowcount
        if not n:
            raise DataError(f"no participant {annotator_id!r} in the store")

    # ----- attention checks -------------------------------------------------------------------------
    def add_gold(self, answers: Iterable[tuple[str, float, str]]) -> int:
        """Known answers ``(query_id, p, source)`` of pair queries; a query already gold keeps
        its answer. Returns how many were added."""
        rows: list[dict[str, Any]] = []
        for q, p, s in answers:
            if not 0.0 <= float(p) <= 1.0:
                raise DataError(f"gold answer of {q} must be in [0, 1], got {p}")
            rows.append({"query_id": q, "p": float(p), "source": s, "created_at": time.time()})
        if not rows:
            return 0
        rows = list({r["query_id"]: r for r in reversed(rows)}.values())  # the first p of each
        with self.db.write() as c:  # a concurrent writer's row wins (another studio worker)
            ins = self.db.insert_or_ignore(S.gold_answers).values(rows)
            done = ins.on_conflict_do_nothing().returning(S.gold_answers.c.query_id)
            return len(c.execute(done).all())

    def true_returns(self, segment_ids: Iterable[str]) -> dict[str, float]:
        """segment id → its return under the env's own reward (the synthetic oracle's answer to a
        pair; all equal when the env has none)."""
        ids = list(dict.fromkeys(segment_ids))
        out: dict[str, float] = {}
        with self.db.read() as c:
            for k in range(0, len(ids), 500):
                out.update(
                    (i, float(r))
                    for i, r in c.execute(
                        select(S.segments.c.id, S.segments.c.true_return).where(
                            S.segments.c.id.in_(ids[k : k + 500])
                        )
                    )
                )
        return out

    def extremes(self, n: int) -> tuple[list[tuple[str, float]], list[tuple[str, float]]]:
        """The ``n`` segments with the highest true return and the ``n`` with the lowest, as
        (id, return), best first and worst first (ties by id): the practice pairs' sides."""
        seg = S.segments
        with self.db.read() as c:
            top = c.execute(
                select(seg.c.id, seg.c.true_return)
                .order_by(seg.c.true_return.desc(), seg.c.id)
                .limit(n)
            ).all()
            low = c.execute(
                select(seg.c.id, seg.c.true_return).order_by(seg.c.true_return, seg.c.id).limit(n)
            ).all()
        return [(i, float(r)) for i, r in top], [(i, float(r)) for i, r in low]

    def gold(self) -> dict[str, float]:
        """query id → known p of every attention check."""
        with self.db.read() as c:
            return {
                q: float(p)
                for q, p in c.execute(select(S.gold_answers.c.query_id, S.gold_answers.c.p))
            }

    def considered(self, query_ids: Iterable[str]) -> set[str]:
        """Those of ``query_ids`` already considered as oracle attention checks
        (:meth:`consider_checks`)."""
        ids, gc = list(dict.fromkeys(query_ids)), S.gold_considered
        out: set[str] = set()
        with self.db.read() as c:
            for k in range(0, len(ids), 500):
                out.update(
                    c.execute(
                        select(gc.c.query_id).where(gc.c.query_id.in_(ids[k : k + 500]))
                    ).scalars()
                )
        return out

    def consider_checks(self, gaps: Mapping[str, float], *, quantile: float) -> int:
        """Decide once which of these pair queries (query id → return gap a − b under the env's
        own reward) become oracle attention checks: those whose gap is not 0 and whose size is
        at least the ``quantile`` of the sizes of every gap considered so far, these included.
        The gaps are stored as they are decided, so the pairs a trainer asks one or two at a
        time are cut against all the pairs before them (not each against itself), and every
        studio worker, and a restart, decides alike. One write transaction under the checks'
        lock; a pair considered before keeps its decision (an owner's check keeps its answer).
        Returns how many checks were added."""
        added = self._consider_checks(gaps, quantile)
        self._undecided.forget(gaps)  # every one is decided now (stored now or before)
        return added

    def _consider_checks(self, gaps: Mapping[str, float], quantile: float) -> int:
        gc = S.gold_considered
        now = time.time()
        with self.db.write() as c:
            lock_study(c, CHECKS_LOCK)
            ids = list(gaps)
            seen: set[str] = set()
            for k in range(0, len(ids), 500):
                seen.update(
                    c.execute(
                        select(gc.c.query_id).where(gc.c.query_id.in_(ids[k : k + 500]))
                    ).scalars()
                )
            new = {q: float(g) for q, g in gaps.items() if q not in seen}
            if not new:
                return 0
            sizes = [float(g) for g in c.execute(select(gc.c.gap)).scalars()]
            sizes += [abs(g) for g in new.values()]
            cut = float(np.quantile(sizes, quantile))
            c.execute(
                insert(gc),
                [{"query_id": q, "gap": abs(g), "created_at": now} for q, g in new.items()],
            )
            rows = [
                {"query_id": q, "p": 1.0 if g > 0 else 0.0, "source": "oracle", "created_at": now}
                for q, g in new.items()
                if g != 0 and abs(g) >= cut
            ]
            if not rows:
                return 0
            ins = self.db.insert_or_ignore(S.gold_answers).values(rows)
            done = ins.on_conflict_do_nothing().returning(S.gold_answers.c.query_id)
            return len(c.execute(done).all())

    # ----- overlap: how many people answered (or hold) each pair ------------------------------------
    def reserve(
        self,
        study_id: str,
        annotator_id: str,
        candidates: Sequence[Query],
        *,
        overlap: int,
        reserve_s: float,
        exclude: Iterable[str] = (),
    ) -> Query | None:
        """Put the first of ``candidates`` that has a place free for ``annotator_id`` on their
        screen and hold that place for them: counted and taken in one write transaction under
        the study's lock (:func:`lock_study`), so no two people, through any studio worker, take
        a pair's last place. A pair has a place free when fewer than ``overlap`` other people
        answered it (answers that count, by the pair's two sides across query ids, so a pair
        asked again under a new id is the same pair) or hold it (a study showed it to them in
        the last ``reserve_s`` seconds and they did not skip it; queries the trainer withdrew
        hold nothing); an attention check always has, and so has a pair they hold already.
        The one taken counts as shown to them from now (``served_at``: the first time counts)
        and their hold starts again (``reserved_at`` = now). ``exclude``: people whose answers
        and holds do not count (the excluded). None, writing nothing, when no candidate has a
        place."""
        if not candidates:
            return None
        st = S.queue_states
        gone = set(exclude) | {annotator_id}
        ids = [q.id for q in candidates]
        for attempt in range(2):  # a concurrent first row of the same (person, query): again
            try:
                with self.db.write() as c:
                    lock_study(c, study_id)
                    now = time.time()
                    checks = set(
                        c.execute(
                            select(S.gold_answers.c.query_id).where(
                                S.gold_answers.c.query_id.in_(ids)
                            )
                        ).scalars()
                    )
                    mine = set(
                        c.execute(
                            select(st.c.query_id).where(
                                st.c.annotator_id == annotator_id,
                                st.c.reserved_at >= now - reserve_s,
                                st.c.query_id.in_(ids),
                            )
                        ).scalars()
                    )
                    # only the candidates' pairs (under any query id) are counted
                    same = self._pairs.ids(c, {pair_key(q) for q in candidates})
                    people = _pair_people(c, since=now - reserve_s, gone=gone, only=same)
                    for q in candidates:
                        if (
                            q.id in checks
                            or q.id in mine
                            or len(people.get(pair_key(q), ())) < overlap
                        ):
                            upsert(
                                c,
                                st,
                                {"annotator_id": annotator_id, "query_id": q.id},
                                {
                                    "served_at": func.coalesce(st.c.served_at, now),
                                    "reserved_at": now,
                                },
                                new_row={
                                    "served_at": now,
                                    "skipped_at": None,
                                    "skips": 0,
                                    "reserved_at": now,
                                },
                            )
                            return q
                    return None
            except IntegrityError:
                if attempt:
                    raise
        raise AssertionError("unreachable")

    def pair_counts(
        self, *, reserved_since: float, exclude: Iterable[str] = ()
    ) -> dict[tuple[str, ...], int]:
        """pair key (:func:`~preflab.store.person_queue.pair_key`: its two sides) → people who
        answered it under any query id (answers that count, ``exclude``'s people left out) or
        hold it since ``reserved_since`` (see :meth:`reserve`) without having answered it."""
        with self.db.read() as c:
            people = _pair_people(c, since=reserved_since, gone=set(exclude))
        return {k: len(v) for k, v in people.items()}

    def overlap_counts(
        self, *, reserved_since: float, exclude: Iterable[str] = ()
    ) -> dict[str, int]:
        """query id → :meth:`pair_counts` of its pair, for every query whose pair has one."""
        counts = self.pair_counts(reserved_since=reserved_since, exclude=exclude)
        qs = S.queries
        with self.db.read() as c:
            rows = c.execute(select(qs.c.id, qs.c.a, qs.c.b)).all()
        out = {i: counts.get(sides_key(a, b), 0) for i, a, b in rows}
        return {i: n for i, n in out.items() if n}

    # ----- a participant's assignment, picked in SQL --------------------------------------------
    def assignment(
        self,
        annotator_id: str,
        *,
        kind: str | None,
        exclude: Sequence[str] = (),
        overlap: int,
        reserved_since: float,
        not_counting: Iterable[str] = (),
        checks_apart: bool,
        limit: int | None = None,
    ) -> list[Query]:
        """The queries of the annotator's queue (:func:`~preflab.store.person_queue.queue_select`:
        each pair once, none they answered, none in ``exclude``; kinds answered by streams left
        out) whose pair fewer than ``overlap`` people answered or hold (:meth:`pair_counts`
        since ``reserved_since``; ``not_counting``'s people and the annotator do not count),
        fewest first, ties in the queue's order; ``checks_apart``: no attention check. With
        ``limit``, the first ones only, picked by the database: the queue's first pairs nobody
        answered or holds, then, when those are too few, the first of the pairs somebody did."""
        if limit == 0 or overlap <= 0:
            return []
        qs = S.queries
        took = _took(reserved_since, {*not_counting, annotator_id})
        n = _per_pair(took)
        where = _assignable(checks_apart)
        nobody = queue_select(
            annotator_id,
            kind=kind,
            exclude=exclude,
            whole=limit is None,
            where=[*where, qs.c.pair_key.not_in(select(took.c.pk))],
        )
        some = queue_select(
            annotator_id,
            kind=kind,
            exclude=exclude,
            whole=False,
            where=[*where, n.c.n < overlap],
            first=[n.c.n],
            join=(n, n.c.pk == qs.c.pair_key),
        )
        with self.db.read() as c:
            out = [Query.from_row(r) for r in c.execute(_cut(nobody, limit)).mappings()]
            if limit is None or len(out) < limit:
                more = None if limit is None else limit - len(out)
                seen = {q.id for q in out}  # (PostgreSQL: an answer may come in between)
                out += [
                    q
                    for q in map(Query.from_row, c.execute(_cut(some, more)).mappings())
                    if q.id not in seen
                ]
        return out

    def assignment_counts(
        self,
        annotator_id: str,
        *,
        kind: str | None,
        exclude: Sequence[str] = (),
        overlap: int,
        reserved_since: float,
        not_counting: Iterable[str] = (),
        checks_apart: bool,
    ) -> dict[str, int]:
        """How many queries of each kind (kinds with none left out) :meth:`assignment` returns
        with these arguments, counted in the database."""
        if overlap <= 0:
            return {}
        qs = S.queries
        n = _per_pair(_took(reserved_since, {*not_counting, annotator_id}))
        q = (
            select(qs.c.kind, func.count())
            .where(
                *fresh_conditions(annotator_id, kind=kind, exclude=exclude, whole=True),
                *_assignable(checks_apart),
                qs.c.pair_key.not_in(select(n.c.pk).where(n.c.n >= overlap)),
            )
            .group_by(qs.c.kind)
        )
        with self.db.read() as c:
            return {str(k): int(v) for k, v in c.execute(q).all()}

    def first_check(
        self, annotator_id: str, *, kind: str | None, exclude: Sequence[str] = ()
    ) -> Query | None:
        """The first attention check of the annotator's queue (kinds answered by streams left
        out; ``exclude`` as in :meth:`assignment`), or None."""
        qs, g = S.queries, S.gold_answers
        check = select(g.c.query_id).where(g.c.query_id == qs.c.id).correlate(qs).exists()
        q = queue_select(  # EXISTS: SQLite reads the queue, not every check, to find the first
            annotator_id,
            kind=kind,
            exclude=exclude,
            whole=False,
            where=[qs.c.kind.not_in(stream_kind_names()), check],
        ).limit(1)
        with self.db.read() as c:
            r = c.execute(q).mappings().first()
        return Query.from_row(r) if r else None

    def undecided(
        self, annotator_id: str, *, kind: str | None, exclude: Sequence[str] = ()
    ) -> list[Query]:
        """The queries of the annotator's queue (kinds answered by streams left out; ``exclude``
        as in :meth:`assignment`) that may become oracle attention checks and were not
        considered yet (:meth:`consider_checks`): pairs of one segment a side. Looked for among
        the few queries not decided yet (kept in memory, read on from the last query seen),
        never among every open query."""
        with self.db.read() as c:
            ids = self._undecided.ids(c)
            return [
                Query.from_row(r)
                for r in self._in_queue(c, annotator_id, ids, kind=kind, exclude=exclude)
            ]

    def in_queue(
        self,
        annotator_id: str,
        query_ids: Iterable[str],
        *,
        kind: str | None,
        exclude: Sequence[str] = (),
    ) -> set[str]:
        """Those of ``query_ids`` in the annotator's queue (as :meth:`undecided` looks) that are
        pairs of one segment a side."""
        with self.db.read() as c:
            rows = self._in_queue(c, annotator_id, query_ids, kind=kind, exclude=exclude)
            return {str(r["id"]) for r in rows}

    def _in_queue(
        self,
        c: Any,
        annotator_id: str,
        query_ids: Iterable[str],
        *,
        kind: str | None,
        exclude: Sequence[str],
    ) -> list[Any]:
        """The rows of those of ``query_ids`` in the annotator's queue, of a kind not answered
        by streams, that are pairs of one segment a side, in the order stored; read on ``c``."""
        qs, ids = S.queries, list(dict.fromkeys(query_ids))
        rows: list[Any] = []
        for k in range(0, len(ids), 500):
            rows += c.execute(
                select(qs).where(
                    qs.c.id.in_(ids[k : k + 500]),
                    qs.c.kind.not_in(stream_kind_names()),
                    *fresh_conditions(annotator_id, kind=kind, exclude=exclude, whole=False),
                )
            ).mappings()
        return sorted((r for r in rows if _one_a_side(r["a"], r["b"])), key=lambda r: r["seq"])


def _pair_people(
    c: Any, *, since: float, gone: set[str], only: Sequence[str] | None = None
) -> dict[tuple[str, ...], set[str]]:
    """pair key → the people who answered it (answers that count, any query id) or hold it
    since ``since`` (a query not withdrawn), ``gone`` left out; read on ``c``. ``only``: just
    the answers and holds of these query ids (indexed lookups instead of every answer)."""
    j, st, qs, w = S.judgements, S.queue_states, S.queries, S.withdrawals
    answered_where = [not_retracted(), j.c.annotator_id.not_in(gone)]
    held_where = [
        st.c.reserved_at >= since,
        st.c.annotator_id.not_in(gone),
        st.c.query_id.not_in(select(w.c.query_id)),
    ]
    if only is not None:
        answered_where.append(j.c.query_id.in_(list(only)))
        held_where.append(st.c.query_id.in_(list(only)))
    answered = c.execute(
        select(qs.c.a, qs.c.b, j.c.annotator_id)
        .select_from(j.join(qs, qs.c.id == j.c.query_id))
        .where(*answered_where)
    ).all()
    held = c.execute(
        select(qs.c.a, qs.c.b, st.c.annotator_id)
        .select_from(st.join(qs, qs.c.id == st.c.query_id))
        .where(*held_where)
    ).all()
    people: dict[tuple[str, ...], set[str]] = {}
    for a, b, who in [*answered, *held]:
        people.setdefault(sides_key(a, b), set()).add(who)
    return people


def _took(since: float, gone: set[str]) -> Subquery:
    """(pk, who): the pair keys (the ``pair_key`` column) each person answered (answers that
    count, any query id) or holds since ``since`` (a query not withdrawn), ``gone`` left out:
    :func:`_pair_people` in SQL, once per (pair, person)."""
    j, st, w, asked = S.judgements, S.queue_states, S.withdrawals, S.queries.alias("took_q")
    answered = (
        select(asked.c.pair_key.label("pk"), j.c.annotator_id.label("who"))
        .select_from(j.join(asked, asked.c.id == j.c.query_id))
        .where(not_retracted(), j.c.annotator_id.not_in(gone), asked.c.pair_key.is_not(None))
    )
    held = (
        select(asked.c.pair_key.label("pk"), st.c.annotator_id.label("who"))
        .select_from(st.join(asked, asked.c.id == st.c.query_id))
        .where(
            st.c.reserved_at >= since,
            st.c.annotator_id.not_in(gone),
            st.c.query_id.not_in(select(w.c.query_id)),
            asked.c.pair_key.is_not(None),
        )
    )
    return union(answered, held).subquery("took")


def _per_pair(took: Subquery) -> Subquery:
    """(pk, n): the number of people of ``took`` per pair key (pairs with none left out)."""
    return select(took.c.pk, func.count().label("n")).group_by(took.c.pk).subquery("per_pair")


def _assignable(checks_apart: bool) -> list[Any]:
    """The conditions on a queries row of a study's assignment besides the person's queue: of a
    kind not answered by streams; not an attention check when ``checks_apart``."""
    qs = S.queries
    out: list[Any] = [qs.c.kind.not_in(stream_kind_names())]
    if checks_apart:
        out.append(qs.c.id.not_in(select(S.gold_answers.c.query_id)))
    return out


def _cut(q: Any, limit: int | None) -> Any:
    return q if limit is None else q.limit(limit)


def _one_a_side(a: Sequence[str], b: Sequence[str]) -> bool:
    """Whether a query with sides ``a`` and ``b`` may be an oracle attention check: one segment
    a side (the oracle compares their returns)."""
    return len(a) == len(b) == 1


class _Undecided:
    """Ids of the queries that may still become oracle attention checks: pairs of one segment a
    side, of a kind not answered by streams, neither considered nor withdrawn when last looked
    at (both are for good). Read on from the last query seen, as :class:`_PairIndex` does, and
    forgotten once decided (by this process, or another: looked up on every read)."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._seq = 0
        self._ids: dict[str, None] = {}

    def ids(self, c: Any) -> list[str]:
        """The ids not decided yet, oldest first, read on ``c``."""
        qs, gc, w = S.queries, S.gold_considered, S.withdrawals
        with self._lock:
            top = max_seq(c, qs)  # first: every query up to it has committed
            if top > self._seq:
                rows = c.execute(
                    select(qs.c.id, qs.c.a, qs.c.b)
                    .where(
                        qs.c.seq > self._seq,
                        qs.c.seq <= top,
                        qs.c.kind.not_in(stream_kind_names()),
                        qs.c.id.not_in(select(gc.c.query_id)),
                        qs.c.id.not_in(select(w.c.query_id)),
                    )
                    .order_by(qs.c.seq)
                ).all()
                self._ids.update((str(i), None) for i, a, b in rows if _one_a_side(a, b))
                self._seq = top
            ids = list(self._ids)
            for k in range(0, len(ids), 500):
                chunk = ids[k : k + 500]
                for i in c.execute(
                    select(qs.c.id).where(
                        qs.c.id.in_(chunk),
                        or_(qs.c.id.in_(select(gc.c.query_id)), qs.c.id.in_(select(w.c.query_id))),
                    )
                ).scalars():
                    self._ids.pop(str(i), None)
            return list(self._ids)

    def forget(self, ids: Iterable[str]) -> None:
        """These were decided."""
        with self._lock:
            for i in ids:
                self._ids.pop(i, None)


class _PairIndex:
    """pair key → ids of the queries that ask it, read on from the last query seen (queries
    are only added, in seq order: the seq counter's row is held until the adding transaction
    ends, so no query with a lower seq commits after one with a higher seq is read)."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._seq = -1
        self._ids: dict[tuple[str, ...], list[str]] = {}

    def ids(self, c: Any, keys: Iterable[tuple[str, ...]]) -> list[str]:
        """The ids of the queries asking any of the pairs ``keys``, read on ``c``."""
        qs = S.queries
        with self._lock:
            rows = c.execute(
                select(qs.c.id, qs.c.a, qs.c.b, qs.c.seq)
                .where(qs.c.seq > self._seq)
                .order_by(qs.c.seq)
            ).all()
            for i, a, b, seq in rows:
                self._ids.setdefault(sides_key(a, b), []).append(str(i))
                self._seq = int(seq)
            return [i for k in set(keys) for i in self._ids.get(k, ())]


def _study(r: Any) -> Study:
    return Study(
        id=r["id"], config=r["config"] or {}, closed_at=r["closed_at"], created_at=r["created_at"]
    )


def _participant(r: Any) -> Participant:
    return Participant(
        annotator_id=r["annotator_id"],
        study_id=r["study_id"],
        platform_pid=r["platform_pid"],
        platform=r["platform"] or {},
        enrolled_at=r["enrolled_at"],
        consent_at=r["consent_at"],
        consent_sha256=r["consent_sha256"],
        declined_at=r["declined_at"],
        practice=tuple(r["practice"] or ()),
        practice_done_at=r["practice_done_at"],
        completed_at=r["completed_at"],
        excluded_at=r["excluded_at"],
        excluded_reason=r["excluded_reason"],
    )
