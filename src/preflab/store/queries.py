"""Queries of every kind (what we ask), which are open to whom, and which the trainer withdrew."""

from __future__ import annotations

import hashlib
import json
import time
from collections.abc import Iterable, Mapping, Sequence
from typing import Any

from sqlalchemy import Connection, FromClause, and_, func, insert, or_, select, update

from preflab.errors import DataError
from preflab.kinds import check_query
from preflab.records import Query
from preflab.store import schema as S
from preflab.store.repository import Repository, allocate, jsonable, max_seq
from preflab.store.schema import not_retracted


class Queries(Repository):
    """Stored queries, in the selector's order (seq); each kind's rules checked on write."""

    def add(self, queries: Iterable[Query], *, withdrawn: Iterable[str] = ()) -> None:
        """Store queries (all or none), each checked by its kind; ``withdrawn``: ids among them
        (or among stored queries) withdrawn in the same transaction, so the studio never offers
        them (:meth:`withdraw`)."""
        qs = [check_query(q) for q in queries]
        away = sorted(set(withdrawn))
        if not qs and not away:
            return
        with self.db.write() as c:
            if qs:
                insert_queries(c, qs)
            _withdraw(c, away)

    def all(self, *, round: int | None = None) -> list[Query]:
        """Every query (of ``round`` when given), in the order stored."""
        with self.db.read() as c:
            q = select(S.queries).order_by(S.queries.c.seq)
            if round is not None:
                q = q.where(S.queries.c.round == round)
            rows = c.execute(q).mappings().all()
        return [Query.from_row(r) for r in rows]

    def get(self, query_id: str) -> Query | None:
        """The query with this id, or None."""
        with self.db.read() as c:
            r = c.execute(select(S.queries).where(S.queries.c.id == query_id)).mappings().first()
        return Query.from_row(r) if r else None

    def get_many(self, ids: Sequence[str]) -> list[Query]:
        """The stored queries among ``ids``, in the order asked (unknown ids are left out)."""
        wanted = list(dict.fromkeys(ids))
        got: dict[str, Query] = {}
        with self.db.read() as c:
            for k in range(0, len(wanted), 500):
                for r in c.execute(
                    select(S.queries).where(S.queries.c.id.in_(wanted[k : k + 500]))
                ).mappings():
                    got[r["id"]] = Query.from_row(r)
        return [got[i] for i in wanted if i in got]

    def stored_among(self, ids: Iterable[str]) -> list[Query]:
        """The stored queries among ``ids``, in the order stored (seq), like :meth:`all` less
        the others (indexed lookups, no full scan; unknown ids are left out)."""
        wanted = list(dict.fromkeys(ids))
        got: list[tuple[int, Query]] = []
        with self.db.read() as c:
            for k in range(0, len(wanted), 500):
                got += [
                    (int(r["seq"]), Query.from_row(r))
                    for r in c.execute(
                        select(S.queries).where(S.queries.c.id.in_(wanted[k : k + 500]))
                    ).mappings()
                ]
        return [q for _seq, q in sorted(got, key=lambda t: t[0])]

    def known_ids(self, ids: Iterable[str]) -> set[str]:
        """Which of ``ids`` are stored queries (indexed lookups, no full scan)."""
        wanted = list(dict.fromkeys(ids))
        out: set[str] = set()
        with self.db.read() as c:
            for k in range(0, len(wanted), 500):
                out |= set(
                    c.execute(
                        select(S.queries.c.id).where(S.queries.c.id.in_(wanted[k : k + 500]))
                    ).scalars()
                )
        return out

    def open_for(
        self, annotator_id: str, *, kind: str | None = None, limit: int | None = 100
    ) -> list[Query]:
        """Queries this annotator has not answered (a retracted answer does not count; a rating
        query counts as answered once they sent ratings for it) and the trainer did not
        withdraw, newest round first and in the selector's order (seq) within a round."""
        q = (
            select(S.queries)
            .where(open_to(annotator_id, kind))
            .order_by(S.queries.c.round.desc(), S.queries.c.seq)
        )
        if limit is not None:
            q = q.limit(limit)
        with self.db.read() as c:
            rows = c.execute(q).mappings().all()
        return [Query.from_row(r) for r in rows]

    def count_open_for(self, annotator_id: str, *, kind: str | None = None) -> int:
        """len(open_for(annotator_id, kind=kind, limit=None)), counted in the database."""
        q = select(func.count()).select_from(S.queries).where(open_to(annotator_id, kind))
        with self.db.read() as c:
            return int(c.execute(q).scalar_one())

    def unanswered(self) -> list[Query]:
        """Queries without any judgement yet, in the order stored."""
        with self.db.read() as c:
            answered = select(S.judgements.c.query_id)
            rows = (
                c.execute(
                    select(S.queries)
                    .where(S.queries.c.id.not_in(answered))
                    .order_by(S.queries.c.seq)
                )
                .mappings()
                .all()
            )
        return [Query.from_row(r) for r in rows]

    def unanswered_after(self, seq: int) -> tuple[list[Query], int]:
        """The queries stored after sequence number ``seq`` that have no judgement yet and were
        not withdrawn, in the order stored, and the highest seq read (``seq`` when none is new):
        the ``seq`` of the next call, which then returns only queries stored since (a reader's
        cursor; :meth:`unanswered` less the answered and withdrawn ones, read from ``seq`` on).

        A query with a seq at or below the returned one is never returned by a later call, even
        one answered or withdrawn now: each query is read once. Query seqs follow commit order
        (:func:`preflab.store.repository.allocate`: the counter row stays locked until the
        writer commits, and a rolled-back writer's seqs are handed out again), so every query
        at or below the highest seq read has committed: reading on from it skips none."""
        with self.db.read() as c:
            top = max(int(seq), max_seq(c, S.queries))  # first: every seq ≤ top has committed
            rows = (
                c.execute(
                    select(S.queries)
                    .where(
                        S.queries.c.seq > seq,
                        S.queries.c.seq <= top,
                        S.queries.c.id.not_in(select(S.judgements.c.query_id)),
                        S.queries.c.id.not_in(select(S.withdrawals.c.query_id)),
                    )
                    .order_by(S.queries.c.seq)
                )
                .mappings()
                .all()
            )
        return [Query.from_row(r) for r in rows], top

    def withdraw(self, ids: Iterable[str]) -> None:
        """Withdraw queries (idempotent): the studio stops offering them; a judgement that
        arrives for one later is still stored and counts."""
        todo = sorted(set(ids))
        if not todo:
            return
        with self.db.write() as c:
            _withdraw(c, todo)

    def annotate(self, meta: Mapping[str, Mapping[str, Any]]) -> None:
        """Merge keys into stored queries' ``meta`` (query id → keys to set; existing keys of
        the same name are replaced, others kept). Unknown ids are an error: nothing is written."""
        if not meta:
            return
        ids = sorted(meta)
        with self.db.write() as c:
            rows = dict(
                c.execute(select(S.queries.c.id, S.queries.c.meta).where(S.queries.c.id.in_(ids)))
                .tuples()
                .all()
            )
            missing = [q for q in ids if q not in rows]
            if missing:
                raise DataError(
                    f"cannot annotate queries that are not stored: {missing[:5]}; store the "
                    "queries first (store.queries.add)"
                )
            for q in ids:
                merged = {**(rows[q] or {}), **jsonable(dict(meta[q]))}
                c.execute(update(S.queries).where(S.queries.c.id == q).values(meta=merged))

    def withdrawn_ids(self) -> set[str]:
        """Ids of every withdrawn query."""
        with self.db.read() as c:
            return set(c.execute(select(S.withdrawals.c.query_id)).scalars())

    def count(self) -> int:
        """Number of stored queries."""
        return self._count(S.queries)

    def max_seq(self) -> int:
        """The highest query sequence number (0 when none)."""
        return self._max_seq(S.queries)


def _withdraw(c: Connection, ids: Sequence[str]) -> None:
    """Withdraw the queries ``ids`` not withdrawn yet, inside a write transaction."""
    if not ids:
        return
    have = set(
        c.execute(select(S.withdrawals.c.query_id).where(S.withdrawals.c.query_id.in_(ids)))
        .scalars()
        .all()
    )
    rows = [{"query_id": q, "created_at": time.time()} for q in ids if q not in have]
    if rows:
        c.execute(insert(S.withdrawals), rows)


def open_to(annotator_id: str, kind: str | None, qs: FromClause = S.queries) -> Any:
    """The condition "query row ``qs`` is open to this annotator" of :meth:`Queries.open_for`
    (of ``kind`` when given), on the queries table or an alias of it."""
    answered = select(S.judgements.c.query_id).where(
        S.judgements.c.annotator_id == annotator_id, not_retracted()
    )
    rated = select(S.ratings.c.stream_id).where(S.ratings.c.annotator_id == annotator_id)
    created_by = qs.c.meta["created_by"].as_string()
    cond = and_(
        qs.c.id.not_in(answered),
        qs.c.id.not_in(rated),
        qs.c.id.not_in(select(S.withdrawals.c.query_id)),  # the trainer withdrew it
        # a group comparison someone composed in the studio is theirs, not a question to all
        or_(created_by.is_(None), created_by != "studio"),
    )
    if kind is not None:
        cond = and_(cond, qs.c.kind == kind)
    return cond


def join_side(ids: Iterable[str]) -> str:
    """One side of a query as a string: its segment ids, sorted, joined by U+001F."""
    return "\x1f".join(sorted(ids))


def canonical_sides(a: Iterable[str], b: Iterable[str]) -> tuple[str, str]:
    """A query's two sides (:func:`join_side`) in a fixed order: the same for both orders."""
    x, y = join_side(a), join_side(b)
    return (x, y) if x <= y else (y, x)


def stored_pair_key(a: Iterable[str], b: Iterable[str]) -> str:
    """The ``pair_key`` column of a query whose sides are ``a`` and ``b``: the SHA-256 (hex) of
    :func:`canonical_sides` written as a JSON list, so two queries share it exactly when their
    :func:`canonical_sides` are equal (:func:`preflab.store.person_queue.pair_key`: the same
    pair, in either order). A digest, not the sides joined: a query's segment ids may hold any
    character (no separator between the sides is safe; JSON quotes them) and its sides can be
    long (a ranking of 8, a stream), while an index wants short keys of one length."""
    text = json.dumps(list(canonical_sides(a, b)))
    return hashlib.sha256(text.encode()).hexdigest()


def insert_queries(c: Connection, qs: Sequence[Query]) -> None:
    """Insert checked queries (:func:`preflab.kinds.check_query`) inside a write transaction of
    the caller's, in order, with the next sequence numbers (:meth:`Queries.add` in one of its
    own; :meth:`preflab.store.answers.Answers.add` stores a studio-composed query with its
    answer). Nothing happens for none."""
    if not qs:
        return
    seq0 = allocate(c, "queries", len(qs))
    c.execute(
        insert(S.queries),
        [
            {
                "id": q.id,
                "kind": q.kind,
                "a": list(q.a),
                "b": list(q.b),
                "round": q.round,
                "created_at": q.created_at,
                "meta": jsonable(q.meta),
                "seq": seq0 + k,
                "pair_key": stored_pair_key(q.a, q.b),  # derived: never a caller's
            }
            for k, q in enumerate(qs)
        ],
    )
