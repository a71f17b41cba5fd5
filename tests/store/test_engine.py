"""preflab.store.engine: the session each PostgreSQL connection of a store gets."""

from __future__ import annotations

import pytest
from sqlalchemy import text

from preflab.store.engine import make_engine
from tests.store.conftest import drop_pg_database, fresh_pg_database


@pytest.mark.postgres
def test_every_postgres_connection_runs_without_jit(postgres_url: str) -> None:
    url, name = fresh_pg_database(postgres_url)
    engine = make_engine(url, label="test")
    try:
        with engine.connect() as a, engine.connect() as b:  # two pooled connections
            for c in (a, b):
                assert c.execute(text("SHOW jit")).scalar() == "off"
            a.rollback()  # a rolled-back transaction keeps the session's setting
            assert a.execute(text("SHOW jit")).scalar() == "off"
        with engine.connect() as c:  # a connection the pool hands out again
            assert c.execute(text("SHOW jit")).scalar() == "off"
    finally:
        engine.dispose()
        drop_pg_database(postgres_url, name)
