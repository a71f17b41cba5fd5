"""What each person is asked next in the studio: their queue of open queries (each pair once,
skipped ones last, a share re-asked as a consistency check), what they were served and skipped,
and how consistent their repeated answers were. Kept in the run's store (table queue_states)."""

from __future__ import annotations

import hashlib
import time
from collections.abc import Iterable, Sequence
from typing import Any

from sqlalchemy import func, select

from preflab.errors import DataError
from preflab.kinds import kind_of, repeatable_kind_names, stream_kind_names
from preflab.records import Query
from preflab.store import schema as S
from preflab.store.queries import Queries
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
        way from the browser."""
        if not 0.0 <= repeat_share <= 1.0:
            raise DataError(f"repeat_share must be in [0, 1], got {repeat_share}")
        open_qs = self.queries.open_for(annotator_id, kind=kind, limit=None)
        answers = self._pair_answers(annotator_id)
        j, r, qs, st = S.judgements, S.retractions, S.queries, S.queue_states
        with self.db.read() as c:
            skipped = dict(
                c.execute(
                    select(st.c.query_id, st.c.skipped_at).where(
                        st.c.annotator_id == annotator_id, st.c.skipped_at.is_not(None)
                    )
                ).all()
            )
            repeats: list[Query] = []
            if repeat_share > 0:
                answered_q = (
                    select(qs)
                    .where(
                        qs.c.id.in_(
                            select(j.c.query_id).where(
                                j.c.annotator_id == annotator_id,
                                j.c.id.not_in(select(r.c.judgement_id)),
                            )
                        )
                    )
                    .order_by(qs.c.round.desc(), qs.c.seq)
                )
                answered_q = answered_q.where(qs.c.kind.in_(repeatable_kind_names()))
                for row in c.execute(answered_q).mappings():
                    q = Query.from_row(row)
                    n, decisive = answers.get(pair_key(q), (0, 0))
                    if n == 1 and decisive == 1 and _draw(annotator_id, q) < repeat_share:
                        repeats.append(q)
        gone = set(exclude)
        gone_keys = {pair_key(q) for q in open_qs if q.id in gone}
        fresh: list[Query] = []
        keys: set[tuple[str, ...]] = set()
        for q in open_qs:
            if q.id in gone:
                continue
            if kind_of(q).streams:
                fresh.append(q)
                continue
            key = pair_key(q)
            if key in answers or key in keys or key in gone_keys:
                continue
            keys.add(key)
            fresh.append(q)
        order = {q.id: k for k, q in enumerate(fresh)}
        fresh.sort(
            key=lambda q: (
                -q.round,
                q.id in skipped,
                skipped.get(q.id) or 0.0,
                order[q.id],
            )
        )
        out = fresh + [q for q in repeats if q.id not in gone and pair_key(q) not in keys]
        return out if limit is None else out[:limit]

    def _pair_answers(self, annotator_id: str) -> dict[tuple[str, ...], tuple[int, int]]:
        """pair key → (answers that count, of which with a preference) of one annotator."""
        j, qs = S.judgements, S.queries
        q = (
            select(qs.c.a, qs.c.b, j.c.p)
            .select_from(j.join(qs, qs.c.id == j.c.query_id))
            .where(
                j.c.annotator_id == annotator_id,
                not_retracted(),
                qs.c.kind.not_in(stream_kind_names()),
            )
        )
        out: dict[tuple[str, ...], tuple[int, int]] = {}
        with self.db.read() as c:
            for a, b, p in c.execute(q):
                key = _side_key(a, b)
                n, d = out.get(key, (0, 0))
                out[key] = (n + 1, d + int(p is not None))
        return out

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
        n, decisive = self._pair_answers(annotator_id).get(pair_key(q), (0, 0))
        return n == 1 and decisive == 1 and _draw(annotator_id, q) < repeat_share

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


def _side(ids: Iterable[str]) -> str:
    return "\x1f".join(sorted(ids))


def _side_key(a: Iterable[str], b: Iterable[str]) -> tuple[str, ...]:
    x, y = _side(a), _side(b)
    return (x, y) if x <= y else (y, x)


def _draw(annotator_id: str, q: Query) -> float:
    """A uniform number in [0, 1) fixed by (annotator, pair): whether the pair is re-asked."""
    digest = hashlib.sha256(("\x00".join((annotator_id, *pair_key(q)))).encode()).digest()
    return int.from_bytes(digest[:8], "big") / 2.0**64
