"""FeedbackStore: SQLAlchemy over SQLite (default, WAL) or PostgreSQL (by URL).

The store is a set of repositories on one engine and one transaction rule
(:mod:`preflab.store.repository`): ``store.segments``, ``store.queries``, ``store.answers``
(judgements, retractions, the trainer's collection mark), ``store.ratings``,
``store.annotators`` (and their tokens), ``store.rounds`` (rounds, pools, cursors),
``store.settings``, ``store.people`` (each person's queue), ``store.studies`` (studies with
real people) and ``store.llm_cache``. This class opens the database, runs the migrations and
holds them.

Append-only for judgements and ratings: corrections are new rows. Every write is one
transaction, so an interrupted run keeps everything written before the interruption.
"""

from __future__ import annotations

import sqlite3
import time
from pathlib import Path

from sqlalchemy import Engine, insert, inspect, select
from sqlalchemy.exc import DatabaseError, IntegrityError, OperationalError, SQLAlchemyError

from preflab.errors import StoreError
from preflab.store import migrate
from preflab.store import schema as S
from preflab.store.annotators import Annotators
from preflab.store.answers import Answers
from preflab.store.arrays import ArrayStore
from preflab.store.engine import LOCK_WAIT_S, mask_url, reason, retry_locked, strip_password, url_of
from preflab.store.llm_cache import LLMCache
from preflab.store.person_queue import PersonQueues
from preflab.store.queries import Queries
from preflab.store.ratings import Ratings
from preflab.store.repository import Database
from preflab.store.rounds import Rounds
from preflab.store.schema import APP_NAME, SCHEMA_VERSION
from preflab.store.segments import Segments
from preflab.store.settings import Settings
from preflab.store.studies import Studies

__all__ = ["LOCK_WAIT_S", "SCHEMA_VERSION", "FeedbackStore", "mask_url", "strip_password"]


class FeedbackStore:
    """A run's feedback: its repositories on one database (metadata and answers there, segment
    arrays in .npz files)."""

    def __init__(
        self, target: str | Path, *, array_dir: str | Path | None = None, create: bool = True
    ) -> None:
        """Open the store at ``target`` (a SQLite path or a database URL), creating it when
        there is none (a missing or empty file, a database without tables) unless ``create`` is
        False: then a missing store is a StoreError, and nothing is made (a command that reads a
        run's store, or resumes it, never swaps a lost store for a new empty one). A database
        that holds other tables is refused before anything in it is changed."""
        real = url_of(target)
        url = mask_url(real)
        if real.startswith("sqlite"):
            db_path = Path(real.removeprefix("sqlite:///"))
            _check_sqlite_file(db_path, url, create=create)
            try:
                db_path.parent.mkdir(parents=True, exist_ok=True)
            except OSError as exc:
                raise StoreError(
                    f"cannot create the store's folder {db_path.parent}: {exc}"
                ) from exc
            default_arrays = db_path.parent / "segments"
        else:
            default_arrays = Path("segments")
        self.db = Database(real)
        """The one engine and transaction rule every repository shares."""
        try:
            retry_locked(lambda: self._open(create=create), is_sqlite=self.is_sqlite)
            self.arrays = ArrayStore(array_dir or default_arrays)
            """The segments' arrays (one .npz file per segment id)."""
        except OperationalError as exc:
            self.db.close()
            raise StoreError(
                f"cannot reach the store {url}: {reason(exc)}. Check the host, port, "
                "database name and user (the password comes from PGPASSWORD or ~/.pgpass)"
            ) from exc
        except SQLAlchemyError as exc:
            self.db.close()
            raise StoreError(f"cannot open the store {url}: {reason(exc)}") from exc
        except OSError as exc:
            self.db.close()
            raise StoreError(
                f"cannot create the segment folder {array_dir or default_arrays}: {exc}"
            ) from exc
        except BaseException:
            self.db.close()
            raise
        self.segments = Segments(self.db, self.arrays)
        """Segments: rows here, arrays in :attr:`arrays`."""
        self.queries = Queries(self.db)
        """Queries of every kind, which are open to whom, and withdrawals."""
        self.rounds = Rounds(self.db)
        """Published rounds, round pools and reader cursors."""
        self.answers = Answers(self.db, self.queries, self.rounds)
        """Judgements, retractions and the trainer's collection mark."""
        self.ratings = Ratings(self.db)
        """Real-time ratings of streams."""
        self.annotators = Annotators(self.db)
        """Annotators and their tokens."""
        self.settings = Settings(self.db)
        """Run settings the owner and the trainer share."""
        self.people = PersonQueues(self.db, self.queries)
        """What each person is asked next in the studio."""
        self.llm_cache = LLMCache(self.db)
        """Cached LLM responses (the cache an LLM client takes)."""
        self.studies = Studies(self.db)
        """Studies with real people: the study link, participants, attention checks."""

    @property
    def url(self) -> str:
        """The store's URL with any password masked (safe to print or write)."""
        return self.db.url

    @property
    def is_sqlite(self) -> bool:
        """Whether the store is a SQLite file (else PostgreSQL)."""
        return self.db.is_sqlite

    @property
    def engine(self) -> Engine:
        """The SQLAlchemy engine. Only the store package runs SQL: callers use repositories."""
        return self.db.engine

    def close(self) -> None:
        """Close the database's connections."""
        self.db.close()

    def _open(self, *, create: bool) -> None:
        engine, url = self.db.engine, self.url
        try:
            tables = set(inspect(engine).get_table_names())
        except (DatabaseError, OperationalError) as exc:
            if not self.is_sqlite:
                raise  # a server that cannot be reached: reported by __init__
            raise StoreError(
                f"{url} is not a readable database (corrupt, or not a PrefLab store): "
                f"{exc.orig if hasattr(exc, 'orig') else exc}. Point to a run directory's "
                "feedback.db or a fresh path"
            ) from exc
        if not tables and not create:
            raise StoreError(_missing(url))
        if not tables:
            try:
                with self.db.write() as c:
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
                tables = set(inspect(engine).get_table_names())
        if "preflab_info" not in tables:
            raise StoreError(_foreign(url, tables))
        with self.db.read() as c:
            meta = dict(c.execute(select(S.info.c.key, S.info.c.value)).all())
        if meta.get("app") != APP_NAME:
            raise StoreError(f"{url} is not a PrefLab store (app = {meta.get('app')!r})")
        try:
            version = int(meta.get("schema_version", -1))
        except ValueError:
            version = -1
        if version > SCHEMA_VERSION:
            raise StoreError(
                f"{url} has schema version {version}, newer than this PrefLab reads "
                f"({SCHEMA_VERSION}); it was written by a newer PrefLab. Upgrade PrefLab "
                "(pip install -U preflab) to open it"
            )
        if version < 1:
            raise StoreError(
                f"{url} has an unreadable schema version {meta.get('schema_version')!r}"
            )
        with self.db.write() as c:
            migrate.upgrade(c, label=url)  # refuses unknown (newer) revisions
        S.metadata.create_all(engine)  # tables added since; never drops anything
        for index in S.ADDED_INDEXES:
            index.create(engine, checkfirst=True)


def _missing(url: str) -> str:
    return (
        f"no PrefLab store at {url} (missing, or an empty file or database): this command "
        "reads a run's store and makes none. Restore the run's feedback.db (or point "
        "--store-url at the run's database)"
    )


def _foreign(url: str, tables: set[str]) -> str:
    return (
        f"{url} holds tables {sorted(tables)[:5]} but is not a PrefLab store; refusing to "
        "write to it. Use a new path for the store"
    )


def _check_sqlite_file(path: Path, url: str, *, create: bool) -> None:
    """Before any connection that could change it: a missing or empty file is refused unless
    ``create``; an existing database that holds tables but no PrefLab store is refused (read
    through a read-only connection, so its journal mode stays as it was)."""
    if path.is_dir():
        raise StoreError(f"{url} is a folder, not a store file; pass the run directory instead")
    if not path.is_file() or path.stat().st_size == 0:
        if not create:
            raise StoreError(_missing(url))
        return
    try:
        con = sqlite3.connect(f"{path.resolve().as_uri()}?mode=ro", uri=True)
    except sqlite3.Error as exc:
        raise StoreError(f"cannot open {url} to read it: {exc}") from exc
    try:
        tables = {r[0] for r in con.execute("SELECT name FROM sqlite_master WHERE type='table'")}
    except sqlite3.DatabaseError as exc:
        raise StoreError(
            f"{url} is not a readable database (corrupt, or not a PrefLab store): {exc}. Point "
            "to a run directory's feedback.db or a fresh path"
        ) from exc
    finally:
        con.close()
    if tables and "preflab_info" not in tables:
        raise StoreError(_foreign(url, tables))
    if not tables and not create:
        raise StoreError(_missing(url))
