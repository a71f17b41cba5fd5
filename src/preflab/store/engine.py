"""The store's database plumbing: URLs, the SQLAlchemy engine (SQLite pragmas and write locks),
and the guard that retries SQLite lock contention and turns database errors into StoreErrors.

The FeedbackStore (what is stored and what counts) sits on top of this module.
"""

from __future__ import annotations

import functools
import random
import re
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any, Protocol, TypeVar, cast

from sqlalchemy import Engine, create_engine, event
from sqlalchemy.engine import make_url
from sqlalchemy.exc import ArgumentError, OperationalError, SQLAlchemyError

from preflab.errors import PrefLabError, StoreError

LOCK_WAIT_S = 15.0
"""How long a SQLite write waits for another process's write lock before it fails."""


def url_of(target: str | Path) -> str:
    """A SQLAlchemy URL for ``target``: a URL as given, a file path as an absolute SQLite URL."""
    t = str(target)
    return t if "://" in t else f"sqlite:///{Path(t).resolve()}"


def mask_url(url: str) -> str:
    """``url`` with its password replaced by ``***`` (for messages, logs and files)."""
    try:
        return make_url(url).render_as_string(hide_password=True)
    except ArgumentError:
        return re.sub(r"(://[^:/@]*):[^@]*@", r"\1:***@", url)


def strip_password(url: str) -> str:
    """``url`` as config.json keeps it: without its password (the driver then takes it from
    PGPASSWORD or ~/.pgpass (libpq), so it is never written to a file), and a plain file path
    made absolute (a resume from another folder opens the same store, not a new empty one)."""
    if url and "://" not in url:
        return str(Path(url).resolve())
    try:
        u = make_url(url)
    except ArgumentError:
        return re.sub(r"(://[^:/@]*):[^@]*@", r"\1@", url)
    return u._replace(password=None).render_as_string(hide_password=False) if u.password else url


def make_engine(real_url: str, *, label: str) -> Engine:
    """The engine for ``real_url`` (``label`` is its masked form, for messages). SQLite gets WAL,
    short busy waits and write transactions that take the write lock up front (see
    :func:`writer`); PostgreSQL a checked connection pool."""
    is_sqlite = real_url.startswith("sqlite")
    try:
        kwargs: dict[str, Any] = {"future": True}
        if not is_sqlite:
            kwargs |= {"pool_pre_ping": True, "pool_size": 5, "max_overflow": 10}
        engine = create_engine(real_url, **kwargs)
    except Exception as exc:  # bad URL / missing driver
        raise StoreError(
            f"cannot open store {label!r}: {reason(exc)}. Expected a file path or a "
            "SQLAlchemy URL such as postgresql+psycopg://user@host:5432/db"
        ) from exc
    if is_sqlite:
        event.listen(engine, "connect", _sqlite_pragmas)
        event.listen(engine, "begin", _sqlite_begin)
    else:
        event.listen(engine, "connect", _postgres_session)
    return engine


def _postgres_session(dbapi_conn: Any, _record: Any) -> None:
    """Each PostgreSQL connection runs without JIT compilation: the store's statements are
    short, and a plan whose estimated cost crosses ``jit_above_cost`` (the studio's queue with a
    window of 200 on 20k queries) spent 60-100 ms compiling a query that runs in 9 ms."""
    cur = dbapi_conn.cursor()
    try:
        cur.execute("SET jit = off")
    finally:
        cur.close()
    dbapi_conn.commit()  # a session setting, kept past this transaction


def writer(engine: Engine) -> Engine:
    """``engine`` for write transactions: on SQLite they take the write lock up front (BEGIN
    IMMEDIATE). A deferred transaction that reads first and then writes fails at once with
    "database is locked" when another process (trainer / studio) committed in between."""
    return engine.execution_options(preflab_write=True)


def retry_locked(fn: Callable[[], None], *, is_sqlite: bool) -> None:
    """Call ``fn`` again (with short random sleeps) while SQLite reports another process's
    write lock, up to :data:`LOCK_WAIT_S`; any other error, or a lock on PostgreSQL, is raised."""
    deadline = time.monotonic() + LOCK_WAIT_S
    while True:
        try:
            fn()
            return
        except OperationalError as exc:
            if not (is_sqlite and locked(exc)) or time.monotonic() > deadline:
                raise
            time.sleep(random.uniform(0.0005, 0.005))


def reason(exc: BaseException) -> str:
    """The first line of a database error, without SQL or parameters (and no password)."""
    orig = getattr(exc, "orig", None) or exc
    text = str(orig).strip().splitlines()[0] if str(orig).strip() else type(orig).__name__
    return text[:300]


def locked(exc: OperationalError) -> bool:
    """Whether ``exc`` is SQLite's "database is locked / busy"."""
    text = str(getattr(exc, "orig", exc)).lower()
    return "locked" in text or "busy" in text


class Guarded(Protocol):
    """What :func:`guard` needs of the object whose methods it wraps."""

    url: str
    is_sqlite: bool


F = TypeVar("F", bound=Callable[..., Any])


def guard(fn: F) -> F:
    """Turn a database error escaping a public method into a StoreError with a message; retry
    while SQLite reports another process's write lock (a failed call wrote nothing: one
    transaction per call, so trying again is safe)."""

    @functools.wraps(fn)
    def wrapper(self: Guarded, *args: Any, **kwargs: Any) -> Any:
        deadline = None
        while True:
            try:
                return fn(self, *args, **kwargs)
            except OperationalError as exc:
                # SQLite: another process holds the write lock. Its own busy handler sleeps up
                # to 100 ms between tries; short random sleeps here keep commit latency low.
                if not (self.is_sqlite and locked(exc)):
                    err: Exception = exc
                    break
                now = time.monotonic()
                deadline = deadline or now + LOCK_WAIT_S
                if now > deadline:
                    err = exc
                    break
                time.sleep(random.uniform(0.0002, 0.002))
            except PrefLabError:
                raise
            except SQLAlchemyError as exc:
                err = exc
                break
        try:
            raise err
        except OperationalError as exc:
            raise StoreError(
                f"the store {self.url} failed during {fn.__name__}: {reason(exc)}. Is the "
                "database reachable (and not locked by another process for too long)? Nothing "
                "of this call was written"
            ) from exc
        except SQLAlchemyError as exc:
            raise StoreError(
                f"the store {self.url} refused {fn.__name__}: {reason(exc)}; nothing of this "
                "call was written"
            ) from exc

    return cast(F, wrapper)


def guard_public_methods(cls: type) -> None:
    """Wrap every public method of ``cls`` in :func:`guard`."""
    import inspect

    for name, fn in list(vars(cls).items()):
        if not name.startswith("_") and inspect.isfunction(fn):
            setattr(cls, name, guard(fn))


def _sqlite_pragmas(dbapi_conn: Any, _record: Any) -> None:
    dbapi_conn.isolation_level = None  # transactions are begun by _sqlite_begin
    cur = dbapi_conn.cursor()
    cur.execute("PRAGMA journal_mode=WAL")
    cur.execute("PRAGMA synchronous=NORMAL")
    cur.execute("PRAGMA busy_timeout=5")  # then short retries in guard
    cur.execute("PRAGMA foreign_keys=ON")
    cur.close()


def _sqlite_begin(conn: Any) -> None:
    write = conn.get_execution_options().get("preflab_write", False)
    conn.exec_driver_sql("BEGIN IMMEDIATE" if write else "BEGIN")
