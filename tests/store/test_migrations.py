"""Alembic migrations: a store made by PrefLab before them (schema 1) opens and keeps its data;
a store from a newer PrefLab is refused with a clear message."""

from __future__ import annotations

import shutil
import sqlite3
from pathlib import Path

import pytest
from sqlalchemy import create_engine, inspect, text

from preflab.errors import StoreError
from preflab.kinds import PAIR
from preflab.records import Judgement
from preflab.sources import StoreSource
from preflab.store import SCHEMA_VERSION, FeedbackStore, migrate
from preflab.store.person_queue import pair_key
from preflab.store.queries import stored_pair_key
from preflab.testing.factories import make_query

FIXTURE = Path(__file__).parent / "fixtures" / "v1_store"


def copy_fixture(tmp_path: Path) -> Path:
    d = tmp_path / "run"
    shutil.copytree(FIXTURE, d)
    return d


def test_v1_fixture_upgrades_and_keeps_everything(tmp_path) -> None:
    d = copy_fixture(tmp_path)
    con = sqlite3.connect(d / "feedback.db")
    assert con.execute("select value from preflab_info where key='schema_version'").fetchone() == (
        "1",
    )
    con.close()
    store = FeedbackStore(d / "feedback.db")
    assert SCHEMA_VERSION == 4
    with store.engine.connect() as c:
        assert migrate.current(c) == migrate.head()
        assert (
            c.execute(text("select value from preflab_info where key='schema_version'")).scalar()
            == "4"
        )
        assert c.execute(text("select count(*) from queries where pair_key is null")).scalar() == 0
    segs = store.segments.all()
    assert len(segs) == 4 and [s.episode for s in segs] == [0, 1, 2, 3]
    assert {q.kind for q in store.queries.all()} == {"pair", "group", "rating"}
    assert [j.id for _s, j in store.answers.judgements(include_retracted=True)] == [
        "j-1",
        "j-2",
        "j-3",
        "j-4",
    ]
    assert [j.id for _s, j in store.answers.judgements()] == ["j-1", "j-2", "j-3"]  # j-4 was undone
    assert store.annotators.id_for_token("alice-token") == "alice"
    assert store.answers.retracted_ids() == {"j-4"} and store.rounds.cursor("trainer") == 1
    assert len(store.ratings.all(stream_id="q-rating-1")) == 4
    assert store.llm_cache.get_cached_response("k1") == "yes"
    # new rows continue the sequences
    store.queries.add([PAIR.query(segs[0].id, segs[3].id)])
    assert store.queries.max_seq() == 4
    store.answers.add(
        [Judgement(id="j-5", query_id="q-pair-1", annotator_id="bob", source="human", p=1.0)]
    )
    assert store.answers.judgements(after_seq=4)[0][0] == 5
    src = StoreSource(store, after_seq=4)
    assert [j.id for j in src.collect()] == ["j-5"]
    store.close()
    FeedbackStore(d / "feedback.db").close()  # opening again is a no-op


def test_newer_revision_is_refused(tmp_path) -> None:
    path = tmp_path / "f.db"
    FeedbackStore(path).close()
    eng = create_engine(f"sqlite:///{path}")
    with eng.begin() as c:
        c.execute(text("update alembic_version set version_num='9999'"))
    eng.dispose()
    with pytest.raises(StoreError, match="newer PrefLab"):
        FeedbackStore(path)


def test_newer_schema_version_is_refused(tmp_path) -> None:
    path = tmp_path / "f.db"
    FeedbackStore(path).close()
    con = sqlite3.connect(path)
    con.execute("update preflab_info set value='7' where key='schema_version'")
    con.commit()
    con.close()
    with pytest.raises(StoreError, match="schema version 7, newer"):
        FeedbackStore(path)


@pytest.mark.postgres
def test_v1_schema_on_postgres_upgrades(postgres_url, tmp_path) -> None:
    """A version-1 store on PostgreSQL (its tables made from the fixture's schema) upgrades."""
    from tests.store.conftest import drop_pg_database, fresh_pg_database

    url, name = fresh_pg_database(postgres_url)
    try:
        store = FeedbackStore(url, array_dir=tmp_path / "a")
        store.close()
        eng = create_engine(url)
        with eng.begin() as c:  # turn it back into what schema 1 looked like
            c.execute(text("drop table alembic_version"))
            c.execute(text("drop table counters"))
            for ix in (
                "ux_segments_seq",
                "ux_queries_seq",
                "ix_annotators_token",
            ):
                c.execute(text(f"drop index {ix}"))
            c.execute(text("update preflab_info set value='1' where key='schema_version'"))
        eng.dispose()
        store = FeedbackStore(url, array_dir=tmp_path / "a")
        with store.engine.connect() as c:
            assert migrate.current(c) == migrate.head()
        store.close()
    finally:
        drop_pg_database(postgres_url, name)


def test_v2_store_gets_the_hold_column_and_keeps_its_queue_rows(store_url, tmp_path) -> None:
    """Schema 3 adds ``queue_states.reserved_at`` (a study's hold on a pair): a schema-2 store
    (SQLite or PostgreSQL) opens, keeps its rows, and each hold starts from when the query was
    first shown."""
    store = FeedbackStore(store_url, array_dir=tmp_path / "a")
    store.people.mark_served("ann", "q1")
    store.people.skip("ann", "q2")
    served_at = store.people.state("ann", "q1")["served_at"]  # type: ignore[index]
    url = store.engine.url.render_as_string(hide_password=False)
    store.close()
    eng = create_engine(url)
    with eng.begin() as c:  # turn it back into what schema 2 looked like
        c.execute(text("alter table queue_states drop column reserved_at"))
        c.execute(text("update alembic_version set version_num='0002'"))
        c.execute(text("update preflab_info set value='2' where key='schema_version'"))
    eng.dispose()
    store = FeedbackStore(store_url, array_dir=tmp_path / "a")
    with store.engine.connect() as c:
        assert migrate.current(c) == "0004"  # and on to the head
        version = c.execute(text("select value from preflab_info where key='schema_version'"))
        assert version.scalar() == "4"
    assert store.people.state("ann", "q1") == {
        "served_at": served_at,
        "skipped_at": None,
        "skips": 0,
        "reserved_at": served_at,
    }
    skipped = store.people.state("ann", "q2")
    assert skipped is not None and skipped["skips"] == 1 and skipped["reserved_at"] is None
    store.close()


def test_v3_store_gets_pair_keys_and_64_bit_step_counts(store_url, tmp_path) -> None:
    """Schema 4 adds ``queries.pair_key`` (what makes two queries the same question), filled in
    for every stored query in batches, and its index; a round's step counts become 64-bit on
    PostgreSQL. A schema-3 store (SQLite or PostgreSQL) opens with the same queue as before."""
    store = FeedbackStore(store_url, array_dir=tmp_path / "a")
    qs = [  # more than one batch of the backfill: 300 pairs, each asked 7 times, in either order
        make_query(
            f"m{k}", *(f"s{k % 300}", f"s{k % 300 + 300}")[:: 1 if k % 2 else -1], round=k % 3
        )
        for k in range(2100)
    ]
    qs += [  # a group of one a side asks what a pair asks; rankings and streams have sides too
        make_query("g1", ["s1"], ["s301"], kind="group"),
        make_query("g2", ["s2", "s3"], ["s4"]),
        make_query("r1", ["s5", "s6", "s7"], (), kind="ranking"),
        make_query("t1", ["s5", "s6"], (), kind="rating"),
    ]
    store.queries.add(qs)
    store.answers.add(
        Judgement(id=f"j{k}", query_id=q.id, annotator_id="ann", source="human", p=1.0)
        for k, q in enumerate(qs[:300:7])
    )
    store.people.skip("ann", qs[1].id)
    before = [q.id for q in store.people.queue("ann", repeat_share=0.3)]
    url = store.engine.url.render_as_string(hide_password=False)
    store.close()
    eng = create_engine(url)
    with eng.begin() as c:  # turn it back into what schema 3 looked like
        c.execute(text("drop index ix_queries_pair_key"))
        c.execute(text("alter table queries drop column pair_key"))
        if eng.dialect.name == "postgresql":
            for t, col in (
                ("rounds", "env_steps"),
                ("rounds", "total_steps"),
            ):
                c.execute(text(f"alter table {t} alter column {col} type integer"))
        c.execute(text("update alembic_version set version_num='0003'"))
        c.execute(text("update preflab_info set value='3' where key='schema_version'"))
    eng.dispose()
    store = FeedbackStore(store_url, array_dir=tmp_path / "a")
    with store.engine.connect() as c:
        assert migrate.current(c) == migrate.head() == "0004"
        version = c.execute(text("select value from preflab_info where key='schema_version'"))
        assert version.scalar() == "4"
        keys = dict(c.execute(text("select id, pair_key from queries")).all())
    assert "ix_queries_pair_key" in {
        ix["name"] for ix in inspect(store.engine).get_indexes("queries")
    }
    # the key of each query is the store's, and two queries share it exactly when they ask the
    # same pair (the queue's pair_key: either order, across kinds)
    assert keys == {q.id: stored_pair_key(q.a, q.b) for q in qs}
    same = {
        (keys[x.id] == keys[y.id]) == (pair_key(x) == pair_key(y)) for x in qs[::25] for y in qs
    }
    assert same == {True}
    assert len(set(keys.values())) == len({pair_key(q) for q in qs}) < len(qs)
    assert [q.id for q in store.people.queue("ann", repeat_share=0.3)] == before
    assert [q.id for q in store.people.queue("ann", limit=4)] == before[:4]
    # rounds count steps past 2**31 (PostgreSQL's integer held 2**31 - 1)
    store.rounds.publish(3, env_id="E", env_steps=2**40, total_steps=2**53, metrics={})
    assert store.rounds.all()[-1]["total_steps"] == 2**53
    if store.engine.dialect.name == "postgresql":
        types = {
            col["name"]: str(col["type"]) for col in inspect(store.engine).get_columns("rounds")
        }
        assert types["env_steps"] == types["total_steps"] == "BIGINT"
    store.close()
