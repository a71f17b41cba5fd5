"""Queries read by cursor and by id (:class:`preflab.store.queries.Queries`), on SQLite and
PostgreSQL: a reader that reads on from the highest seq it read (the studio's pre-renderer)
gets each query once, never skips one whose writer commits late, and costs what is new."""

from __future__ import annotations

import threading

import pytest

from preflab.records import Query
from preflab.store import FeedbackStore
from preflab.store.queries import insert_queries
from preflab.testing.factories import make_judgement, make_query


@pytest.fixture
def store(store_url: str, tmp_path) -> FeedbackStore:
    s = FeedbackStore(store_url, array_dir=tmp_path / "segments")
    yield s
    s.close()


def _ids(qs: list[Query]) -> list[str]:
    return [q.id for q in qs]


def test_reading_on_from_a_seq_gives_each_open_query_once(store: FeedbackStore) -> None:
    assert store.queries.unanswered_after(0) == ([], 0)
    store.queries.add([make_query("q1", "a", "b"), make_query("q2", "c", "d", round=1)])
    got, after = store.queries.unanswered_after(0)
    assert _ids(got) == ["q1", "q2"] and after == store.queries.max_seq() == 2
    assert store.queries.unanswered_after(after) == ([], 2)  # nothing new: nothing again
    # answered (even if undone later), withdrawn in the same transaction or after: never open;
    # the cursor still passes them, and what is stored later is read
    store.queries.add([make_query("q3", "e", "f")])
    store.answers.add([make_judgement("j3", "q3", "h1", 1.0)])
    store.answers.retract("j3", "h1")
    store.queries.add([make_query("q4", "g", "h"), make_query("q5", "i", "j")], withdrawn=["q4"])
    store.queries.withdraw(["q5"])
    store.queries.add([make_query("q6", "k", "l", round=0)])
    got, after = store.queries.unanswered_after(2)
    assert _ids(got) == ["q6"] and after == 6
    # the same as every open query (unanswered, not withdrawn) read whole, from seq 0
    gone = store.queries.withdrawn_ids()
    whole = [q for q in store.queries.unanswered() if q.id not in gone]
    assert store.queries.unanswered_after(0) == (whole, 6)
    # a query answered or withdrawn after it was read is not read again (nor anything before)
    store.answers.add([make_judgement("j1", "q1", "h1", 1.0)])
    assert store.queries.unanswered_after(6) == ([], 6)


def test_a_reader_never_skips_a_query_whose_writer_commits_late(store: FeedbackStore) -> None:
    """Query seqs follow commit order: a writer takes its seqs from the counter row, which it
    holds till it commits, so a later writer waits and takes higher ones. A reader reading on
    from the highest seq it read skips none (unlike judgement seqs on PostgreSQL)."""
    store.queries.add([make_query("q1", "a", "b")])
    _got, after = store.queries.unanswered_after(0)
    later = threading.Thread(target=lambda: store.queries.add([make_query("q3", "e", "f")]))
    with store.queries.db.write() as c:
        insert_queries(c, [make_query("q2", "c", "d")])  # seq 2 taken, not committed yet
        later.start()  # it waits for the counter row (or the write lock) until this commits
        assert store.queries.unanswered_after(after) == ([], after)  # nothing committed to read
    later.join(timeout=60)
    assert not later.is_alive()
    got, after = store.queries.unanswered_after(after)
    assert _ids(got) == ["q2", "q3"] and after == 3


def test_queries_among_ids_in_the_order_stored(store: FeedbackStore) -> None:
    qs = [make_query(f"q{k:04d}", f"a{k}", f"b{k}") for k in range(1200)]  # > one IN chunk
    store.queries.add(qs[::-1])  # stored newest id first
    wanted = ["nope", *(q.id for q in qs[::2]), qs[0].id]
    got = store.queries.stored_among(wanted)
    assert _ids(got) == [q.id for q in qs[::-1] if q.id in set(wanted)]
    assert got == [q for q in store.queries.all() if q.id in set(wanted)]
    assert store.queries.stored_among([]) == []


def test_the_store_writes_each_querys_pair_key_itself(store: FeedbackStore) -> None:
    """``queries.pair_key`` (what makes two queries the same question: its two sides, either
    order) is derived by the store on every write of a query, never given by a caller: by
    ``queries.add`` and by an answer that brings its own query (a group composed in the
    studio)."""
    from sqlalchemy import select

    from preflab.store import schema as S
    from preflab.store.queries import stored_pair_key

    store.queries.add(
        [
            make_query("q1", "a", "b"),
            make_query("q2", "b", "a", round=1),
            make_query("q3", ["a"], ["b"]),  # a group of one a side: the same question
            make_query("q4", ["a", "c"], ["b"]),
            make_query("q5", ["c", "a"], (), kind="ranking"),
            make_query("q6", ["a", "c"], (), kind="rating"),
        ]
    )
    store.answers.add(
        [make_judgement("j7", "q7", "h1", 1.0)],
        with_queries=[make_query("q7", ["b"], ["c", "a"], meta={"created_by": "studio"})],
    )
    with store.engine.connect() as c:
        keys = dict(c.execute(select(S.queries.c.id, S.queries.c.pair_key)).all())
    assert keys["q1"] == keys["q2"] == keys["q3"] == stored_pair_key(["b"], ["a"])
    assert keys["q4"] == keys["q7"] != keys["q1"]
    assert keys["q5"] == keys["q6"] == stored_pair_key(["a", "c"], [])
    assert len(keys["q1"]) == 64 and len(set(keys.values())) == 3
    # ids in a query may hold any character: whatever they hold, two sides never run together
    for sep in ("\x1e", "|", '", "', "\x00"):
        assert stored_pair_key([f"x{sep}y"], ["z"]) != stored_pair_key(["x"], [f"y{sep}z"])
    assert stored_pair_key(["a", "b"], ["c"]) == stored_pair_key(["c"], ["b", "a"])
