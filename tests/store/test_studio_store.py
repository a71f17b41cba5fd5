"""Store additions for the studio: rounds, cursors, retractions, idempotent judgements, roles,
per-annotator open queries (Contract A)."""

from __future__ import annotations

import math
import uuid

import numpy as np
import pytest
from sqlalchemy import create_engine, text

from preflab.errors import ConflictError, DataError
from preflab.records import Annotator, Judgement, Query, Rating
from preflab.store import FeedbackStore
from preflab.testing.factories import make_segments


def _store_with_queries(store: FeedbackStore) -> list[Query]:
    s = make_segments(6, rng=np.random.default_rng(1), env_id="Toy-v0", episode=range(6))
    store.segments.add(s)
    qs = [
        Query(id="q1", kind="pair", a=(s[0].id,), b=(s[1].id,), round=1),
        Query(id="q2", kind="pair", a=(s[2].id,), b=(s[3].id,), round=1),
        Query(id="q3", kind="pair", a=(s[4].id,), b=(s[5].id,), round=2),
        Query(id="q4", kind="group", a=(s[0].id, s[1].id), b=(s[2].id,), round=2),
        Query(id="r1", kind="rating", a=(s[0].id, s[1].id), round=2),
    ]
    store.queries.add(qs)
    for aid in ("alice", "bob"):
        store.annotators.add(
            Annotator(id=aid, source="human", name=aid, meta={"role": "annotator"})
        )
    return qs


def _j(jid: str, qid: str, who: str, p: float | None = 1.0, **meta) -> Judgement:
    return Judgement(id=jid, query_id=qid, annotator_id=who, source="human", p=p, meta=meta)


def core_scenario(store: FeedbackStore) -> None:
    _store_with_queries(store)
    # open queries: newest round first, selector order (seq) within a round
    assert [q.id for q in store.queries.open_for("alice")] == ["q3", "q4", "r1", "q1", "q2"]
    assert [q.id for q in store.queries.open_for("alice", kind="pair", limit=2)] == ["q3", "q1"]
    # idempotent insert
    j = _j("j-a1", "q3", "alice", 1.0, client_key="k1")
    assert store.answers.add([j], if_absent=True) == 1
    assert store.answers.add([_j("j-a1", "q3", "alice", 1.0, client_key="k1")], if_absent=True) == 0
    assert store.answers.count() == 1
    with pytest.raises(ConflictError, match="another p"):
        store.answers.add([_j("j-a1", "q3", "alice", 0.0, client_key="k1")], if_absent=True)
    with pytest.raises(DataError, match="unique"):
        store.answers.add([j])  # without if_absent a repeated id is an error, as before
    assert [q.id for q in store.queries.open_for("alice")] == ["q4", "r1", "q1", "q2"]
    assert store.queries.count_open_for("alice") == 4
    assert store.queries.count_open_for("bob") == 5
    # ratings answer a rating query for that annotator only
    store.ratings.add([Rating(annotator_id="alice", stream_id="r1", step=0, t=0.1, value=0.5)])
    assert "r1" not in [q.id for q in store.queries.open_for("alice")]
    assert "r1" in [q.id for q in store.queries.open_for("bob")]
    # retract before the trainer collected: allowed, query open again
    seq, _ = store.answers.get("j-a1")
    assert store.rounds.cursor("trainer") == 0
    store.answers.retract("j-a1", "alice")
    store.answers.retract("j-a1", "alice")  # idempotent
    assert store.answers.retracted_ids() == {"j-a1"}
    assert "q3" in [q.id for q in store.queries.open_for("alice")]
    assert store.answers.counts_of("alice", round=2) == (0, 0)
    # answer again, trainer collects it, undo is refused
    store.answers.add([_j("j-a2", "q3", "alice", 0.5)], if_absent=True)
    seq2, _ = store.answers.get("j-a2")
    assert seq2 > seq
    store.rounds.set_cursor("trainer", seq2)
    assert (
        store.rounds.cursor("trainer") == seq2
        and store.rounds.cursor_updated_at("trainer") is not None
    )
    with pytest.raises(ConflictError, match="already collected"):
        store.answers.retract("j-a2", "alice")
    store.answers.add([_j("j-b1", "q1", "bob", 0.0)])
    with pytest.raises(ConflictError, match="another annotator"):
        store.answers.retract("j-b1", "alice")
    with pytest.raises(DataError, match="no judgement"):
        store.answers.retract("nope", "alice")
    assert store.answers.retracted_ids() == {"j-a1"}
    assert store.answers.counts_of("alice", round=2) == (1, 1)
    assert store.annotators.activity() == {"alice": (1, 1), "bob": (1, 0)}
    assert [j.id for _s, j in store.answers.by_annotator("alice")] == ["j-a2"]
    assert [j.id for _s, j in store.answers.by_annotator("alice", include_retracted=True)] == [
        "j-a2",
        "j-a1",
    ]
    # rounds: upsert, oldest first, NaN → None
    store.rounds.publish(
        2, env_id="Toy-v0", env_steps=200, total_steps=1000, metrics={"n_labels": 3, "x": math.nan}
    )
    store.rounds.publish(
        1, env_id="Toy-v0", env_steps=100, total_steps=1000, metrics={"n_labels": np.int64(1)}
    )
    store.rounds.publish(
        2,
        env_id="Toy-v0",
        env_steps=250,
        total_steps=1000,
        metrics={"n_labels": 4, "x": float("inf")},
        status="finished",
    )
    rounds = store.rounds.all()
    assert [r["round"] for r in rounds] == [1, 2]
    assert rounds[0]["metrics"] == {"n_labels": 1}
    assert rounds[1]["metrics"] == {"n_labels": 4, "x": None}
    assert (rounds[1]["env_steps"], rounds[1]["status"]) == (250, "finished")
    with pytest.raises(DataError, match="status"):
        store.rounds.publish(3, env_id="e", env_steps=0, total_steps=0, metrics={}, status="done")
    # roles and tokens
    store.annotators.add(
        Annotator(id="own", source="human", name="Owner", meta={"role": "owner"}), token="tok-1"
    )
    got = store.annotators.by_token("tok-1")
    assert got is not None and got.id == "own" and got.meta["role"] == "owner"
    store.annotators.set_token("own", "tok-2")
    assert store.annotators.by_token("tok-1") is None
    assert store.annotators.by_token("tok-2").id == "own"  # type: ignore[union-attr]
    with pytest.raises(DataError, match="no annotator"):
        store.annotators.set_token("ghost", "t")
    assert store.annotators.get("bob").name == "bob"  # type: ignore[union-attr]
    assert store.annotators.get("ghost") is None
    info = store.segments.info([store.queries.get("q1").a[0]])  # type: ignore[union-attr]
    assert next(iter(info.values())) == {"env_id": "Toy-v0", "length": 5, "round": 0}
    assert store.queries.get("missing") is None


def test_studio_store(store_url, tmp_path) -> None:
    core_scenario(FeedbackStore(store_url, array_dir=tmp_path / "segments"))


def test_a_composed_query_is_stored_with_its_answer_or_not_at_all(store_url, tmp_path) -> None:
    """``Answers.add(..., with_queries=...)``: a group comparison composed in the studio and its
    answer are one transaction; an answer refused leaves no query behind, a resend stores
    nothing twice, and a judgement naming neither a stored nor a composed query is refused."""
    from preflab.records import STUDIO_CREATED

    store = FeedbackStore(store_url, array_dir=tmp_path / "segments")
    try:
        qs = _store_with_queries(store)
        n_queries = len(store.queries.all())
        composed = Query(
            id="q-g-1",
            kind="group",
            a=qs[0].a,
            b=qs[1].a,
            round=2,
            meta={"created_by": STUDIO_CREATED, "annotator_id": "alice"},
        )
        store.answers.add([_j("j-taken", "q1", "bob")])
        with pytest.raises(ConflictError):  # the answer's id is taken by other content
            store.answers.add(
                [_j("j-taken", "q-g-1", "alice")], if_absent=True, with_queries=[composed]
            )
        assert store.queries.get("q-g-1") is None and len(store.queries.all()) == n_queries
        j = _j("j-g-1", "q-g-1", "alice")
        assert store.answers.add([j], if_absent=True, with_queries=[composed]) == 1
        assert store.answers.add([j], if_absent=True, with_queries=[composed]) == 0  # a resend
        assert store.queries.get("q-g-1") == composed and len(store.queries.all()) == n_queries + 1
        assert [x.id for _s, x in store.answers.judgements() if x.query_id == "q-g-1"] == ["j-g-1"]
        with pytest.raises(DataError, match="unknown query"):
            store.answers.add([_j("j-x", "q-nowhere", "alice")], with_queries=[composed])
    finally:
        store.close()


CURSOR_WRITES_FAIL = {
    "sqlite": [
        f"CREATE TRIGGER no_cursor_{op} BEFORE {op} ON cursors "
        "BEGIN SELECT RAISE(ABORT, 'cursor write failed'); END"
        for op in ("INSERT", "UPDATE")
    ],
    "postgresql": [
        "CREATE FUNCTION no_cursor() RETURNS trigger AS $$ BEGIN "
        "RAISE EXCEPTION 'cursor write failed'; END $$ LANGUAGE plpgsql",
        "CREATE TRIGGER no_cursor BEFORE INSERT OR UPDATE ON cursors "
        "FOR EACH ROW EXECUTE FUNCTION no_cursor()",
    ],
}
"""Triggers that make every write of the cursors table fail, in each dialect."""
CURSOR_WRITES_WORK = {
    "sqlite": ["DROP TRIGGER no_cursor_INSERT", "DROP TRIGGER no_cursor_UPDATE"],
    "postgresql": ["DROP TRIGGER no_cursor ON cursors", "DROP FUNCTION no_cursor()"],
}


def test_closing_undo_is_one_transaction(store_url, tmp_path) -> None:
    """The run-ended mark and the raised collection mark are written together: when the
    database refuses the collection mark, the run-ended mark is not written either, and the
    answer can still be undone (no reader ever sees the run ended while an undo of a stored
    answer would succeed)."""
    from preflab.errors import StoreError
    from preflab.store.answers import RUN_ENDED, UNDO_CLOSED

    store = FeedbackStore(store_url, array_dir=tmp_path / "segments")
    try:
        _store_with_queries(store)
        store.answers.add([_j("j-a1", "q1", "alice"), _j("j-b1", "q2", "bob")])
        dialect = store.db.engine.dialect.name
        with store.db.write() as c:
            for sql in CURSOR_WRITES_FAIL[dialect]:
                c.execute(text(sql))
        with pytest.raises(StoreError):
            store.answers.close_undo()
        with store.db.write() as c:
            for sql in CURSOR_WRITES_WORK[dialect]:
                c.execute(text(sql))
        assert store.settings.get(UNDO_CLOSED) is None
        assert store.rounds.cursor("trainer") == 0
        store.answers.retract("j-a1", "alice")  # the run has not ended: undo still works
        store.answers.close_undo()
        assert store.settings.get(UNDO_CLOSED) is not None
        assert store.rounds.cursor("trainer") == store.answers.max_seq()
        with pytest.raises(ConflictError) as info:
            store.answers.retract("j-b1", "bob")
        assert str(info.value) == RUN_ENDED
    finally:
        store.close()


def test_tokens_stored_hashed_only(tmp_path) -> None:
    store = FeedbackStore(tmp_path / "f.db")
    store.annotators.add(Annotator(id="a", source="human"), token="secret-token-xyz")
    raw = (tmp_path / "f.db").read_bytes()
    assert b"secret-token-xyz" not in raw


def test_reopen_old_store_creates_new_tables(tmp_path) -> None:
    path = tmp_path / "f.db"
    store = FeedbackStore(path)
    store.close()
    eng = create_engine(f"sqlite:///{path}")
    with eng.begin() as c:  # a store written before the studio tables existed
        for t in ("rounds", "cursors", "retractions"):
            c.execute(text(f"DROP TABLE {t}"))
        c.execute(text("DROP INDEX ix_judgements_annotator"))
        c.execute(text("DROP INDEX ix_queries_round_seq"))
    eng.dispose()
    store = FeedbackStore(path)
    store.rounds.set_cursor("trainer", 3)
    assert store.rounds.cursor("trainer") == 3 and store.rounds.all() == []


@pytest.mark.postgres
def test_studio_store_postgres(postgres_url, tmp_path) -> None:
    name = "studio_" + uuid.uuid4().hex[:8]
    admin = create_engine(postgres_url, isolation_level="AUTOCOMMIT")
    with admin.connect() as c:
        c.execute(text(f"CREATE DATABASE {name}"))
    admin.dispose()
    url = postgres_url.rsplit("/", 1)[0] + "/" + name
    store = FeedbackStore(url, array_dir=tmp_path / "arrays")
    try:
        core_scenario(store)
    finally:
        store.close()


def _writer(path: str, who: str, n: int) -> None:
    store = FeedbackStore(path)
    for k in range(n):  # read-then-write transactions racing the other process
        store.answers.add([_j(f"{who}-{k}", "q1", who)], if_absent=True)
        store.rounds.set_cursor(who, k)


def test_two_processes_write_without_lock_errors(tmp_path) -> None:
    """Two writer processes forked from the tests' warm interpreter (tests/warm_python.py), not
    spawned fresh: each still its own process and connection, less the imports."""
    from tests import warm_python

    path = tmp_path / "f.db"
    _store_with_queries(FeedbackStore(path))
    ctx = warm_python._context()
    procs = [ctx.Process(target=_writer, args=(str(path), w, 150)) for w in ("alice", "bob")]
    for p in procs:
        p.start()
    for p in procs:
        p.join(timeout=240)
    assert [p.exitcode for p in procs] == [0, 0]
    store = FeedbackStore(path)
    assert store.answers.count() == 300
    assert store.rounds.cursor("alice") == 149 and store.rounds.cursor("bob") == 149


@pytest.mark.postgres
def test_an_undo_waits_for_the_trainers_uncommitted_mark_on_postgres(
    postgres_url, tmp_path
) -> None:
    """PostgreSQL reads what is committed: an undo that read the trainer's cursor while the
    trainer's mark was uncommitted would succeed on an answer the trainer has just taken. The
    undo waits for the mark (an advisory lock both take) and is then refused."""
    import threading

    from preflab.store.rounds import TRAINER, put_cursor
    from tests.store.conftest import drop_pg_database, fresh_pg_database

    url, name = fresh_pg_database(postgres_url)
    store = FeedbackStore(url, array_dir=tmp_path / "segments")
    try:
        _store_with_queries(store)
        store.answers.add([_j("j-a1", "q1", "alice")])
        seq, _ = store.answers.get("j-a1")  # type: ignore[misc]
        got: list[BaseException | None] = []

        def undo() -> None:
            try:
                store.answers.retract("j-a1", "alice")
                got.append(None)
            except ConflictError as exc:
                got.append(exc)

        person = threading.Thread(target=undo)
        with store.db.write() as c:  # the trainer marks the answer collected, not committed yet
            put_cursor(c, TRAINER, seq)
            person.start()
            waiting = "SELECT count(*) FROM pg_locks WHERE locktype = 'advisory' AND NOT granted"
            for _ in range(600):  # up to a minute for the undo to reach the lock (a limit)
                with store.db.read() as r:
                    if r.execute(text(waiting)).scalar_one():
                        break
                person.join(0.1)
            assert not got, "the undo went ahead without waiting for the trainer's mark"
        person.join(60)
        assert len(got) == 1 and isinstance(got[0], ConflictError)
        assert "already collected" in str(got[0])
        assert store.answers.retracted_ids() == set()
    finally:
        store.close()
        drop_pg_database(postgres_url, name)


def test_a_quota_caps_the_answers_that_count(store_url, tmp_path) -> None:
    """A capped annotator's answers that count (undone ones left out) never pass the quota; a
    repeated submission already stored passes, another annotator is not capped."""
    from preflab.errors import QuotaReachedError
    from preflab.store.answers import Quota

    store = FeedbackStore(store_url, array_dir=tmp_path / "segments")
    _store_with_queries(store)
    cap = Quota("alice", 2)
    assert store.answers.add([_j("j-1", "q1", "alice")], quota=cap) == 1
    assert store.answers.add([_j("j-2", "q2", "alice")], if_absent=True, quota=cap) == 1
    with pytest.raises(QuotaReachedError, match="2 answers that count, and the quota is 2"):
        store.answers.add([_j("j-3", "q3", "alice")], quota=cap)
    assert store.answers.get("j-3") is None
    assert store.answers.add([_j("j-2", "q2", "alice")], if_absent=True, quota=cap) == 0
    assert store.answers.add([_j("j-b", "q3", "bob")], quota=cap) == 1  # bob is not capped
    store.answers.retract("j-2", "alice")  # an undone answer frees its place
    assert store.answers.add([_j("j-3", "q3", "alice")], quota=cap) == 1
    with pytest.raises(QuotaReachedError):  # two at once past the quota: neither is stored
        store.answers.add(
            [_j("j-4", "q1", "alice"), _j("j-5", "q2", "alice")], quota=Quota("alice", 3)
        )
    assert store.answers.get("j-4") is None


@pytest.mark.postgres
def test_two_answers_at_once_cannot_both_pass_a_quota_on_postgres(postgres_url, tmp_path) -> None:
    """PostgreSQL reads what is committed: an answer that counted the quota while another
    answer of the same person was uncommitted (a second tab) would pass it too. The second waits
    for the first (an advisory lock keyed by the person) and is then refused."""
    import threading

    from preflab.errors import QuotaReachedError
    from preflab.store.answers import Quota, lock_answers_of
    from preflab.store.schema import judgements
    from tests.store.conftest import drop_pg_database, fresh_pg_database

    url, name = fresh_pg_database(postgres_url)
    store = FeedbackStore(url, array_dir=tmp_path / "segments")
    try:
        _store_with_queries(store)
        store.answers.add([_j("j-1", "q1", "alice")])
        got: list[BaseException | None] = []

        def second_tab() -> None:
            try:
                store.answers.add([_j("j-3", "q3", "alice")], quota=Quota("alice", 2))
                got.append(None)
            except QuotaReachedError as exc:
                got.append(exc)

        person = threading.Thread(target=second_tab)
        with store.db.write() as c:  # the first tab's answer: stored, not committed yet
            lock_answers_of(c, "alice")
            row = _j("j-2", "q2", "alice").to_row() | {"meta": {}}
            c.execute(judgements.insert(), [row])
            person.start()
            waiting = "SELECT count(*) FROM pg_locks WHERE locktype = 'advisory' AND NOT granted"
            for _ in range(600):  # up to a minute for the second to reach the lock (a limit)
                with store.db.read() as r:
                    if r.execute(text(waiting)).scalar_one():
                        break
                person.join(0.1)
            assert not got, "the second answer went ahead without waiting for the first"
        person.join(60)
        assert len(got) == 1 and isinstance(got[0], QuotaReachedError)
        assert store.answers.get("j-3") is None and store.answers.get("j-2") is not None
    finally:
        store.close()
        drop_pg_database(postgres_url, name)


def test_the_trainers_gaps_stay_undoable_until_the_run_ends(store_url, tmp_path) -> None:
    """A seq the trainer's mark names as a gap (not collected yet) stays undoable below the
    mark; the end of the run closes it with the rest."""
    from preflab.store.answers import RUN_ENDED

    store = FeedbackStore(store_url, array_dir=tmp_path / "segments")
    _store_with_queries(store)
    store.answers.add([_j("j-1", "q1", "alice"), _j("j-2", "q2", "alice")])
    s1, s2 = store.answers.get("j-1")[0], store.answers.get("j-2")[0]  # type: ignore[index]
    store.answers.add([_j("j-3", "q3", "alice")])
    s3 = store.answers.get("j-3")[0]  # type: ignore[index]
    store.answers.mark_collected(s3, gaps=[s1, s3 + 5])  # a gap above the mark means nothing
    assert dict((j.id, u) for j, u in store.answers.recent("alice")) == {
        "j-1": True,
        "j-2": False,
        "j-3": False,
    }
    with pytest.raises(ConflictError, match="already collected"):
        store.answers.retract("j-2", "alice")
    store.answers.close_undo()
    with pytest.raises(ConflictError, match=RUN_ENDED[:20]):
        store.answers.retract("j-1", "alice")
    assert s1 < s2 < s3
    with pytest.raises(DataError, match="only the trainer's cursor keeps gaps"):
        store.rounds.set_cursor("reader", 3, gaps=[1])
