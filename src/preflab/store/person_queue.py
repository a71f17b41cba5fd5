"""What each person is asked next in the studio: their queue of open queries (each pair once,
skipped ones last, a share re-asked as a consistency check), what they were served and skipped,
and how consistent their repeated answers were. Kept in the run's store (table queue_states)."""

from __future__ import annotations

import hashlib
import time
from collections.abc import Iterable, Iterator, Sequence
from typing import Any

from sqlalchemy import Connection, FromClause, RowMapping, Select, and_, func, or_, select

from preflab.errors import DataError
from preflab.kinds import repeatable_kind_names, stream_kind_names
from preflab.records import Query
from preflab.store import schema as S
from preflab.store.queries import Queries, canonical_sides, join_side, open_to, stored_pair_key
from preflab.store.repository import Database, Repository
from preflab.store.schema import not_retracted


class PersonQueues(Repository):
    """Per-annotator question queues over the store's open queries."""

    def __init__(self, db: Database, queries: Queries) -> None:
        super().__init__(db)
        self.queries = queries
        """The store's queries (their open ones for an annotator: not withdrawn, not answered
        by them)."""

    def queue(
        self,
        annotator_id: str,
        *,
        kind: str | None = None,
        limit: int | None = None,
        repeat_share: float = 0.0,
        exclude: Sequence[str] = (),
    ) -> list[Query]:
        """This annotator's queue: the open queries (:meth:`Queries.open_for`) with every pair
        they already answered left out, by its two sides in either order and across query ids
        and rounds ("can't tell" retires a pair too; an undone answer brings it back), and each
        pair once. Newest round first; within a round the selector's order, with the queries
        they skipped after the others (the last skipped last).

        ``repeat_share`` (0 = never) re-asks that share of the pairs they answered once with a
        preference, as a consistency check: each such pair is drawn once per person by a hash
        of (annotator, pair), and the re-asks come after every other query of the queue.
        ``exclude``: query ids (and so their pairs) to leave out, e.g. answers still on their
        way from the browser. ``limit``: the first ones only, picked by the database (only
        those are read, by their ``pair_key`` column and its index)."""
        _check(repeat_share, limit)
        if limit == 0:
            return []
        gone = list(dict.fromkeys(exclude))
        q = queue_select(annotator_id, kind=kind, exclude=gone, whole=limit is None)
        if limit is not None:
            q = q.limit(limit)
        with self.db.read() as c:
            out = [Query.from_row(r) for r in c.execute(q).mappings()]
            if repeat_share > 0 and (limit is None or len(out) < limit):
                need = None if limit is None else limit - len(out)
                out += [
                    Query.from_row(r)
                    for r in self._repeats(c, annotator_id, repeat_share, gone, need=need)
                ]
        return out

    def counts(
        self,
        annotator_id: str,
        *,
        kind: str | None = None,
        repeat_share: float = 0.0,
        exclude: Sequence[str] = (),
    ) -> dict[str, int]:
        """How many queries of each kind (by name; kinds with none left out) :meth:`queue` with
        these arguments returns, counted in the database (the consistency checks by reading the
        pairs this annotator answered once, not the queue)."""
        _check(repeat_share, None)
        gone = list(dict.fromkeys(exclude))
        qs = S.queries
        q = (
            select(qs.c.kind, func.count())
            .where(*_fresh(annotator_id, kind, gone, whole=True))
            .group_by(qs.c.kind)
        )
        with self.db.read() as c:
            out = {str(k): int(n) for k, n in c.execute(q).all()}
            if repeat_share > 0:
                for r in self._repeats(c, annotator_id, repeat_share, gone, need=None):
                    out[r["kind"]] = out.get(r["kind"], 0) + 1
        return out

    def _repeats(
        self,
        c: Connection,
        annotator_id: str,
        repeat_share: float,
        gone: Sequence[str],
        *,
        need: int | None,
    ) -> Iterator[RowMapping]:
        """The rows of the queries the annotator is asked again as consistency checks, newest
        round first, then seq (the first ``need``): of a kind that has them, answered by them
        (an answer that counts) and the only answer that counts of its pair, with a preference,
        and drawn (:func:`_draw`); none in ``gone``. Reads the queries of the pairs they
        answered once, never the open ones. (No re-ask asks a pair of the rest of the queue,
        which leaves out every pair they answered.)"""
        if need is not None and need <= 0:
            return
        away = set(gone)
        j, qs = S.judgements, S.queries
        asked, answers = _answers(annotator_id)
        once = (
            answers.with_only_columns(asked.c.pair_key)
            .group_by(asked.c.pair_key)
            .having(and_(func.count() == 1, func.count(j.c.p) == 1))
        )
        answered = select(j.c.query_id).where(j.c.annotator_id == annotator_id, not_retracted())
        q = (
            select(qs)
            .where(
                qs.c.id.in_(answered),
                qs.c.kind.in_(repeatable_kind_names()),
                qs.c.pair_key.in_(once),
            )
            .order_by(qs.c.round.desc(), qs.c.seq)
        )
        left = need
        for r in c.execute(q).mappings():
            if r["id"] in away or _draw(annotator_id, _side_key(r["a"], r["b"])) >= repeat_share:
                continue
            yield r
            if left is not None:
                left -= 1
                if left == 0:
                    return

    def _pair_answers(self, annotator_id: str, key: str) -> tuple[int, int]:
        """(answers that count, of which with a preference) of one annotator on the pair whose
        ``pair_key`` column is ``key``."""
        asked, answers = _answers(annotator_id)
        q = answers.with_only_columns(func.count(), func.count(S.judgements.c.p)).where(
            asked.c.pair_key == key
        )
        with self.db.read() as c:
            n, decisive = c.execute(q).one()
        return int(n), int(decisive)

    def mark_served(self, annotator_id: str, query_id: str) -> None:
        """The studio put ``query_id`` on this annotator's screen now. The first time counts:
        serving it again (after a skip, a reload, or a look-up racing the answer's own request)
        keeps the time it was first shown."""
        self._queue_state(annotator_id, query_id, served=True)

    def skip(self, annotator_id: str, query_id: str) -> None:
        """This annotator skipped ``query_id``: it moves to the end of its round in their queue,
        and a study's hold on it for them (``reserved_at``) ends."""
        self._queue_state(annotator_id, query_id, served=False)

    def _queue_state(self, annotator_id: str, query_id: str, *, served: bool) -> None:
        st = S.queue_states
        now = time.time()
        vals: dict[str, Any] = (
            {} if served else {"skipped_at": now, "skips": st.c.skips + 1, "reserved_at": None}
        )  # a skip gives up the person's hold on the pair (a study's overlap place)
        new_row = {
            "served_at": now if served else None,
            "skipped_at": None if served else now,
            "skips": 0 if served else 1,
            "reserved_at": None,
        }
        if served:  # a skip leaves the time it was shown as it is (none: never shown)
            vals["served_at"] = func.coalesce(st.c.served_at, now)
        self.db.put(st, {"annotator_id": annotator_id, "query_id": query_id}, vals, new_row=new_row)

    def served(self, annotator_id: str, query_id: str) -> bool:
        """Whether the studio ever put ``query_id`` on this annotator's screen (a skip alone does
        not count)."""
        state = self.state(annotator_id, query_id)
        return state is not None and state["served_at"] is not None

    def reasked(self, annotator_id: str, q: Query, repeat_share: float) -> bool:
        """Whether ``q`` is a consistency check this annotator is due to answer once more (it
        comes back in their queue, :meth:`queue` with ``repeat_share``): its pair was answered
        by them exactly once, with a preference, and the draw of (annotator, pair) picks it."""
        if repeat_share <= 0 or q.kind not in repeatable_kind_names():
            return False
        n, decisive = self._pair_answers(annotator_id, stored_pair_key(q.a, q.b))
        return n == 1 and decisive == 1 and _draw(annotator_id, pair_key(q)) < repeat_share

    def state(self, annotator_id: str, query_id: str) -> dict[str, Any] | None:
        """{served_at (first shown), skipped_at (last skip), skips, reserved_at (a study's hold:
        when it last showed the query to them, None after a skip)} of this annotator and query,
        or None (never served nor skipped)."""
        st = S.queue_states
        with self.db.read() as c:
            r = (
                c.execute(
                    select(st.c.served_at, st.c.skipped_at, st.c.skips, st.c.reserved_at).where(
                        st.c.annotator_id == annotator_id, st.c.query_id == query_id
                    )
                )
                .mappings()
                .first()
            )
        return dict(r) if r else None

    def consistency(self) -> dict[str, tuple[int, int]]:
        """Per annotator id: (pairs they answered with a preference at least twice, of which
        their first two such answers agree), over answers that count. The pairs are the
        studio's consistency checks (``repeat_share``) and any pair asked again before."""
        j, qs = S.judgements, S.queries
        q = (
            select(j.c.annotator_id, qs.c.a, qs.c.b, j.c.p)
            .select_from(j.join(qs, qs.c.id == j.c.query_id))
            .where(not_retracted(), j.c.p.is_not(None), qs.c.kind.not_in(stream_kind_names()))
            .order_by(j.c.seq)
        )
        firsts: dict[tuple[str, tuple[str, ...]], list[int]] = {}
        with self.db.read() as c:
            for aid, a, b, p in c.execute(q):
                key = _side_key(a, b)
                flipped = key != (_side(a), _side(b))  # the same pair shown the other way round
                side = 0 if p == 0.5 else (1 if (p > 0.5) != flipped else -1)
                votes = firsts.setdefault((aid, key), [])
                if len(votes) < 2:
                    votes.append(side)
        out: dict[str, list[int]] = {}
        for (aid, _key), votes in firsts.items():
            if len(votes) == 2:
                row = out.setdefault(aid, [0, 0])
                row[0] += 1
                row[1] += int(votes[0] == votes[1])
        return {a: (v[0], v[1]) for a, v in out.items()}


def pair_key(q: Query) -> tuple[str, ...]:
    """What makes two queries the same question: their two sides (each a set of segment ids),
    in either order."""
    return _side_key(q.a, q.b)


def sides_key(a: Iterable[str], b: Iterable[str]) -> tuple[str, ...]:
    """:func:`pair_key` of a query whose sides are ``a`` and ``b`` (e.g. read from a row)."""
    return _side_key(a, b)


_side = join_side
_side_key = canonical_sides


def fresh_conditions(
    annotator_id: str, *, kind: str | None, exclude: Sequence[str], whole: bool
) -> list[Any]:
    """The conditions on a queries row that put it in the annotator's queue of
    :meth:`PersonQueues.queue` (before its consistency checks; ``exclude``: query ids, and so
    their pairs, left out). ``whole``: written for reading every such row (a count, the whole
    queue) rather than the first few (a LIMIT); the same rows either way."""
    return _fresh(annotator_id, kind, list(dict.fromkeys(exclude)), whole=whole)


def queue_select(
    annotator_id: str,
    *,
    kind: str | None,
    exclude: Sequence[str],
    whole: bool,
    where: Sequence[Any] = (),
    first: Sequence[Any] = (),
    join: tuple[FromClause, Any] | None = None,
) -> Select[Any]:
    """The select of the queries rows of the annotator's queue (:func:`fresh_conditions`) in its
    order: newest round first, then the selector's order, the ones they skipped after the
    others of their round (the last skipped last). ``where``: more conditions on the rows;
    ``first``: order terms before the queue's own (ties keep the queue's order); ``join``: a
    (selectable, on clause) joined to the rows, for the terms of ``where`` and ``first``."""
    qs, st = S.queries, S.queue_states
    rows: FromClause = qs.outerjoin(
        st, and_(st.c.query_id == qs.c.id, st.c.annotator_id == annotator_id)
    )
    if join is not None:
        rows = rows.join(*join)
    return (
        select(qs)
        .select_from(rows)
        .where(*fresh_conditions(annotator_id, kind=kind, exclude=exclude, whole=whole), *where)
        .order_by(  # skipped ones after the others of their round, the last skipped last
            *first,
            qs.c.round.desc(),
            st.c.skipped_at.is_not(None),
            func.coalesce(st.c.skipped_at, 0.0),
            qs.c.seq,
        )
    )


def _answers(annotator_id: str) -> tuple[FromClause, Select[Any]]:
    """(``asked``, the select of the annotator's answers that count on queries of kinds not
    answered by streams, joined to those queries as ``asked``; columns to be chosen by the
    caller, :meth:`~sqlalchemy.sql.expression.Select.with_only_columns`)."""
    j, asked = S.judgements, S.queries.alias("asked")
    q = (
        select(j.c.id)
        .select_from(j.join(asked, asked.c.id == j.c.query_id))
        .where(
            j.c.annotator_id == annotator_id,
            not_retracted(),
            asked.c.kind.not_in(stream_kind_names()),
            asked.c.pair_key.is_not(None),
        )
    )
    return asked, q


def _fresh(annotator_id: str, kind: str | None, gone: Sequence[str], *, whole: bool) -> list[Any]:
    """The conditions on a queries row that put it in the annotator's queue (before the
    consistency checks): open to them (of ``kind``), not in ``gone``, and, unless its kind
    is answered by streams, a pair they have not answered (answers that count, of any
    non-stream kind), not the pair of an open query in ``gone``, and the first open query
    of its pair (newest round first, then seq).

    The same rows either way; ``whole`` only changes how the last condition is written, for
    PostgreSQL's planner: for every open query (the whole queue, a count) it is a condition of
    its own, which becomes a hash anti-join; for the first few (a LIMIT) it sits inside the OR
    with the streams, a look-up in the index for each row read, so that the scan stops after
    the first few (as a join it can become a nested loop over every query when the table's
    statistics are missing). SQLite runs both as the look-up."""
    qs, streams = S.queries, stream_kind_names()
    asked, answers = _answers(annotator_id)
    pairs = [qs.c.pair_key.not_in(answers.with_only_columns(asked.c.pair_key))]
    if gone:
        away = S.queries.alias("away")
        pairs.append(
            qs.c.pair_key.not_in(
                select(away.c.pair_key).where(
                    away.c.id.in_(gone),
                    open_to(annotator_id, kind, away),
                    away.c.pair_key.is_not(None),
                )
            )
        )
    later = _asked_before(annotator_id, kind)
    conds = [open_to(annotator_id, kind)]
    if whole:  # a non-stream row asked before: (kind not in streams) is inside ``later``
        conds += [or_(qs.c.kind.in_(streams), and_(*pairs)), ~later]
    else:
        conds.append(or_(qs.c.kind.in_(streams), and_(*pairs, ~later)))
    if gone:
        conds.append(qs.c.id.not_in(gone))
    return conds


def _asked_before(annotator_id: str, kind: str | None) -> Any:
    """The condition "the queries row is not the first of its pair": it is of a kind not
    answered by streams, and another query of such a kind asks the same pair before it (newest
    round first, then seq), open to the annotator (of ``kind``). (Whether that one is in
    ``exclude`` or answered does not matter: then so is their pair, which leaves the row out
    anyway.) Looked up by the index on (pair_key, round, seq)."""
    qs, before = S.queries, S.queries.alias("prior")
    return (
        select(before.c.id)
        .where(
            qs.c.kind.not_in(stream_kind_names()),
            before.c.pair_key == qs.c.pair_key,
            or_(
                before.c.round > qs.c.round,
                and_(before.c.round == qs.c.round, before.c.seq < qs.c.seq),
            ),
            before.c.kind.not_in(stream_kind_names()),
            open_to(annotator_id, kind, before),
        )
        .correlate(qs)
        .exists()
    )


def _check(repeat_share: float, limit: int | None) -> None:
    if not 0.0 <= repeat_share <= 1.0:
        raise DataError(f"repeat_share must be in [0, 1], got {repeat_share}")
    if limit is not None and limit < 0:
        raise DataError(f"limit must be a count ≥ 0 (or None for the whole queue), got {limit}")


def _draw(annotator_id: str, key: tuple[str, ...]) -> float:
    """A uniform number in [0, 1) fixed by (annotator, pair key): whether the pair is re-asked."""
    digest = hashlib.sha256(("\x00".join((annotator_id, *key))).encode()).digest()
    return int.from_bytes(digest[:8], "big") / 2.0**64
