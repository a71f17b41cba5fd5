"""``store_url``: the store suite runs against SQLite and PostgreSQL (a fresh database each)."""

from __future__ import annotations

import uuid

from sqlalchemy import create_engine, text


def fresh_pg_database(postgres_url: str) -> tuple[str, str]:
    """(url, name) of a new empty database on the test cluster."""
    name = "t_" + uuid.uuid4().hex[:12]
    admin = create_engine(postgres_url, isolation_level="AUTOCOMMIT")
    with admin.connect() as c:
        c.execute(text(f"CREATE DATABASE {name}"))
    admin.dispose()
    return postgres_url.rsplit("/", 1)[0] + "/" + name, name


def drop_pg_database(postgres_url: str, name: str) -> None:
    admin = create_engine(postgres_url, isolation_level="AUTOCOMMIT")
    with admin.connect() as c:
        c.execute(text(f"DROP DATABASE IF EXISTS {name} WITH (FORCE)"))
    admin.dispose()
