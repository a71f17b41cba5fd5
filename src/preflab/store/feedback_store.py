"""FeedbackStore: SQLAlchemy over SQLite (default, WAL) or PostgreSQL (by URL).

Append-only for judgements and ratings: corrections are new rows. Every write is one
transaction, so an interrupted run keeps everything written before the interruption.
"""

from __future__ import annotations

import hashlib
import json
import math
import time
from collections.abc import Iterable, Mapping, Sequence
from pathlib import Path
from typing import Any, overload

from sqlalchemy import (
    Connection,
    Text,
    and_,
    cast,
    func,
    insert,
    inspect,
    or_,
    select,
    text,
    update,
)
from sqlalchemy.dialects.postgresql import insert as pg_insert
from sqlalchemy.dialects.sqlite import insert as sqlite_insert
from sqlalchemy.exc import (
    DatabaseError,
    IntegrityError,
    OperationalError,
    SQLAlchemyError,
)

from preflab.errors import ConflictError, DataError, StoreError
from preflab.kinds import check_judgement, check_query
from preflab.records import Annotator, Judgement, Query, Rating, Row, Segment
from preflab.store import migrate
from preflab.store import schema as S
from preflab.store.arrays import ArrayStore
from preflab.store.engine import (
    LOCK_WAIT_S,
    guard_public_methods,
    make_engine,
    mask_url,
    reason,
    retry_locked,
    strip_password,
    url_of,
    writer,
)
from preflab.store.llm_cache import LLMCache
from preflab.store.person_queue import PersonQueues
from preflab.store.schema import APP_NAME, SCHEMA_VERSION, not_retracted

__all__ = [
    "LOCK_WAIT_S",
    "SCHEMA_VERSION",
    "FeedbackStore",
    "hash_token",
    "mask_url",
    "strip_password",
]

TRAINER = "trainer"
"""The cursor of the trainer: the highest judgement seq it has collected. Judgements at or below
it count for good; above it their author may still undo them."""


def hash_token(token: str) -> str:
    """SHA-256 of an annotator token (tokens themselves are never stored)."""
    return hashlib.sha256(token.encode()).hexdigest()


class FeedbackStore:
    """Annotators, segments (metadata here, arrays in .npz files), queries, judgements, ratings."""

    def __init__(self, target: str | Path, *, array_dir: str | Path | None = None) -> None:
        real = url_of(target)
        self.url = mask_url(real)
        """The store's URL with any password masked (safe to print or write)."""
        self.is_sqlite = real.startswith("sqlite")
        if self.is_sqlite:
            db_path = Path(real.removeprefix("sqlite:///"))
            try:
                db_path.parent.mkdir(parents=True, exist_ok=True)
            except OSError as exc:
                raise StoreError(
                    f"cannot create the store's folder {db_path.parent}: {exc}"
                ) from exc
            default_arrays = db_path.parent / "segments"
        else:
            default_arrays = Path("segments")
        try:
            self.arrays = ArrayStore(array_dir or default_arrays)
        except OSError as exc:
            raise StoreError(
                f"cannot create the segment folder {array_dir or default_arrays}: {exc}"
            ) from exc
        self.engine = make_engine(real, label=self.url)
        """The SQLAlchemy engine. Only the store package runs SQL: callers use the methods."""
        self._writer = writer(self.engine)
        self.llm_cache = LLMCache(self.engine, self._writer)
        """Cached LLM responses (also reachable as get/put_cached_response)."""
        self.queues = PersonQueues(self.engine, self._writer, self.open_queries_for)
        """What each person is asked next (also reachable as person_queue, skip_query, ...)."""
        try:
            retry_locked(self._open, is_sqlite=self.is_sqlite)
        except OperationalError as exc:
            self.engine.dispose()
            raise StoreError(
                f"cannot reach the store {self.url}: {reason(exc)}. Check the host, port, "
                "database name and user (the password comes from PGPASSWORD or ~/.pgpass)"
            ) from exc
        except SQLAlchemyError as exc:
            self.engine.dispose()
            raise StoreError(f"cannot open the store {self.url}: {reason(exc)}") from exc
        except BaseException:
            self.engine.dispose()
            raise

    # ----- schema -------------------------------------------------------------------------
    def _open(self) -> None:
        try:
            insp = inspect(self.engine)
            tables = set(insp.get_table_names())
        except (DatabaseError, OperationalError) as exc:
            if not self.is_sqlite:
                raise  # a server that cannot be reached: reported by __init__
            raise StoreError(
                f"{self.url} is not a readable database (corrupt, or not a PrefLab store): "
                f"{exc.orig if hasattr(exc, 'orig') else exc}. Point to a run directory's "
                "feedback.db or a fresh path"
            ) from exc
        if not tables:
            try:
                with self._writer.begin() as c:
                    S.metadata.create_all(c)
                    c.execute(
                        insert(S.info),
                        [
                            {"key": "app", "value": APP_NAME},
                            {"key": "schema_version", "value": str(SCHEMA_VERSION)},
                            {"key": "created_at", "value": str(time.time())},
                        ],
                    )
                    c.execute(insert(S.counters), [{"name": t, "value": 0} for t in S.SEQ_TABLES])
                    migrate.stamp(c, migrate.head())
                return
            except IntegrityError:  # another process created the store at the same moment
                tables = set(inspect(self.engine).get_table_names())
        if "preflab_info" not in tables:
            raise StoreError(
                f"{self.url} holds tables {sorted(tables)[:5]} but is not a PrefLab store; "
                "refusing to write to it. Use a new path for the store"
            )
        with self.engine.connect() as c:
            meta = dict(c.execute(select(S.info.c.key, S.info.c.value)).all())
        if meta.get("app") != APP_NAME:
            raise StoreError(f"{self.url} is not a PrefLab store (app = {meta.get('app')!r})")
        try:
            version = int(meta.get("schema_version", -1))
        except ValueError:
            version = -1
        if version > SCHEMA_VERSION:
            raise StoreError(
                f"{self.url} has schema version {version}, newer than this PrefLab reads "
                f"({SCHEMA_VERSION}); it was written by a newer PrefLab. Upgrade PrefLab "
                "(pip install -U preflab) to open it"
            )
        if version < 1:
            raise StoreError(
                f"{self.url} has an unreadable schema version {meta.get('schema_version')!r}"
            )
        with self._writer.begin() as c:
            migrate.upgrade(c, label=self.url)  # refuses unknown (newer) revisions
        S.metadata.create_all(self.engine)  # tables added since; never drops anything
        for index in S.ADDED_INDEXES:
            index.create(self.engine, checkfirst=True)

    def close(self) -> None:
        self.engine.dispose()

    # ----- annotators ---------------------------------------------------------------------
    def add_annotator(self, annotator: Annotator, *, token: str | None = None) -> None:
        """Register an annotator (idempotent for the same id)."""
        row = {
            "id": annotator.id,
            "source": annotator.source,
            "name": annotator.name,
            "token_hash": hash_token(token) if token else None,
            "meta": dict(annotator.meta),
            "created_at": time.time(),
        }
        with self._writer.begin() as c:  # insert-or-ignore: safe when many register at once
            c.execute(self._insert(S.annotators).values(**row).on_conflict_do_nothing())

    def annotators(self) -> list[Annotator]:
        with self.engine.connect() as c:
            rows = c.execute(select(S.annotators)).mappings().all()
        return [
            Annotator(id=r["id"], source=r["source"], name=r["name"], meta=r["meta"]) for r in rows
        ]

    def annotator_for_token(self, token: str) -> str | None:
        """The id of the annotator holding ``token``, or None."""
        with self.engine.connect() as c:
            r = c.execute(
                select(S.annotators.c.id).where(S.annotators.c.token_hash == hash_token(token))
            ).first()
        return r[0] if r else None

    def annotator(self, annotator_id: str) -> Annotator | None:
        """The annotator with this id, or None."""
        with self.engine.connect() as c:
            r = (
                c.execute(select(S.annotators).where(S.annotators.c.id == annotator_id))
                .mappings()
                .first()
            )
        return _annotator(r) if r else None

    def annotator_by_token(self, token: str) -> Annotator | None:
        """The annotator holding ``token`` (looked up by its hash), or None."""
        with self.engine.connect() as c:
            r = (
                c.execute(
                    select(S.annotators).where(S.annotators.c.token_hash == hash_token(token))
                )
                .mappings()
                .first()
            )
        return _annotator(r) if r else None

    def set_annotator_token(self, annotator_id: str, token: str) -> None:
        """Give a stored annotator a new token (only its hash is stored)."""
        with self._writer.begin() as c:
            n = c.execute(
                update(S.annotators)
                .where(S.annotators.c.id == annotator_id)
                .values(token_hash=hash_token(token))
            ).rowcount
        if not n:
            raise DataError(f"no annotator {annotator_id!r} in the store; add it first")

    # ----- revoking an annotator's link (issue #25: the owner page) -------------------------
    def revoke_token(self, annotator_id: str) -> None:
        """Clear the annotator's token hash: their link stops working (their answers stay).
        Raises DataError for an unknown id. A new link needs :meth:`set_annotator_token`."""
        with self._writer.begin() as c:
            n = c.execute(
                update(S.annotators)
                .where(S.annotators.c.id == annotator_id)
                .values(token_hash=None)
            ).rowcount
        if not n:
            raise DataError(f"no annotator {annotator_id!r} in the store; check the id")

    def annotators_with_token(self) -> set[str]:
        """Ids of the annotators whose link works (a token hash is stored)."""
        with self.engine.connect() as c:
            rows = c.execute(
                select(S.annotators.c.id).where(S.annotators.c.token_hash.is_not(None))
            ).all()
        return {r[0] for r in rows}

    # ----- segments -----------------------------------------------------------------------
    def add_segments(self, segments: Iterable[Segment]) -> int:
        """Store segments (arrays first, then rows); already-stored ids are skipped."""
        segs = list(segments)
        if not segs:
            return 0
        for s in segs:  # ids become file names: check them all before writing anything
            self.arrays.path(s.id)
        with self._writer.begin() as c:
            ids = [s.id for s in segs]
            have = set()
            for k in range(0, len(ids), 500):
                have |= set(
                    c.execute(
                        select(S.segments.c.id).where(S.segments.c.id.in_(ids[k : k + 500]))
                    ).scalars()
                )
            rows, seen = [], set()
            for s in segs:
                if s.id in have or s.id in seen:
                    continue
                seen.add(s.id)
                self.arrays.write(s)
                rows.append(
                    {
                        "id": s.id,
                        "env_id": s.env_id,
                        "episode": s.episode,
                        "start": s.start,
                        "round": s.round,
                        "length": s.length,
                        "obs_dim": s.obs.shape[1],
                        "act_dim": s.acts.shape[1],
                        "true_return": s.true_return,
                    }
                )
            if rows:
                seq0 = _allocate(c, "segments", len(rows))
                for k, r in enumerate(rows):
                    r["seq"] = seq0 + k
                c.execute(insert(S.segments), rows)
        return len(rows)

    def segments(self, ids: Sequence[str] | None = None) -> list[Segment]:
        """Segments by id (all, in insertion order, when ``ids`` is None); an id lookup reads
        only the rows asked for (indexed)."""
        with self.engine.connect() as c:
            if ids is None:
                q = select(S.segments).order_by(S.segments.c.seq)
                rows = c.execute(q).mappings().all()
            else:
                wanted = list(dict.fromkeys(ids))
                rows = []
                for k in range(0, len(wanted), 500):
                    chunk = wanted[k : k + 500]
                    rows += (
                        c.execute(select(S.segments).where(S.segments.c.id.in_(chunk)))
                        .mappings()
                        .all()
                    )
        by_id = {r["id"]: r for r in rows}
        if ids is not None:
            missing = [i for i in ids if i not in by_id]
            if missing:
                raise DataError(
                    f"{len(missing)} segment id(s) not in the store, e.g. {missing[:3]}"
                )
            rows = [by_id[i] for i in ids]
        out = []
        for r in rows:
            arr = self.arrays.read(r["id"])
            out.append(
                Segment(
                    id=r["id"],
                    obs=arr["obs"],
                    acts=arr["acts"],
                    true_rewards=arr["true_rewards"],
                    env_id=r["env_id"],
                    episode=r["episode"],
                    start=r["start"],
                    round=r["round"],
                    states=arr.get("states"),
                )
            )
        return out

    def segment_info(self, ids: Sequence[str]) -> dict[str, dict[str, Any]]:
        """env_id, length and round of stored segments (no arrays, no true return)."""
        out: dict[str, dict[str, Any]] = {}
        cols = (S.segments.c.id, S.segments.c.env_id, S.segments.c.length, S.segments.c.round)
        ids = list(dict.fromkeys(ids))
        with self.engine.connect() as c:
            for k in range(0, len(ids), 500):
                for r in c.execute(select(*cols).where(S.segments.c.id.in_(ids[k : k + 500]))):
                    out[r[0]] = {"env_id": r[1], "length": int(r[2]), "round": int(r[3])}
        return out

    def count(self, table: str) -> int:
        """Number of rows of 'segments', 'queries', 'judgements', 'ratings' or 'annotators'."""
        t = S.metadata.tables[table]
        with self.engine.connect() as c:
            return int(c.execute(select(func.count()).select_from(t)).scalar_one())

    def max_seq(self, table: str) -> int:
        """The highest sequence number in 'judgements', 'ratings', 'queries' or 'segments'
        (0 when empty)."""
        t = S.metadata.tables[table]
        with self.engine.connect() as c:
            return int(c.execute(select(func.coalesce(func.max(t.c.seq), 0))).scalar_one())

    # ----- queries ------------------------------------------------------------------------
    def add_queries(self, queries: Iterable[Query]) -> None:
        qs = [check_query(q) for q in queries]
        if not qs:
            return
        with self._writer.begin() as c:
            seq0 = _allocate(c, "queries", len(qs))
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
                        "meta": _jsonable(q.meta),
                        "seq": seq0 + k,
                    }
                    for k, q in enumerate(qs)
                ],
            )

    def queries(self, *, round: int | None = None) -> list[Query]:
        with self.engine.connect() as c:
            q = select(S.queries).order_by(S.queries.c.seq)
            if round is not None:
                q = q.where(S.queries.c.round == round)
            rows = c.execute(q).mappings().all()
        return [Query.from_row(r) for r in rows]

    def known_query_ids(self, ids: Iterable[str]) -> set[str]:
        """Which of ``ids`` are stored queries (indexed lookups, no full scan)."""
        wanted = list(dict.fromkeys(ids))
        out: set[str] = set()
        with self.engine.connect() as c:
            for k in range(0, len(wanted), 500):
                out |= set(
                    c.execute(
                        select(S.queries.c.id).where(S.queries.c.id.in_(wanted[k : k + 500]))
                    ).scalars()
                )
        return out

    def queries_by_id(self, ids: Sequence[str]) -> list[Query]:
        """The stored queries among ``ids``, in the order asked (unknown ids are left out)."""
        wanted = list(dict.fromkeys(ids))
        got: dict[str, Query] = {}
        with self.engine.connect() as c:
            for k in range(0, len(wanted), 500):
                for r in c.execute(
                    select(S.queries).where(S.queries.c.id.in_(wanted[k : k + 500]))
                ).mappings():
                    got[r["id"]] = Query.from_row(r)
        return [got[i] for i in wanted if i in got]

    def _insert(self, table: Any) -> Any:
        """A dialect insert with ``on_conflict_do_nothing`` (SQLite and PostgreSQL)."""
        return (sqlite_insert if self.is_sqlite else pg_insert)(table)

    def query(self, query_id: str) -> Query | None:
        """The query with this id, or None."""
        with self.engine.connect() as c:
            r = c.execute(select(S.queries).where(S.queries.c.id == query_id)).mappings().first()
        return Query.from_row(r) if r else None

    def _open_for(self, annotator_id: str, kind: str | None) -> Any:
        answered = select(S.judgements.c.query_id).where(
            S.judgements.c.annotator_id == annotator_id, not_retracted()
        )
        rated = select(S.ratings.c.stream_id).where(S.ratings.c.annotator_id == annotator_id)
        created_by = S.queries.c.meta["created_by"].as_string()
        cond = and_(
            S.queries.c.id.not_in(answered),
            S.queries.c.id.not_in(rated),
            S.queries.c.id.not_in(select(S.withdrawals.c.query_id)),  # the trainer withdrew it
            # a group comparison someone composed in the studio is theirs, not a question to all
            or_(created_by.is_(None), created_by != "studio"),
        )
        if kind is not None:
            cond = and_(cond, S.queries.c.kind == kind)
        return cond

    def open_queries_for(
        self, annotator_id: str, *, kind: str | None = None, limit: int | None = 100
    ) -> list[Query]:
        """Queries this annotator has not answered (a retracted answer does not count; a rating
        query counts as answered once they sent ratings for it), newest round first and in the
        selector's order (seq) within a round."""
        q = (
            select(S.queries)
            .where(self._open_for(annotator_id, kind))
            .order_by(S.queries.c.round.desc(), S.queries.c.seq)
        )
        if limit is not None:
            q = q.limit(limit)
        with self.engine.connect() as c:
            rows = c.execute(q).mappings().all()
        return [Query.from_row(r) for r in rows]

    def count_open_queries_for(self, annotator_id: str, *, kind: str | None = None) -> int:
        """len(open_queries_for(annotator_id, kind=kind, limit=None)), counted in the database."""
        q = select(func.count()).select_from(S.queries).where(self._open_for(annotator_id, kind))
        with self.engine.connect() as c:
            return int(c.execute(q).scalar_one())

    def open_queries(self) -> list[Query]:
        """Queries without any judgement yet."""
        with self.engine.connect() as c:
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

    # ----- judgements ---------------------------------------------------------------------
    def add_judgements(self, judgements: Iterable[Judgement], *, if_absent: bool = False) -> int:
        """Append judgements (all or none); each must answer a stored query. Returns the number
        of rows written.

        With ``if_absent=True`` a judgement whose id is already stored with the same content
        (query, annotator, source, p, response time, meta; the time is not compared) is skipped,
        so a repeated submission is stored once; the same id with other content raises
        :class:`ConflictError`.
        """
        js = list(judgements)
        if not js:
            return 0
        self._check_answers(js)
        for attempt in range(3):
            try:
                with self._writer.begin() as c:  # the foreign key checks the query ids
                    js_new = self._absent(c, js) if if_absent else js
                    if js_new:
                        rows = [_judgement_row(j) for j in js_new]
                        if self.is_sqlite:  # one writer at a time: seqs in commit order
                            seq0 = _allocate(c, "judgements", len(rows))
                            for k, r in enumerate(rows):
                                r["seq"] = seq0 + k
                        else:  # no lock: the sequence's nextval; xid first (see StoreSource)
                            c.execute(text("SELECT pg_current_xact_id()"))
                        c.execute(insert(S.judgements), rows)
                    return len(js_new)
            except IntegrityError as exc:
                qids = {j.query_id for j in js}
                unknown = qids - self.known_query_ids(qids)
                if unknown:
                    raise DataError(
                        f"judgement(s) answer unknown query id(s) {sorted(unknown)[:3]}; "
                        "store the queries first; nothing was written"
                    ) from exc
                if if_absent and attempt < 2:
                    continue  # a concurrent writer stored the same id first: compare again
                raise DataError(
                    f"judgement ids must be unique; nothing was written: {exc.orig}"
                ) from exc
        raise AssertionError("unreachable")

    def _check_answers(self, js: list[Judgement]) -> None:
        """A DataError, before anything is written, for a judgement that is no well-formed
        answer to its (stored) query as the query's kind defines it (a ranking's ranks)."""
        by_id = {q.id: q for q in self.queries_by_id([j.query_id for j in js])}
        for j in js:
            q = by_id.get(j.query_id)
            if q is not None:  # unknown ids: the foreign key's error below names them
                try:
                    check_judgement(q, j)
                except DataError as exc:
                    raise DataError(f"{exc}; nothing was written") from exc

    @staticmethod
    def _absent(c: Any, js: list[Judgement]) -> list[Judgement]:
        ids = [j.id for j in js]
        stored = {
            r["id"]: r
            for r in c.execute(select(S.judgements).where(S.judgements.c.id.in_(ids))).mappings()
        }
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

    def get_judgement(self, judgement_id: str) -> tuple[int, Judgement] | None:
        """(seq, judgement) for this id, or None."""
        with self.engine.connect() as c:
            r = (
                c.execute(select(S.judgements).where(S.judgements.c.id == judgement_id))
                .mappings()
                .first()
            )
        return (int(r["seq"]), Judgement.from_row(r)) if r else None

    def judgements_of(
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
        with self.engine.connect() as c:
            rows = c.execute(q).mappings().all()
        return [(int(r["seq"]), Judgement.from_row(r)) for r in rows]

    def recent_answers(self, annotator_id: str, *, limit: int = 50) -> list[tuple[Judgement, bool]]:
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
        with self.engine.connect() as c:
            collected = _cursor_seq(c, TRAINER)
            rows = c.execute(q).mappings().all()
        return [(Judgement.from_row(r), int(r["seq"]) > collected) for r in rows]

    def answered_counts(self, annotator_id: str, *, round: int | None) -> tuple[int, int]:
        """(judgements on queries of ``round``, judgements in total) of one annotator, not
        counting retracted ones."""
        base = and_(
            S.judgements.c.annotator_id == annotator_id,
            not_retracted(),
        )
        with self.engine.connect() as c:
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

    def activity(self) -> dict[str, tuple[int, int]]:
        """Per annotator id: (judgements not retracted, ratings)."""
        out: dict[str, list[int]] = {}
        with self.engine.connect() as c:
            for aid, n in c.execute(
                select(S.judgements.c.annotator_id, func.count())
                .where(not_retracted())
                .group_by(S.judgements.c.annotator_id)
            ):
                out.setdefault(aid, [0, 0])[0] = int(n)
            for aid, n in c.execute(
                select(S.ratings.c.annotator_id, func.count()).group_by(S.ratings.c.annotator_id)
            ):
                out.setdefault(aid, [0, 0])[1] = int(n)
        return {k: (v[0], v[1]) for k, v in out.items()}

    def oldest_open_transaction(self) -> int | None:
        """PostgreSQL: the xmin of a fresh snapshot — every transaction with a lower id has
        ended. None on SQLite (one writer at a time)."""
        if self.is_sqlite:
            return None
        with self.engine.connect() as c:
            r = c.execute(text("SELECT pg_snapshot_xmin(pg_current_snapshot())::text::bigint"))
            return int(r.scalar_one())

    def transaction_id_bound(self) -> int | None:
        """PostgreSQL: a transaction id above every id handed out so far (it takes a new one
        and rolls it back). A snapshot's xmax is no such bound: it is the newest *ended* id
        plus one, and a younger transaction may still be open above it. None on SQLite."""
        if self.is_sqlite:
            return None
        with self.engine.connect() as c:
            return int(c.execute(text("SELECT pg_current_xact_id()::text::bigint")).scalar_one())

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
        with self.engine.connect() as c:
            rows = c.execute(q).all()
        return [(int(r[0]), _stored_judgement(r)) for r in rows]

    # ----- ratings ------------------------------------------------------------------------
    def add_ratings(self, ratings: Iterable[Rating]) -> None:
        """Append real-time ratings; a duplicated (annotator, stream, time) is rejected whole."""
        rs = list(ratings)
        if not rs:
            return
        try:
            with self._writer.begin() as c:
                seq0 = _allocate(c, "ratings", len(rs))
                c.execute(
                    insert(S.ratings),
                    [
                        {
                            "seq": seq0 + k,
                            "annotator_id": r.annotator_id,
                            "stream_id": r.stream_id,
                            "step": r.step,
                            "t": r.t,
                            "value": r.value,
                        }
                        for k, r in enumerate(rs)
                    ],
                )
        except IntegrityError as exc:
            raise DataError(
                "duplicated rating timestamp for an annotator and stream; nothing was written. "
                "Each rating needs its own time"
            ) from exc

    @overload
    def ratings(
        self, *, stream_id: str | None = None, annotator_id: str | None = None
    ) -> list[Rating]: ...

    @overload
    def ratings(self, *, after_seq: int) -> list[tuple[int, Rating]]: ...

    def ratings(
        self,
        *,
        stream_id: str | None = None,
        annotator_id: str | None = None,
        after_seq: int | None = None,
    ) -> list[Rating] | list[tuple[int, Rating]]:
        """Ratings of a stream and/or annotator (every one by default), ordered by stream,
        annotator and time. With ``after_seq``: (seq, rating) pairs with seq > ``after_seq``
        in the order they were stored, like :meth:`judgements` (a reader's cursor)."""
        if after_seq is not None:
            if stream_id is not None or annotator_id is not None:
                raise DataError("ratings(after_seq=...) reads every stream; filter afterwards")
            q = select(S.ratings).where(S.ratings.c.seq > after_seq).order_by(S.ratings.c.seq)
            with self.engine.connect() as c:
                rows = c.execute(q).mappings().all()
            return [(int(r["seq"]), _rating(r)) for r in rows]
        with self.engine.connect() as c:
            q = select(S.ratings).order_by(
                S.ratings.c.stream_id, S.ratings.c.annotator_id, S.ratings.c.t
            )
            if stream_id is not None:
                q = q.where(S.ratings.c.stream_id == stream_id)
            if annotator_id is not None:
                q = q.where(S.ratings.c.annotator_id == annotator_id)
            rows = c.execute(q).mappings().all()
        return [_rating(r) for r in rows]

    def ratings_exist(self, annotator_id: str, stream_id: str, ts: Sequence[float]) -> list[Rating]:
        """This annotator's stored ratings of ``stream_id`` at the times ``ts``."""
        with self.engine.connect() as c:
            rows = c.execute(
                select(S.ratings).where(
                    S.ratings.c.annotator_id == annotator_id,
                    S.ratings.c.stream_id == stream_id,
                    S.ratings.c.t.in_(list(ts)),
                )
            ).mappings()
            return [_rating(r) for r in rows]

    # ----- rounds (published by the trainer) ---------------------------------------------
    def publish_round(
        self,
        round: int,
        *,
        env_id: str,
        env_steps: int,
        total_steps: int,
        metrics: Mapping[str, Any],
        status: str = "running",
    ) -> None:
        """Record (or update) a round of the loop with its metrics row; NaN / inf become None."""
        if status not in ("running", "waiting", "finished"):
            raise DataError(
                f"round status must be 'running', 'waiting' or 'finished', got {status!r}"
            )
        row = {
            "published_at": time.time(),
            "env_id": env_id,
            "env_steps": int(env_steps),
            "total_steps": int(total_steps),
            "status": status,
            "metrics": _clean_metrics(metrics),
        }
        for attempt in range(2):
            try:
                with self._writer.begin() as c:
                    n = c.execute(
                        update(S.rounds).where(S.rounds.c.round == int(round)).values(**row)
                    ).rowcount
                    if not n:
                        c.execute(insert(S.rounds), [{"round": int(round), **row}])
                return
            except IntegrityError:
                if attempt:
                    raise

    def rounds(self) -> list[dict[str, Any]]:
        """Published rounds, oldest first."""
        with self.engine.connect() as c:
            rows = c.execute(select(S.rounds).order_by(S.rounds.c.round)).mappings().all()
        return [dict(r) for r in rows]

    # ----- round pools (the groupwise studio's exploration view) --------------------------
    def publish_pool(
        self,
        round: int,
        segment_ids: Sequence[str],
        *,
        member_returns: Sequence[Sequence[float]] | None = None,
        meta: Mapping[str, Any] | None = None,
    ) -> None:
        """Record (or replace) round ``round``'s pool: the behaviours the studio's exploration
        view shows (stored segments, in order) and, when the trainer has a fitted ensemble,
        every member's predicted return of each, shape (members, len(segment_ids)). Predicted
        returns are for the studio server's suggestions only; it never sends them to a browser."""
        ids = list(segment_ids)
        if len(set(ids)) != len(ids):
            raise DataError(f"round {round}'s pool lists a segment twice; pass unique ids")
        rets = None
        if member_returns is not None:
            rets = [[float(x) for x in row] for row in member_returns]
            if any(len(row) != len(ids) for row in rets):
                raise DataError(
                    f"member_returns must be (members, {len(ids)}) for {len(ids)} segments"
                )
        row = {
            "published_at": time.time(),
            "segment_ids": ids,
            "member_returns": rets,
            "meta": _jsonable(dict(meta or {})),
        }
        for attempt in range(2):
            try:
                with self.engine.begin() as c:
                    n = c.execute(
                        update(S.round_pools)
                        .where(S.round_pools.c.round == int(round))
                        .values(**row)
                    ).rowcount
                    if not n:
                        c.execute(insert(S.round_pools), [{"round": int(round), **row}])
                return
            except IntegrityError:
                if attempt:
                    raise

    def round_pool(self, round: int | None = None) -> dict[str, Any] | None:
        """Round ``round``'s pool (the latest published one when None), or None:
        {round, published_at, segment_ids, member_returns, meta}."""
        with self.engine.connect() as c:
            q = select(S.round_pools)
            q = (
                q.where(S.round_pools.c.round == int(round))
                if round is not None
                else q.order_by(S.round_pools.c.round.desc()).limit(1)
            )
            r = c.execute(q).mappings().first()
        return dict(r) if r else None

    # ----- cursors (how far a reader such as the trainer has read) ------------------------
    def set_cursor(self, name: str, seq: int) -> None:
        """Set cursor ``name`` to ``seq`` (e.g. the highest judgement seq the trainer collected)."""
        vals = {"seq": int(seq), "updated_at": time.time()}
        for attempt in range(2):
            try:
                with self._writer.begin() as c:
                    n = c.execute(
                        update(S.cursors).where(S.cursors.c.name == name).values(**vals)
                    ).rowcount
                    if not n:
                        c.execute(insert(S.cursors), [{"name": name, **vals}])
                return
            except IntegrityError:
                if attempt:
                    raise

    def cursor(self, name: str) -> int:
        """The cursor's seq (0 when it was never set)."""
        with self.engine.connect() as c:
            return _cursor_seq(c, name)

    def cursor_updated_at(self, name: str) -> float | None:
        """When the cursor was last set (None when never)."""
        with self.engine.connect() as c:
            r = c.execute(select(S.cursors.c.updated_at).where(S.cursors.c.name == name)).first()
        return float(r[0]) if r else None

    # ----- run settings (shared by the owner in the studio and the trainer) -----------------
    def set_setting(self, key: str, value: Any) -> None:
        """Set the run setting ``key`` to the JSON-able ``value`` (e.g. "task", "finish")."""
        vals = {"value": value, "updated_at": time.time()}
        for attempt in range(2):
            try:
                with self._writer.begin() as c:
                    n = c.execute(
                        update(S.settings).where(S.settings.c.key == key).values(**vals)
                    ).rowcount
                    if not n:
                        c.execute(insert(S.settings), [{"key": key, **vals}])
                return
            except IntegrityError:
                if attempt:
                    raise

    def setting(self, key: str, default: Any = None) -> Any:
        """The run setting ``key`` (``default`` when it was never set)."""
        with self.engine.connect() as c:
            r = c.execute(select(S.settings.c.value).where(S.settings.c.key == key)).first()
        return default if r is None else r[0]

    # ----- withdrawn queries (no longer shown to people; answers in flight still count) -----
    def withdraw_queries(self, ids: Iterable[str]) -> None:
        """Withdraw queries (idempotent): the studio stops offering them; a judgement that
        arrives for one later is still stored and counts."""
        now = time.time()
        todo = sorted(set(ids))
        if not todo:
            return
        with self._writer.begin() as c:
            have = set(
                c.execute(
                    select(S.withdrawals.c.query_id).where(S.withdrawals.c.query_id.in_(todo))
                ).scalars()
            )
            rows = [{"query_id": q, "created_at": now} for q in todo if q not in have]
            if rows:
                c.execute(insert(S.withdrawals), rows)

    def withdrawn_ids(self) -> set[str]:
        """Ids of every withdrawn query."""
        with self.engine.connect() as c:
            return set(c.execute(select(S.withdrawals.c.query_id)).scalars())

    # ----- retractions (undo) -------------------------------------------------------------
    def retract_judgement(self, judgement_id: str, annotator_id: str) -> None:
        """Undo an annotator's judgement (idempotent). Raises DataError for an unknown id and
        ConflictError when it is someone else's or the trainer already collected it."""
        try:
            with self._writer.begin() as c:
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
                if int(r[0]) <= _cursor_seq(c, TRAINER):
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

    def retracted_ids(self) -> set[str]:
        """Ids of every retracted (undone) judgement. To drop them from judgements, ask
        :meth:`judgements` (it leaves them out) or :meth:`counted`."""
        with self.engine.connect() as c:
            return set(c.execute(select(S.retractions.c.judgement_id)).scalars())

    def counted(self, judgements: Sequence[Judgement]) -> list[Judgement]:
        """The judgements of ``judgements`` that count (not retracted), in their order. For a
        reader holding judgements it collected earlier: one undone since is dropped."""
        js = list(judgements)
        ids = list(dict.fromkeys(j.id for j in js))
        gone: set[str] = set()
        r = S.retractions
        with self.engine.connect() as c:
            for k in range(0, len(ids), 500):
                gone |= set(
                    c.execute(
                        select(r.c.judgement_id).where(r.c.judgement_id.in_(ids[k : k + 500]))
                    ).scalars()
                )
        return [j for j in js if j.id not in gone] if gone else js

    def mark_collected(self, seq: int) -> None:
        """The trainer has collected every judgement up to ``seq``: from now on they count for
        good and :meth:`retract_judgement` refuses to undo them."""
        self.set_cursor(TRAINER, seq)

    # ----- person queues (what each annotator is asked next; kept in PersonQueues) -----------
    def person_queue(
        self,
        annotator_id: str,
        *,
        kind: str | None = None,
        limit: int | None = None,
        repeat_share: float = 0.0,
        exclude: Sequence[str] = (),
    ) -> list[Query]:
        """This annotator's queue of open queries (see :meth:`PersonQueues.queue`)."""
        return self.queues.queue(
            annotator_id, kind=kind, limit=limit, repeat_share=repeat_share, exclude=exclude
        )

    def mark_served(self, annotator_id: str, query_id: str) -> None:
        """The studio showed ``query_id`` to this annotator (the first time counts)."""
        self.queues.mark_served(annotator_id, query_id)

    def skip_query(self, annotator_id: str, query_id: str) -> None:
        """This annotator skipped ``query_id``: it moves to the end of its round in their queue."""
        self.queues.skip(annotator_id, query_id)

    def queue_state(self, annotator_id: str, query_id: str) -> dict[str, Any] | None:
        """{served_at, skipped_at, skips} of this annotator and query, or None."""
        return self.queues.state(annotator_id, query_id)

    def consistency(self) -> dict[str, tuple[int, int]]:
        """Per annotator: (pairs answered twice with a preference, of which agreed)."""
        return self.queues.consistency()

    # ----- LLM response cache (kept in LLMCache) ------------------------------------------
    def get_cached_response(self, key: str) -> str | None:
        """The cached LLM response for ``key``, or None (see :class:`LLMCache`)."""
        return self.llm_cache.get(key)

    def put_cached_response(self, key: str, model: str, prompt: str, response: str) -> None:
        """Cache an LLM response (the first one stored for ``key`` wins)."""
        self.llm_cache.put(key, model, prompt, response)


def _allocate(c: Connection, name: str, n: int) -> int:
    """Take ``n`` consecutive sequence numbers of ``name`` from the counter row; returns the
    first. The row stays locked until the transaction ends, so numbers follow commit order."""
    stmt = (
        update(S.counters)
        .where(S.counters.c.name == name)
        .values(value=S.counters.c.value + n)
        .returning(S.counters.c.value)
    )
    r = c.execute(stmt).first()
    if r is None:  # a counter row lost by hand-editing: start from the table's maximum
        t = S.metadata.tables[name]
        top = c.execute(select(func.coalesce(func.max(t.c.seq), 0))).scalar_one()
        c.execute(insert(S.counters), [{"name": name, "value": int(top)}])
        r = c.execute(stmt).first()
        assert r is not None
    return int(r[0]) - n + 1


guard_public_methods(FeedbackStore)


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


def _rating(r: Row) -> Rating:
    return Rating(
        annotator_id=r["annotator_id"],
        stream_id=r["stream_id"],
        step=r["step"],
        t=r["t"],
        value=r["value"],
    )


def _annotator(r: Row) -> Annotator:
    return Annotator(id=r["id"], source=r["source"], name=r["name"], meta=r["meta"] or {})


def _judgement_row(j: Judgement) -> dict[str, Any]:
    return j.to_row() | {"meta": _jsonable(j.meta)}


def _cursor_seq(c: Any, name: str) -> int:
    r = c.execute(select(S.cursors.c.seq).where(S.cursors.c.name == name)).first()
    return int(r[0]) if r else 0


def _clean_metrics(metrics: Mapping[str, Any]) -> dict[str, Any]:
    def clean(v: Any) -> Any:
        if isinstance(v, Mapping):
            return {str(k): clean(x) for k, x in v.items()}
        if isinstance(v, list | tuple):
            return [clean(x) for x in v]
        if hasattr(v, "item") and callable(v.item):  # numpy scalar
            v = v.item()
        if isinstance(v, float) and not math.isfinite(v):
            return None
        return v

    try:
        out: dict[str, Any] = json.loads(json.dumps(clean(dict(metrics)), allow_nan=False))
    except (TypeError, ValueError) as exc:
        raise DataError(f"round metrics must be JSON-serialisable numbers/strings: {exc}") from exc
    return out


def _jsonable(meta: Any) -> Any:
    try:
        return json.loads(json.dumps(dict(meta)))
    except (TypeError, ValueError) as exc:
        raise DataError(f"record meta must be JSON-serialisable: {exc}") from exc
