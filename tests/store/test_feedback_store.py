import functools
import sqlite3
import sys
import textwrap

import numpy as np
import pytest

from preflab.errors import DataError, StoreError
from preflab.kinds import PAIR
from preflab.records import Annotator, Judgement, Query, Rating
from preflab.sources import StoreSource
from preflab.store import FeedbackStore
from preflab.testing.factories import make_segments
from tests import warm_python

# segments as a recorder would store them: cut at step 3 of their episode in round 1
toy_segments = functools.partial(
    make_segments, length=6, obs_dim=3, act_dim=2, env_id="Toy-v0", start=3, round=1
)


def round_trip(store: FeedbackStore) -> None:
    segs = toy_segments(4, rng=np.random.default_rng(0), episode=range(4))
    assert store.segments.add(segs) == 4 and store.segments.add(segs) == 0
    back = {s.id: s for s in store.segments.all()}
    for s in segs:
        np.testing.assert_array_equal(back[s.id].obs, s.obs)
        np.testing.assert_array_equal(back[s.id].true_rewards, s.true_rewards)
        assert (back[s.id].episode, back[s.id].start, back[s.id].env_id) == (s.episode, 3, "Toy-v0")
    q = PAIR.query(segs[0].id, segs[1].id, round=2, selector="variance", score=0.25)
    g = Query(id="g1", kind="group", a=(segs[0].id, segs[1].id), b=(segs[2].id,))
    store.queries.add([q, g])
    assert [x.id for x in store.queries.unanswered()] == [q.id, "g1"]
    j = Judgement(
        id="j1",
        query_id=q.id,
        annotator_id="ann",
        source="human",
        p=0.5,
        response_time_s=3.2,
        meta={"ui": "pairwise"},
    )
    store.answers.add([j])
    ((_seq, j2),) = store.answers.judgements()
    assert j2 == j
    assert [x.id for x in store.queries.unanswered()] == ["g1"]
    assert store.queries.all()[0].meta == {"selector": "variance", "score": 0.25}
    store.annotators.add(Annotator(id="ann", source="human", name="Ann"), token="secret")
    assert (
        store.annotators.id_for_token("secret") == "ann"
        and store.annotators.id_for_token("nope") is None
    )
    store.ratings.add(
        [
            Rating(annotator_id="ann", stream_id="s", step=k, t=0.1 * k, value=0.1 * k)
            for k in range(3)
        ]
    )
    assert [r.step for r in store.ratings.all(stream_id="s")] == [0, 1, 2]
    store.llm_cache.put_cached_response("k", "m", "prompt", "yes")
    store.llm_cache.put_cached_response("k", "m", "prompt", "no")
    assert (
        store.llm_cache.get_cached_response("k") == "yes"
        and store.llm_cache.get_cached_response("x") is None
    )


def test_round_trip(store_url, tmp_path) -> None:
    round_trip(FeedbackStore(store_url, array_dir=tmp_path / "segments"))


@pytest.mark.postgres
def test_postgres_round_trip(postgres_url, tmp_path) -> None:
    round_trip(FeedbackStore(postgres_url, array_dir=tmp_path / "arrays"))


def test_bad_writes_change_nothing(store_url, tmp_path) -> None:
    store = FeedbackStore(store_url, array_dir=tmp_path / "segments")
    segs = toy_segments(2, rng=np.random.default_rng(0), episode=range(2))
    store.segments.add(segs)
    q = PAIR.query(segs[0].id, segs[1].id)
    store.queries.add([q])
    good = Judgement(id="j1", query_id=q.id, annotator_id="a", source="human", p=1.0)
    orphan = Judgement(id="j2", query_id="missing", annotator_id="a", source="human", p=1.0)
    with pytest.raises(DataError, match="unknown query"):
        store.answers.add([good, orphan])
    assert store.answers.judgements() == []
    store.answers.add([good])
    with pytest.raises(DataError, match="unique"):
        store.answers.add(
            [Judgement(id="j3", query_id=q.id, annotator_id="a", source="human", p=0.0), good]
        )
    assert [j.id for _s, j in store.answers.judgements()] == ["j1"]
    r = Rating(annotator_id="a", stream_id="s", step=0, t=1.0, value=0.0)
    store.ratings.add([r])
    with pytest.raises(DataError, match="duplicated"):
        store.ratings.add([Rating(annotator_id="a", stream_id="s", step=1, t=2.0, value=0.0), r])
    assert len(store.ratings.all()) == 1


def test_corrupt_foreign_and_newer_stores_are_refused(tmp_path) -> None:
    bad = tmp_path / "bad.db"
    bad.write_bytes(b"this is not sqlite" * 100)
    with pytest.raises(StoreError, match="not a readable database"):
        FeedbackStore(bad)
    assert bad.read_bytes() == b"this is not sqlite" * 100
    foreign = tmp_path / "foreign.db"
    con = sqlite3.connect(foreign)
    con.execute("create table users(id int)")
    con.commit()
    con.close()
    with pytest.raises(StoreError, match="not a PrefLab store"):
        FeedbackStore(foreign)
    newer = tmp_path / "newer.db"
    FeedbackStore(newer).close()
    con = sqlite3.connect(newer)
    con.execute("update preflab_info set value='99' where key='schema_version'")
    con.commit()
    con.close()
    with pytest.raises(StoreError, match="schema version 99"):
        FeedbackStore(newer)


def test_a_refused_foreign_database_is_left_as_it_was(tmp_path) -> None:
    """Someone else's SQLite file is refused before anything in it changes: its journal mode
    (SQLite's header) stays, and no segment folder appears beside it."""
    foreign = tmp_path / "theirs" / "foreign.db"
    foreign.parent.mkdir()
    con = sqlite3.connect(foreign)
    con.execute("create table users(id int)")
    con.commit()
    con.close()
    before = foreign.read_bytes()
    with pytest.raises(StoreError, match="not a PrefLab store"):
        FeedbackStore(foreign)
    assert foreign.read_bytes() == before  # bytes 18-19 would say WAL
    assert sorted(p.name for p in foreign.parent.iterdir()) == ["foreign.db"]


def test_a_command_that_reads_a_store_never_makes_one(tmp_path) -> None:
    """create=False (export, resume, the studio on a run): a missing or emptied store file is
    refused and left as it was, not replaced by a new empty store."""
    missing = tmp_path / "run" / "feedback.db"
    with pytest.raises(StoreError, match=r"no PrefLab store at .*Restore the run's feedback\.db"):
        FeedbackStore(missing, create=False)
    assert not missing.parent.exists()
    empty = tmp_path / "emptied.db"
    empty.write_bytes(b"")
    with pytest.raises(StoreError, match="no PrefLab store"):
        FeedbackStore(empty, create=False)
    assert empty.read_bytes() == b"" and not (tmp_path / "segments").exists()
    made = tmp_path / "made.db"
    FeedbackStore(made).close()  # the default makes a new store
    FeedbackStore(made, create=False).close()  # and an existing one opens


@pytest.mark.postgres
def test_an_empty_postgres_database_is_not_a_store_to_read(postgres_url, tmp_path) -> None:
    from tests.store.conftest import drop_pg_database, fresh_pg_database

    url, name = fresh_pg_database(postgres_url)
    try:
        with pytest.raises(StoreError, match="no PrefLab store"):
            FeedbackStore(url, array_dir=tmp_path / "a", create=False)
        FeedbackStore(url, array_dir=tmp_path / "a").close()
    finally:
        drop_pg_database(postgres_url, name)


def test_an_empty_segment_file_is_a_store_error(tmp_path) -> None:
    store = FeedbackStore(tmp_path / "f.db")
    (seg,) = make_segments(1, rng=np.random.default_rng(0))
    store.segments.add([seg])
    store.arrays.path(seg.id).write_bytes(b"")
    with pytest.raises(StoreError, match="missing or corrupt"):
        store.segments.get([seg.id])
    store.close()


def test_store_source_reads_judgements_written_by_another_process(tmp_path) -> None:
    db = tmp_path / "feedback.db"
    store = FeedbackStore(db)
    segs = toy_segments(2, rng=np.random.default_rng(0), episode=range(2))
    source = StoreSource(store)
    q = PAIR.query(segs[0].id, segs[1].id)
    store.segments.add(segs)  # the loop stores a round's queries and segments (once)
    store.queries.add([q])
    source.submit([q], {s.id: s for s in segs})
    assert source.collect() == []
    script = textwrap.dedent(f"""
        from preflab.store import FeedbackStore
        from preflab.records import Judgement
        s = FeedbackStore({str(db)!r})
        s.answers.add([Judgement(id="h1", query_id={q.id!r}, annotator_id="alice", source="human", p=0.0,
                                    response_time_s=4.0)])
        s.answers.add([Judgement(id="llm1", query_id={q.id!r}, annotator_id="gpt", source="llm", p=1.0)])
    """)
    warm_python.run([sys.executable, "-c", script], check=True)  # another process, forked warm
    got = source.collect()
    assert [(j.id, j.annotator_id, j.p) for j in got] == [("h1", "alice", 0.0)]
    assert source.collect() == []
    assert {s.id for s in store.segments.all()} == {s.id for s in segs}


def test_annotate_merges_keys_into_query_meta(store_url, tmp_path) -> None:
    store = FeedbackStore(store_url, array_dir=tmp_path / "segments")
    try:
        segs = make_segments(2, rng=np.random.default_rng(0))
        store.segments.add(segs)
        q = PAIR.query(segs[0].id, segs[1].id, score=0.5, route="old")
        store.queries.add([q])
        store.queries.annotate({q.id: {"route": {"answerer": "people", "reason": "ai-unsure"}}})
        got = store.queries.get(q.id)
        assert got is not None
        assert dict(got.meta) == {
            "score": 0.5,
            "route": {"answerer": "people", "reason": "ai-unsure"},
        }
        with pytest.raises(DataError, match="not stored"):
            store.queries.annotate({q.id: {"x": 1}, "q-missing": {"x": 1}})
        again = store.queries.get(q.id)
        assert again is not None and "x" not in again.meta  # all or nothing
    finally:
        store.close()
