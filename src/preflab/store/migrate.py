"""Schema migrations of the feedback store with Alembic, run from code (no alembic.ini).

A store made before migrations existed (schema version 1, no ``alembic_version`` table) is
stamped ``0001`` and upgraded; a new store is created from the current tables and stamped at
the head; a store whose revision this PrefLab does not know (made by a newer PrefLab) is
refused with a clear message.
"""

from __future__ import annotations

import logging
from pathlib import Path

logging.getLogger("alembic").setLevel(logging.WARNING)  # no INFO lines on import or open

from alembic import command  # noqa: E402
from alembic.config import Config  # noqa: E402
from alembic.runtime.migration import MigrationContext  # noqa: E402
from alembic.script import ScriptDirectory  # noqa: E402
from sqlalchemy import Connection  # noqa: E402

from preflab.errors import StoreError  # noqa: E402

MIGRATIONS = Path(__file__).parent / "migrations"
FIRST = "0001"


def _config(conn: Connection | None = None) -> Config:
    cfg = Config()
    cfg.set_main_option("script_location", str(MIGRATIONS))
    if conn is not None:
        cfg.attributes["connection"] = conn
    return cfg


def head() -> str:
    """The newest migration revision this PrefLab knows."""
    rev = ScriptDirectory.from_config(_config()).get_current_head()
    assert rev is not None
    return rev


def known_revisions() -> set[str]:
    return {s.revision for s in ScriptDirectory.from_config(_config()).walk_revisions()}


def current(conn: Connection) -> str | None:
    """The store's revision (None when it was never stamped)."""
    return MigrationContext.configure(conn).get_current_revision()


def stamp(conn: Connection, revision: str) -> None:
    command.stamp(_config(conn), revision)


def upgrade(conn: Connection, *, label: str) -> str | None:
    """Bring the store on ``conn`` to the head revision; returns the revision it had."""
    rev = current(conn)
    if rev is not None and rev not in known_revisions():
        raise StoreError(
            f"{label} has schema revision {rev!r}, newer than this PrefLab knows (head "
            f"{head()!r}); it was written by a newer PrefLab. Upgrade PrefLab "
            "(pip install -U preflab) to open it"
        )
    if rev is None:
        stamp(conn, FIRST)
    if rev != head():
        command.upgrade(_config(conn), "head")
    return rev
