"""FeedbackStore: SQLAlchemy over SQLite (default, WAL) or PostgreSQL (by URL).

Append-only for judgements and ratings: corrections are new rows. Every write is one
transaction, so an interrupted run keeps everything written before the interruption.
"""

from __future__ import annotations

import hashlib
import json
import time
from collections.abc import Iterable, Sequence
from pathlib import Path
from typing import Any

from sqlalchemy import Engine, create_engine, event, func, insert, inspect, select
from sqlalchemy.exc import DatabaseError, IntegrityError, OperationalError

from preflab.errors import DataError, StoreError
from preflab.records import Annotator, Judgement, Query, Rating, Segment
from preflab.store import schema as S
from preflab.store.arrays import ArrayStore
from preflab.store.schema import APP_NAME, SCHEMA_VERSION


def _url(target: str | Path) -> str:
    t = str(target)
    return t if "://" in t else f"sqlite:///{Path(t).resolve()}"


def hash_token(token: str) -> str:
    """SHA-256 of an annotator token (tokens themselves are never stored)."""
    return hashlib.sha256(token.encode()).hexdigest()


class FeedbackStore:
    """Annotators, segments (metadata here, arrays in .npz files), queries, judgements, ratings."""

    def __init__(self, target: str | Path, *, array_dir: str | Path | None = None) -> None:
        self.url = _url(target)
        self.is_sqlite = self.url.startswith("sqlite")
        if self.is_sqlite:
            db_path = Path(self.url.removeprefix("sqlite:///"))
            db_path.parent.mkdir(parents=True, exist_ok=True)
            default_arrays = db_path.parent / "segments"
        else:
            default_arrays = Path("segments")
        self.arrays = ArrayStore(array_dir or default_arrays)
        try:
            self.engine: Engine = create_engine(self.url, future=True)
        except Exception as exc:  # bad URL / missing driver
            raise StoreError(
                f"cannot open store {self.url!r}: {exc}. Expected a file path or a "
                "SQLAlchemy URL such as postgresql+psycopg://user@host:5432/db"
            ) from exc
        if self.is_sqlite:
            event.listen(self.engine, "connect", _sqlite_pragmas)
        self._open()

    # ----- schema -------------------------------------------------------------------------
    def _open(self) -> None:
        try:
            insp = inspect(self.engine)
            tables = set(insp.get_table_names())
        except (DatabaseError, OperationalError) as exc:
            raise StoreError(
                f"{self.url} is not a readable database (corrupt, or not a PrefLab store): "
                f"{exc.orig if hasattr(exc, 'orig') else exc}. Point to a run directory's "
                "feedback.db or a fresh path"
            ) from exc
        if not tables:
            S.metadata.create_all(self.engine)
            with self.engine.begin() as c:
                c.execute(
                    insert(S.info),
                    [
                        {"key": "app", "value": APP_NAME},
                        {"key": "schema_version", "value": str(SCHEMA_VERSION)},
                        {"key": "created_at", "value": str(time.time())},
                    ],
                )
            return
        if "preflab_info" not in tables:
            raise StoreError(
                f"{self.url} holds tables {sorted(tables)[:5]} but is not a PrefLab store; "
                "refusing to write to it. Use a new path for the store"
            )
        with self.engine.connect() as c:
            meta = dict(c.execute(select(S.info.c.key, S.info.c.value)).all())
        if meta.get("app") != APP_NAME:
            raise StoreError(f"{self.url} is not a PrefLab store (app = {meta.get('app')!r})")
        version = int(meta.get("schema_version", -1))
        if version != SCHEMA_VERSION:
            raise StoreError(
                f"{self.url} has schema version {version}, this PrefLab reads {SCHEMA_VERSION}; "
                "upgrade PrefLab (or export with the version that wrote it)"
            )
        S.metadata.create_all(self.engine)  # tables added since (none yet); never drops anything

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
        with self.engine.begin() as c:
            if c.execute(
                select(S.annotators.c.id).where(S.annotators.c.id == annotator.id)
            ).first():
                return
            c.execute(insert(S.annotators), [row])

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

    # ----- segments -----------------------------------------------------------------------
    def add_segments(self, segments: Iterable[Segment]) -> int:
        """Store segments (arrays first, then rows); already-stored ids are skipped."""
        segs = list(segments)
        if not segs:
            return 0
        with self.engine.begin() as c:
            ids = [s.id for s in segs]
            have = set()
            for k in range(0, len(ids), 500):
                have |= set(
                    c.execute(
                        select(S.segments.c.id).where(S.segments.c.id.in_(ids[k : k + 500]))
                    ).scalars()
                )
            seq0 = c.execute(select(func.coalesce(func.max(S.segments.c.seq), 0))).scalar_one()
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
                        "seq": seq0 + len(rows) + 1,
                    }
                )
            if rows:
                c.execute(insert(S.segments), rows)
        return len(rows)

    def segments(self, ids: Sequence[str] | None = None) -> list[Segment]:
        """Segments by id (all, in insertion order, when ``ids`` is None)."""
        with self.engine.connect() as c:
            q = select(S.segments).order_by(S.segments.c.seq)
            rows = c.execute(q).mappings().all()
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

    def count(self, table: str) -> int:
        """Number of rows of 'segments', 'queries', 'judgements', 'ratings' or 'annotators'."""
        t = S.metadata.tables[table]
        with self.engine.connect() as c:
            return int(c.execute(select(func.count()).select_from(t)).scalar_one())

    # ----- queries ------------------------------------------------------------------------
    def add_queries(self, queries: Iterable[Query]) -> None:
        qs = list(queries)
        if not qs:
            return
        with self.engine.begin() as c:
            seq0 = c.execute(select(func.coalesce(func.max(S.queries.c.seq), 0))).scalar_one()
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
                        "seq": seq0 + k + 1,
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
    def add_judgements(self, judgements: Iterable[Judgement]) -> None:
        """Append judgements (all or none); each must answer a stored query."""
        js = list(judgements)
        if not js:
            return
        rows = [
            {
                "id": j.id,
                "query_id": j.query_id,
                "annotator_id": j.annotator_id,
                "source": j.source,
                "p": j.p,
                "created_at": j.created_at,
                "response_time_s": j.response_time_s,
                "meta": _jsonable(j.meta),
            }
            for j in js
        ]
        try:
            with self.engine.begin() as c:
                qids = {j.query_id for j in js}
                known = set(
                    c.execute(select(S.queries.c.id).where(S.queries.c.id.in_(qids))).scalars()
                )
                if qids - known:
                    raise DataError(
                        f"judgement(s) answer unknown query id(s) {sorted(qids - known)[:3]}; "
                        "store the queries first"
                    )
                c.execute(insert(S.judgements), rows)
        except IntegrityError as exc:
            raise DataError(
                f"judgement ids must be unique; nothing was written: {exc.orig}"
            ) from exc

    def judgements(
        self, *, after_seq: int = 0, source: str | None = None
    ) -> list[tuple[int, Judgement]]:
        """(seq, judgement) pairs with seq > ``after_seq``, oldest first."""
        with self.engine.connect() as c:
            q = (
                select(S.judgements)
                .where(S.judgements.c.seq > after_seq)
                .order_by(S.judgements.c.seq)
            )
            if source is not None:
                q = q.where(S.judgements.c.source == source)
            rows = c.execute(q).mappings().all()
        return [(r["seq"], Judgement.from_row(r)) for r in rows]

    # ----- ratings ------------------------------------------------------------------------
    def add_ratings(self, ratings: Iterable[Rating]) -> None:
        """Append real-time ratings; a duplicated (annotator, stream, time) is rejected whole."""
        rs = list(ratings)
        if not rs:
            return
        try:
            with self.engine.begin() as c:
                c.execute(
                    insert(S.ratings),
                    [
                        {
                            "annotator_id": r.annotator_id,
                            "stream_id": r.stream_id,
                            "step": r.step,
                            "t": r.t,
                            "value": r.value,
                        }
                        for r in rs
                    ],
                )
        except IntegrityError as exc:
            raise DataError(
                "duplicated rating timestamp for an annotator and stream; nothing was written. "
                "Each rating needs its own time"
            ) from exc

    def ratings(
        self, *, stream_id: str | None = None, annotator_id: str | None = None
    ) -> list[Rating]:
        """Ratings ordered by time."""
        with self.engine.connect() as c:
            q = select(S.ratings).order_by(
                S.ratings.c.stream_id, S.ratings.c.annotator_id, S.ratings.c.t
            )
            if stream_id is not None:
                q = q.where(S.ratings.c.stream_id == stream_id)
            if annotator_id is not None:
                q = q.where(S.ratings.c.annotator_id == annotator_id)
            rows = c.execute(q).mappings().all()
        return [
            Rating(
                annotator_id=r["annotator_id"],
                stream_id=r["stream_id"],
                step=r["step"],
                t=r["t"],
                value=r["value"],
            )
            for r in rows
        ]

    # ----- LLM response cache ------------------------------------------------------------
    def get_cached_response(self, key: str) -> str | None:
        with self.engine.connect() as c:
            r = c.execute(select(S.llm_cache.c.response).where(S.llm_cache.c.key == key)).first()
        return r[0] if r else None

    def put_cached_response(self, key: str, model: str, prompt: str, response: str) -> None:
        try:
            with self.engine.begin() as c:
                c.execute(
                    insert(S.llm_cache),
                    [
                        {
                            "key": key,
                            "model": model,
                            "prompt": prompt,
                            "response": response,
                            "created_at": time.time(),
                        }
                    ],
                )
        except IntegrityError:
            pass  # already cached (first answer wins; cache entries are immutable)


def _sqlite_pragmas(dbapi_conn: Any, _record: Any) -> None:
    cur = dbapi_conn.cursor()
    cur.execute("PRAGMA journal_mode=WAL")
    cur.execute("PRAGMA synchronous=NORMAL")
    cur.execute("PRAGMA busy_timeout=10000")
    cur.execute("PRAGMA foreign_keys=ON")
    cur.close()


def _jsonable(meta: Any) -> Any:
    try:
        return json.loads(json.dumps(dict(meta)))
    except (TypeError, ValueError) as exc:
        raise DataError(f"record meta must be JSON-serialisable: {exc}") from exc
