"""``store_url``: the store suite runs against SQLite and PostgreSQL (a fresh database each)."""

from __future__ import annotations

import uuid
from collections.abc import Iterator

import pytest
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


@pytest.fixture(params=["sqlite", pytest.param("postgres", marks=pytest.mark.postgres)])
def store_url(request: pytest.FixtureRequest, tmp_path) -> Iterator[str]:
    """A URL (or SQLite path) of an empty store location; arrays go to tmp_path/segments."""
    if request.param == "sqlite":
        yield str(tmp_path / "feedback.db")
        return
    base = request.getfixturevalue("postgres_url")
    url, name = fresh_pg_database(base)
    try:
        yield url
    finally:
        drop_pg_database(base, name)
