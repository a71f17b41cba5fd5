"""Answers: judgements of every kind (append-only), their retractions (undo), and the trainer's
collection mark (up to which seq judgements count for good)."""

from __future__ import annotations

import hashlib
import json
import time
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from typing import Any

from sqlalchemy import Text, and_, cast, func, insert, select, text, update
from sqlalchemy.exc import IntegrityError

from preflab.errors import ConflictError, DataError, QuotaReachedError
from preflab.kinds import check_judgement, check_query, stream_kind_names
from preflab.records import Judgement, Query
from preflab.store import schema as S
from preflab.store.person_queue import pair_key
from preflab.store.queries import Queries, insert_queries
from preflab.store.repository import Database, Repository, allocate, jsonable, max_seq, upsert
from preflab.store.rounds import (
    TRAINER,
    Rounds,
    collected_by_trainer,
    cursor_seq,
    lock_undo,
    put_cursor,
    trainer_gaps,
)
from preflab.store.schema import not_retracted

UNDO_CLOSED = "undo_closed"
"""The run setting (a time stamp) that says the run has ended and undo is closed for good."""
RUN_ENDED = (
    "The run has ended: this answer counts in its labels and can no longer be undone "
    "(the undo window closes when the run ends)."
)
"""Why :meth:`Answers.retract` refuses once the run has ended (the studio shows it)."""
CODE_SHOWN = (
    "your completion code was shown; your answers stand (a study's answers can no longer be "
    "undone once it has given you its completion code)"
)
"""Why :meth:`Answers.retract` refuses a study participant who was shown the completion code
(the studio shows it)."""
TAKEN_BACK = (
    "this pair was taken back by the trainer; take the next one (your answer to it was not saved)"
)
"""Why :meth:`Answers.add` with ``refuse_withdrawn`` refuses an answer to a withdrawn query."""


QUOTA_LOCK = 0x71756F74
"""The first key of the PostgreSQL advisory lock :func:`lock_answers_of` takes (the second
names the annotator)."""


@dataclass(frozen=True)
class Quota:
    """A cap on one annotator's answers: :meth:`Answers.add` refuses a judgement that would take
    their answers that count (undone ones left out) past ``answers``, or that comes once their
    time is up (``deadline``). Checked in the transaction that stores the answer, so answers
    sent at once (from several tabs) cannot all pass."""

    annotator_id: str
    """Whose answers are capped."""
    answers: int = 0
    """How many answers may count at most (a study's ``quota_answers``); 0: no cap on their
    number."""
    deadline: float | None = None
    """When their time quota runs out (epoch seconds: a study participant's start plus the
    study's ``quota_minutes``); None: no time quota. Time on task runs from the start to their
    latest answer that counts, so the time is up once that answer was given at or after the
    deadline: the answer that reaches it is stored, none after it."""


def lock_answers_of(c: Any, annotator_id: str) -> None:
    """Serialise this write transaction with every other that stores a capped answer of
    ``annotator_id`` (:class:`Quota`), so each counts the answers the others committed.
    PostgreSQL: a transaction-scoped advisory lock keyed by the annotator; SQLite: nothing, its
    write transactions run one at a time (BEGIN IMMEDIATE)."""
    if c.dialect.name == "postgresql":
        key = int.from_bytes(hashlib.sha256(annotator_id.encode()).digest()[:4], "big") - 2**31
        c.execute(text("SELECT pg_advisory_xact_lock(:ns, :key)"), {"ns": QUOTA_LOCK, "key": key})


def _check_quota(c: Any, quota: Quota, js: Sequence[Judgement]) -> None:
    """QuotaReachedError when storing ``js`` would take ``quota``'s annotator past it, or their
    time is up (call after :func:`lock_answers_of`, in the same transaction)."""
    mine = sum(j.annotator_id == quota.annotator_id for j in js)
    if not mine:
        return
    have = _counted(c, quota.annotator_id)
    if quota.answers > 0 and have + mine > quota.answers:
        raise QuotaReachedError(
            f"{quota.annotator_id} has {have} answers that count, and the quota is "
            f"{quota.answers}; nothing was written"
        )
    if _time_up(c, quota):
        raise QuotaReachedError(
            f"{quota.annotator_id}'s time on task has reached the time quota (their latest "
            "answer came after its end); nothing was written"
        )


def _reached(c: Any, quota: Quota) -> bool:
    """Whether ``quota``'s annotator has reached it: as many answers that count as it allows, or
    their time is up (call after :func:`lock_answers_of`, in the same transaction)."""
    if quota.answers > 0 and _counted(c, quota.annotator_id) >= quota.answers:
        return True
    return _time_up(c, quota)


def _counted(c: Any, annotator_id: str) -> int:
    """How many answers of ``annotator_id`` count (undone ones left out)."""
    j = S.judgements
    q = select(func.count()).select_from(j).where(j.c.annotator_id == annotator_id, not_retracted())
    return int(c.execute(q).scalar_one())


def _time_up(c: Any, quota: Quota) -> bool:
    """Whether ``quota``'s time is up: the latest answer of its annotator that counts (the one
    that ends their time on task) was given at or after the deadline."""
    if quota.deadline is None:
        return False
    j = S.judgements
    last = c.execute(
        select(j.c.created_at)
        .where(j.c.annotator_id == quota.annotator_id, not_retracted())
        .order_by(j.c.seq.desc())
        .limit(1)
    ).scalar()
    return last is not None and float(last) >= quota.deadline


def _undo_closed(c: Any) -> bool:
    """Whether the run has ended and closed undo (:meth:`Answers.close_undo`)."""
    r = c.execute(select(S.settings.c.key).where(S.settings.c.key == UNDO_CLOSED)).first()
    return r is not None


class Answers(Repository):
    """Judgements, retractions and the trainer's collection mark."""

    def __init__(self, db: Database, queries: Queries, rounds: Rounds) -> None:
        super().__init__(db)
        self.queries = queries
        """The queries the judgements answer (checked on write)."""
        self.rounds = rounds
        """Where the trainer's cursor is kept (:data:`preflab.store.rounds.TRAINER`)."""

    def add(
        self,
        judgements: Iterable[Judgement],
        *,
        if_absent: bool = False,
        with_queries: Sequence[Query] = (),
        quota: Quota | None = None,
        once: bool = False,
        by_pair: bool = False,
        refuse_undone: bool = False,
        refuse_withdrawn: bool = False,
    ) -> int:
        """Append judgements (all or none); each must answer a stored query, or one of
        ``with_queries``. Returns the number of rows written.

        With ``if_absent=True`` a judgement whose id is already stored with the same content
        (query, annotator, source, p, response time, meta; the time is not compared) is skipped,
        so a repeated submission is stored once; the same id with other content raises
        :class:`ConflictError`.

        ``with_queries``: queries composed with their answers (a group comparison made in the
        studio), stored in the same transaction as the judgements, those not stored yet (by
        id); so a reader never meets such a query without its answer.

        ``quota``: raise :class:`~preflab.errors.QuotaReachedError` (nothing written) when the new
        judgements would take its annotator's answers past it (a repeated submission already
        stored passes).

        ``once``: raise :class:`ConflictError` (nothing written) when a new judgement's annotator
        already has an answer that counts on its query (one answer per person and query; checked
        in the transaction that stores it, so two sent at once cannot both pass).
        ``by_pair`` (with ``once``): one answer per person and pair instead, the pair named by
        its two sides in either order (:func:`~preflab.store.person_queue.pair_key`), across
        query ids and rounds: a pair the trainer asks again under a new id is still answered
        once (a study participant's rule).

        ``refuse_undone`` (with ``if_absent``): a judgement whose id is stored but was undone
        raises :class:`ConflictError` instead of counting as already stored (a resend does not
        bring an undone answer back, and must not be reported as saved).

        ``refuse_withdrawn``: a new judgement answering a query the trainer withdrew raises
        :class:`ConflictError` (:data:`TAKEN_BACK`; nothing written), checked in the storing
        transaction. Without it such an answer (one already on its way) is stored and counts.
        """
        js = list(judgements)
        if not js:
            return 0
        new_queries = [check_query(q) for q in with_queries]
        self._check_answers(js, new_queries)
        for attempt in range(3):
            try:
                with self.db.write() as c:  # the foreign key checks the query ids
                    if quota is not None:
                        lock_answers_of(c, quota.annotator_id)
                    if once:
                        for who in sorted({j.annotator_id for j in js}):
                            lock_answers_of(c, who)
                    if new_queries:
                        ids = [q.id for q in new_queries]
                        have = set(
                            c.execute(select(S.queries.c.id).where(S.queries.c.id.in_(ids)))
                            .scalars()
                            .all()
                        )
                        insert_queries(c, [q for q in new_queries if q.id not in have])
                    js_new = _absent(c, js, refuse_undone=refuse_undone) if if_absent else js
                    if refuse_withdrawn:
                        _check_not_withdrawn(c, js_new)
                    if once:
                        _check_once(c, js_new, by_pair=by_pair)
                    if quota is not None:
                        _check_quota(c, quota, js_new)
                    if js_new:
                        rows = [_judgement_row(j) for j in js_new]
                        if self.is_sqlite:  # one writer at a time: seqs in commit order
                            seq0 = allocate(c, "judgements", len(rows))
                            for k, r in enumerate(rows):
                                r["seq"] = seq0 + k
                        else:  # no lock: the sequence's nextval; xid first (see StoreSource)
                            c.execute(text("SELECT pg_current_xact_id()"))
                        c.execute(insert(S.judgements), rows)
                    return len(js_new)
            except IntegrityError as exc:
                qids = {j.query_id for j in js} - {q.id for q in new_queries}
                unknown = qids - self.queries.known_ids(qids)
                if unknown:
                    raise DataError(
                        f"judgement(s) answer unknown query id(s) {sorted(unknown)[:3]}; "
                        "store the queries first; nothing was written"
                    ) from exc
                if (if_absent or new_queries) and attempt < 2:
                    continue  # a concurrent writer stored the same id first: compare again
                raise DataError(
                    f"judgement ids must be unique; nothing was written: {exc.orig}"
                ) from exc
        raise AssertionError("unreachable")

    def _check_answers(self, js: list[Judgement], new_queries: Sequence[Query] = ()) -> None:
        """A DataError, before anything is written, for a judgement that is no well-formed
        answer to its query (stored, else among ``new_queries``) as the query's kind defines
        it (a ranking's ranks)."""
        by_id = {q.id: q for q in new_queries}
        by_id |= {q.id: q for q in self.queries.get_many([j.query_id for j in js])}
        for j in js:
            q = by_id.get(j.query_id)
            if q is not None:  # unknown ids: the foreign key's error below names them
                try:
                    check_judgement(q, j)
                except DataError as exc:
                    raise DataError(f"{exc}; nothing was written") from exc

    def get(self, judgement_id: str) -> tuple[int, Judgement] | None:
        """(seq, judgement) for this id, or None."""
        with self.db.read() as c:
            r = (
                c.execute(select(S.judgements).where(S.judgements.c.id == judgement_id))
                .mappings()
                .first()
            )
        return (int(r["seq"]), Judgement.from_row(r)) if r else None

    def on_query(self, annotator_id: str, query_id: str) -> list[tuple[str, bool]]:
        """This annotator's answers that count (undone ones left out) on one query, oldest
        first: (judgement id, whether its author can still undo it)."""
        j = S.judgements
        q = (
            select(j.c.id, j.c.seq)
            .where(j.c.annotator_id == annotator_id, j.c.query_id == query_id, not_retracted())
            .order_by(j.c.seq)
        )
        with self.db.read() as c:
            collected, gaps = cursor_seq(c, TRAINER), trainer_gaps(c)
            rows = c.execute(q).all()
        return [(str(r[0]), int(r[1]) > collected or int(r[1]) in gaps) for r in rows]

    def on_pair(self, annotator_id: str, q: Query) -> list[tuple[str, bool]]:
        """:meth:`on_query` over every query that asks ``q``'s pair (its two sides in either
        order, :func:`~preflab.store.person_queue.pair_key`), ``q`` itself included."""
        j = S.judgements
        rows = (
            select(S.queries, j.c.id.label("judgement_id"), j.c.seq.label("judgement_seq"))
            .select_from(j.join(S.queries, S.queries.c.id == j.c.query_id))
            .where(j.c.annotator_id == annotator_id, not_retracted())
            .where(S.queries.c.kind.not_in(stream_kind_names()))
            .order_by(j.c.seq)
        )
        key = pair_key(q)
        with self.db.read() as c:
            collected, gaps = cursor_seq(c, TRAINER), trainer_gaps(c)
            found = c.execute(rows).mappings().all()
        return [
            (
                str(r["judgement_id"]),
                int(r["judgement_seq"]) > collected or int(r["judgement_seq"]) in gaps,
            )
            for r in found
            if pair_key(Query.from_row(r)) == key
        ]

    def undone(self, judgement_id: str) -> bool:
        """Whether this judgement was retracted (undone by its author)."""
        r = S.retractions
        with self.db.read() as c:
            hit = c.execute(select(r.c.judgement_id).where(r.c.judgement_id == judgement_id))
            return hit.first() is not None

    def judgements(
        self, *, after_seq: int = 0, source: str | None = None, include_retracted: bool = False
    ) -> list[tuple[int, Judgement]]:
        """(seq, judgement) pairs with seq > ``after_seq``, oldest first: the judgements that
        count, i.e. without retracted (undone) ones unless ``include_retracted``.

        Rows were validated when they were written, so they are rebuilt without validating
        again, and ``meta`` is decoded here (most are empty): 100k judgements load in about a
        second."""
        j = S.judgements
        cols = (
            j.c.seq,
            j.c.id,
            j.c.query_id,
            j.c.annotator_id,
            j.c.source,
            j.c.p,
            j.c.created_at,
            j.c.response_time_s,
            cast(j.c.meta, Text),
        )
        q = select(*cols).where(j.c.seq > after_seq).order_by(j.c.seq)
        if source is not None:
            q = q.where(j.c.source == source)
        if not include_retracted:
            q = q.where(not_retracted())
        with self.db.read() as c:
            rows = c.execute(q).all()
        return [(int(r[0]), _stored_judgement(r)) for r in rows]

    def by_annotator(
        self, annotator_id: str, *, limit: int = 50, include_retracted: bool = False
    ) -> list[tuple[int, Judgement]]:
        """This annotator's (seq, judgement) pairs, newest first."""
        q = (
            select(S.judgements)
            .where(S.judgements.c.annotator_id == annotator_id)
            .order_by(S.judgements.c.seq.desc())
            .limit(limit)
        )
        if not include_retracted:
            q = q.where(not_retracted())
        with self.db.read() as c:
            rows = c.execute(q).mappings().all()
        return [(int(r["seq"]), Judgement.from_row(r)) for r in rows]

    def recent(self, annotator_id: str, *, limit: int = 50) -> list[tuple[Judgement, bool]]:
        """This annotator's latest judgements that count (retracted ones left out), newest
        first, each with whether its author can still undo it (the trainer has not collected
        it yet)."""
        j = S.judgements
        q = (
            select(j)
            .where(j.c.annotator_id == annotator_id, not_retracted())
            .order_by(j.c.seq.desc())
            .limit(limit)
        )
        with self.db.read() as c:
            collected, gaps = cursor_seq(c, TRAINER), trainer_gaps(c)
            rows = c.execute(q).mappings().all()
        return [
            (Judgement.from_row(r), int(r["seq"]) > collected or int(r["seq"]) in gaps)
            for r in rows
        ]

    def counts_of(self, annotator_id: str, *, round: int | None) -> tuple[int, int]:
        """(judgements on queries of ``round``, judgements in total) of one annotator, not
        counting retracted ones."""
        base = and_(S.judgements.c.annotator_id == annotator_id, not_retracted())
        with self.db.read() as c:
            total = c.execute(
                select(func.count()).select_from(S.judgements).where(base)
            ).scalar_one()
            in_round = 0
            if round is not None:
                in_round = c.execute(
                    select(func.count())
                    .select_from(S.judgements.join(S.queries))
                    .where(base, S.queries.c.round == round)
                ).scalar_one()
        return int(in_round), int(total)

    def retract(self, judgement_id: str, annotator_id: str) -> None:
        """Undo an annotator's judgement (idempotent). Raises DataError for an unknown id and
        ConflictError when it is someone else's, the trainer already collected it, or its
        author is a study participant who was shown the completion code
        (:data:`CODE_SHOWN`; checked under the lock :meth:`complete_study` takes, so an undo
        and the completion page cannot both pass)."""
        try:
            with self.db.write() as c:
                lock_undo(c)  # the cursor read below is the one the trainer last committed
                lock_answers_of(c, annotator_id)  # completion (complete_study) waits for us
                r = c.execute(
                    select(S.judgements.c.seq, S.judgements.c.annotator_id).where(
                        S.judgements.c.id == judgement_id
                    )
                ).first()
                if r is None:
                    raise DataError(f"no judgement {judgement_id!r} in the store")
                if r[1] != annotator_id:
                    raise ConflictError(
                        f"judgement {judgement_id} belongs to another annotator; only its author "
                        "can undo it"
                    )
                if c.execute(
                    select(S.retractions.c.judgement_id).where(
                        S.retractions.c.judgement_id == judgement_id
                    )
                ).first():
                    return
                if _completed_at(c, annotator_id) is not None:
                    raise ConflictError(CODE_SHOWN)
                if collected_by_trainer(c, int(r[0])):
                    if _undo_closed(c):
                        raise ConflictError(RUN_ENDED)
                    raise ConflictError(
                        f"judgement {judgement_id} was already collected by the trainer and "
                        "cannot be undone; answer the query again instead (both answers are kept)"
                    )
                row = {
                    "judgement_id": judgement_id,
                    "annotator_id": annotator_id,
                    "created_at": time.time(),
                }
                c.execute(insert(S.retractions), [row])
        except IntegrityError:
            return  # a concurrent undo of the same judgement won

    def complete_study(self, quota: Quota) -> bool:
        """A study participant asks for their completion code: stamp their ``completed_at``
        (the first time counts) when they have reached ``quota`` (its answers or its time), in
        one transaction with the count and under the per-person lock :meth:`retract` and
        :meth:`add` take, so an undo either comes first (and the count sees it) or is refused
        (:data:`CODE_SHOWN`). Returns whether they are completed; False for an annotator who is
        no study participant."""
        p = S.participants
        with self.db.write() as c:
            lock_answers_of(c, quota.annotator_id)
            found = c.execute(
                select(p.c.completed_at).where(p.c.annotator_id == quota.annotator_id)
            ).first()
            if found is None:
                return False
            if found[0] is not None:
                return True
            if not _reached(c, quota):
                return False
            c.execute(
                update(p)
                .where(p.c.annotator_id == quota.annotator_id, p.c.completed_at.is_(None))
                .values(completed_at=time.time())
            )
            return True

    def retracted_ids(self) -> set[str]:
        """Ids of every retracted (undone) judgement. To drop them from judgements, ask
        :meth:`judgements` (it leaves them out) or :meth:`counted`."""
        with self.db.read() as c:
            return set(c.execute(select(S.retractions.c.judgement_id)).scalars())

    def counted(self, judgements: Sequence[Judgement], *, excluded: bool = True) -> list[Judgement]:
        """The judgements of ``judgements`` that count (not retracted, and not by a study
        participant the owner excluded), in their order. For a reader holding judgements it
        collected earlier: one undone since, or by a person excluded since, is dropped.
        ``excluded=False``: only undone ones are dropped (a person excluded may be taken back
        before the next fit)."""
        js = list(judgements)
        ids = list(dict.fromkeys(j.id for j in js))
        gone: set[str] = set()
        r, p = S.retractions, S.participants
        with self.db.read() as c:
            for k in range(0, len(ids), 500):
                gone |= set(
                    c.execute(
                        select(r.c.judgement_id).where(r.c.judgement_id.in_(ids[k : k + 500]))
                    ).scalars()
                )
            out = set(
                c.execute(select(p.c.annotator_id).where(p.c.excluded_at.is_not(None))).scalars()
                if excluded
                else ()
            )
        if not gone and not out:
            return js
        return [j for j in js if j.id not in gone and j.annotator_id not in out]

    def mark_collected(self, seq: int, *, gaps: Sequence[int] = ()) -> None:
        """The trainer has collected every judgement up to ``seq`` but those of ``gaps`` (seqs
        whose answers had not committed when it read past them): from now on they count for
        good and :meth:`retract` refuses to undo them; an answer in a gap stays undoable until
        a later mark leaves it out of the gaps."""
        self.rounds.set_cursor(TRAINER, seq, gaps=gaps)

    def close_undo(self) -> None:
        """The run has ended: every judgement stored so far counts for good, and :meth:`retract`
        refuses to undo it, saying the run has ended (:data:`RUN_ENDED`). The mark and the
        collection mark, raised to the highest seq, are one transaction, so an undo comes
        either before both (the person undid before the run ended) or after both, and is then
        refused: a reader that sees the mark can no longer see an undo succeed."""

        def close(c: Any) -> None:
            now = time.time()
            upsert(c, S.settings, {"key": UNDO_CLOSED}, {"value": now, "updated_at": now})
            top = max_seq(c, S.judgements)
            if top > cursor_seq(c, TRAINER) or trainer_gaps(c):  # every answer counts: no gaps
                put_cursor(c, TRAINER, max(top, cursor_seq(c, TRAINER)))

        self.db.write_upserts(close)

    def oldest_open_transaction(self) -> int | None:
        """PostgreSQL: the xmin of a fresh snapshot — every transaction with a lower id has
        ended. None on SQLite (one writer at a time)."""
        if self.is_sqlite:
            return None
        with self.db.read() as c:
            r = c.execute(text("SELECT pg_snapshot_xmin(pg_current_snapshot())::text::bigint"))
            return int(r.scalar_one())

    def transaction_id_bound(self) -> int | None:
        """PostgreSQL: a transaction id above every id handed out so far (it takes a new one
        and rolls it back). A snapshot's xmax is no such bound: it is the newest *ended* id
        plus one, and a younger transaction may still be open above it. None on SQLite."""
        if self.is_sqlite:
            return None
        with self.db.read() as c:
            return int(c.execute(text("SELECT pg_current_xact_id()::text::bigint")).scalar_one())

    def count(self) -> int:
        """Number of stored judgements (retracted ones included)."""
        return self._count(S.judgements)

    def max_seq(self) -> int:
        """The highest judgement sequence number (0 when none)."""
        return self._max_seq(S.judgements)


def _absent(c: Any, js: list[Judgement], *, refuse_undone: bool = False) -> list[Judgement]:
    """The judgements of ``js`` not stored yet (each id once); a stored id with other content
    raises ConflictError, and so does a stored id that was undone when ``refuse_undone``."""
    ids = [j.id for j in js]
    stored = {
        r["id"]: r
        for r in c.execute(select(S.judgements).where(S.judgements.c.id.in_(ids))).mappings()
    }
    if refuse_undone and stored:
        rt = S.retractions
        undone = c.execute(
            select(rt.c.judgement_id).where(rt.c.judgement_id.in_(list(stored))).limit(1)
        ).first()
        if undone is not None:
            raise ConflictError(
                f"judgement {undone[0]} was undone; sending it again does not bring it back, "
                "and nothing was written. Send the answer again as a new answer, with a new "
                "idempotency key"
            )
    out, seen = [], set()
    for j in js:
        r = stored.get(j.id)
        if r is None:
            if j.id not in seen:
                out.append(j)
                seen.add(j.id)
            continue
        old = _judgement_row(Judgement.from_row(r))
        new = _judgement_row(j)
        for key in ("query_id", "annotator_id", "source", "p", "response_time_s", "meta"):
            if old[key] != new[key]:
                raise ConflictError(
                    f"judgement {j.id} is already stored with another {key} "
                    f"({old[key]!r}, not {new[key]!r}); a repeated submission must carry the "
                    "same answer. Use a new idempotency key for a new answer"
                )
    return out


def _completed_at(c: Any, annotator_id: str) -> float | None:
    """When the study participant ``annotator_id`` was shown the completion code (None: not
    yet, or no participant)."""
    p = S.participants
    r = c.execute(select(p.c.completed_at).where(p.c.annotator_id == annotator_id)).first()
    return None if r is None or r[0] is None else float(r[0])


def _check_not_withdrawn(c: Any, js: list[Judgement]) -> None:
    """ConflictError (:data:`TAKEN_BACK`) when a judgement of ``js`` answers a withdrawn query."""
    if not js:
        return
    w = S.withdrawals
    hit = c.execute(
        select(w.c.query_id).where(w.c.query_id.in_(sorted({x.query_id for x in js}))).limit(1)
    ).first()
    if hit is not None:
        raise ConflictError(TAKEN_BACK)


def _check_once(c: Any, js: list[Judgement], *, by_pair: bool = False) -> None:
    """ConflictError when a judgement of ``js`` (new ones) answers a query its annotator already
    has an answer that counts on, stored or earlier in ``js`` (call after
    :func:`lock_answers_of` for each of their annotators, in the same transaction).
    ``by_pair``: a query asking the same pair (its two sides, in either order) counts as the
    same query."""
    if not js:
        return
    if by_pair:
        _check_once_by_pair(c, js)
        return
    j = S.judgements
    pairs = {(x.annotator_id, x.query_id) for x in js}
    stored = c.execute(
        select(j.c.annotator_id, j.c.query_id, j.c.id).where(
            j.c.annotator_id.in_(sorted({a for a, _ in pairs})),
            j.c.query_id.in_(sorted({q for _, q in pairs})),
            not_retracted(),
        )
    ).all()
    have = {(a, q): jid for a, q, jid in stored if (a, q) in pairs}
    for x in js:
        key = (x.annotator_id, x.query_id)
        if key in have:
            raise ConflictError(
                f"{x.annotator_id} already answered query {x.query_id} (judgement "
                f"{have[key]}); one answer per person and query: undo that one first to change "
                "the answer; nothing was written"
            )
        have[key] = x.id


def _check_once_by_pair(c: Any, js: list[Judgement]) -> None:
    """:func:`_check_once` by pair: the queries' two sides, across query ids and rounds."""
    j, qs = S.judgements, S.queries
    asked = {
        r["id"]: pair_key(Query.from_row(r))
        for r in c.execute(select(qs).where(qs.c.id.in_(sorted({x.query_id for x in js}))))
        .mappings()
        .all()
    }
    stored = c.execute(
        select(qs, j.c.annotator_id.label("judgement_by"), j.c.id.label("judgement_id"))
        .select_from(j.join(qs, qs.c.id == j.c.query_id))
        .where(
            j.c.annotator_id.in_(sorted({x.annotator_id for x in js})),
            not_retracted(),
            qs.c.kind.not_in(stream_kind_names()),
        )
        .order_by(j.c.seq)
    ).mappings()
    have: dict[tuple[str, tuple[str, ...]], str] = {}
    for r in stored:
        have.setdefault((r["judgement_by"], pair_key(Query.from_row(r))), r["judgement_id"])
    for x in js:
        if x.query_id not in asked:
            continue  # an unknown query: the foreign key's error names it
        key = (x.annotator_id, asked[x.query_id])
        if key in have:
            raise ConflictError(
                f"{x.annotator_id} already answered the pair of query {x.query_id} (judgement "
                f"{have[key]}, maybe under another query id: the same two clips); one answer "
                "per person and pair: undo that one first to change the answer; nothing was "
                "written"
            )
        have[key] = x.id


_NEW = object.__new__


def _stored_judgement(r: Any) -> Judgement:
    """A Judgement from a (seq, id, query_id, annotator_id, source, p, created_at,
    response_time_s, meta-as-text) row, trusting what the store validated on write."""
    meta_text = r[8]
    meta = {} if not meta_text or meta_text == "{}" else json.loads(meta_text)
    out = _NEW(Judgement)
    out.__dict__.update(
        id=r[1],
        query_id=r[2],
        annotator_id=r[3],
        source=r[4],
        p=None if r[5] is None else float(r[5]),
        created_at=float(r[6]),
        response_time_s=None if r[7] is None else float(r[7]),
        meta=meta,
    )
    return out


def _judgement_row(j: Judgement) -> dict[str, Any]:
    return j.to_row() | {"meta": jsonable(j.meta)}
