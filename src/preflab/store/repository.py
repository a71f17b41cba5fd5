"""What every repository of the store shares: one :class:`Database` (the engine, the writer
connection and the transaction rule) and the :class:`Repository` base that guards its methods.

The transaction rule, the same for every repository:

- a public method is one transaction: reads on ``db.read()`` (a connection), writes inside
  ``db.write()`` (the writer's ``begin()``; on SQLite BEGIN IMMEDIATE, see
  :func:`preflab.store.engine.writer`), so a failed call wrote nothing and is safe to retry;
- sequence numbers come from the database, never max + 1: :func:`allocate` takes them from the
  counter row inside the writing transaction (the row stays locked until it commits, so seqs
  follow commit order). PostgreSQL judgements take theirs from the sequence instead, after the
  transaction id (see :meth:`preflab.store.answers.Answers.add`);
- a database error leaving a public method becomes a StoreError, and SQLite lock contention is
  retried (:func:`preflab.store.engine.guard`, applied to every subclass).
"""

from __future__ import annotations

import json
from collections.abc import Callable, Mapping
from typing import Any

from sqlalchemy import Connection, Engine, Table, func, insert, select, update
from sqlalchemy.dialects.postgresql import insert as pg_insert
from sqlalchemy.dialects.sqlite import insert as sqlite_insert
from sqlalchemy.exc import IntegrityError

from preflab.errors import DataError
from preflab.store import schema as S
from preflab.store.engine import guard_public_methods, make_engine, mask_url, writer


class Database:
    """The store's one engine and its transaction rule, shared by every repository."""

    def __init__(self, real_url: str) -> None:
        self.url = mask_url(real_url)
        """The URL with any password masked (safe to print or write)."""
        self.is_sqlite = real_url.startswith("sqlite")
        """SQLite (one writer at a time) rather than PostgreSQL."""
        self.engine: Engine = make_engine(real_url, label=self.url)
        """Engine for reads. Only the store package runs SQL."""
        self.writer: Engine = writer(self.engine)
        """Engine for write transactions (see :func:`preflab.store.engine.writer`)."""

    def read(self) -> Connection:
        """A connection for reads (``with db.read() as c: ...``)."""
        return self.engine.connect()

    def write(self) -> Any:
        """The write transaction (``with db.write() as c: ...``): commits on leaving, rolls
        back on an error; on SQLite it takes the write lock up front."""
        return self.writer.begin()

    def insert_or_ignore(self, table: Table) -> Any:
        """A dialect insert of ``table`` that has ``on_conflict_do_nothing`` (SQLite and
        PostgreSQL)."""
        return (sqlite_insert if self.is_sqlite else pg_insert)(table)

    def put(
        self,
        table: Table,
        key: Mapping[str, Any],
        values: Mapping[str, Any],
        *,
        new_row: Mapping[str, Any] | None = None,
    ) -> None:
        """Update the row of ``table`` whose columns equal ``key`` with ``values``, or insert
        ``key | (new_row or values)`` when there is none (:func:`upsert`, in a transaction of
        its own, :meth:`write_upserts`)."""
        self.write_upserts(lambda c: upsert(c, table, key, values, new_row=new_row))

    def write_upserts(self, fn: Callable[[Connection], None]) -> None:
        """Run ``fn`` (which writes with :func:`upsert`) in one write transaction; when a
        concurrent insert of the same key wins, the whole transaction runs once more (its
        inserts are then updates)."""
        for attempt in range(2):
            try:
                with self.write() as c:
                    fn(c)
                return
            except IntegrityError:
                if attempt:
                    raise

    def close(self) -> None:
        """Close every pooled connection."""
        self.engine.dispose()


class Repository:
    """One part of the store, owning the SQL of its tables, on the store's shared
    :class:`Database`. Every public method of a subclass is guarded
    (:func:`preflab.store.engine.guard`)."""

    def __init__(self, db: Database) -> None:
        self.db = db
        """The shared engine holder and transaction rule."""
        self.url = db.url
        """The store's masked URL (for messages)."""
        self.is_sqlite = db.is_sqlite
        """Whether the store is SQLite."""

    def __init_subclass__(cls, **kwargs: Any) -> None:
        super().__init_subclass__(**kwargs)
        guard_public_methods(cls)

    def _count(self, table: Table) -> int:
        with self.db.read() as c:
            return int(c.execute(select(func.count()).select_from(table)).scalar_one())

    def _max_seq(self, table: Table) -> int:
        with self.db.read() as c:
            return max_seq(c, table)


def upsert(
    c: Connection,
    table: Table,
    key: Mapping[str, Any],
    values: Mapping[str, Any],
    *,
    new_row: Mapping[str, Any] | None = None,
) -> None:
    """Inside a write transaction: update the row of ``table`` whose columns equal ``key`` with
    ``values``, or insert ``key | (new_row or values)`` when there is none."""
    where = [table.c[k] == v for k, v in key.items()]
    if not c.execute(update(table).where(*where).values(**values)).rowcount:
        c.execute(insert(table), [{**key, **(new_row or values)}])


def max_seq(c: Connection, table: Table) -> int:
    """The highest ``seq`` of ``table`` read on ``c`` (0 when it is empty)."""
    return int(c.execute(select(func.coalesce(func.max(table.c.seq), 0))).scalar_one())


def allocate(c: Connection, name: str, n: int) -> int:
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


def jsonable(meta: Any) -> Any:
    """``meta`` as plain JSON (a DataError when it is not JSON-serialisable)."""
    try:
        return json.loads(json.dumps(dict(meta)))
    except (TypeError, ValueError) as exc:
        raise DataError(f"record meta must be JSON-serialisable: {exc}") from exc
