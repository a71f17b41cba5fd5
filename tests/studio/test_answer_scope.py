"""What a person may answer and see through the studio API: a study participant only the pairs
the study showed them, each once (undo to change it); an annotator each query once unless the
queue asks it again (a consistency check) or the trainer collected the earlier answer; a resent
answer that was undone is refused, not reported saved; odd ids in a path are a 422 on every
store (a NUL byte once made PostgreSQL fail with a 500)."""

from __future__ import annotations

from collections.abc import Iterator

import httpx
import pytest

from preflab.studio.config import StudioConfig
from tests.store.conftest import drop_pg_database, fresh_pg_database
from tests.studio.api_server import Studio, counts, start_studio
from tests.studio.test_study import browser, join, make_study


@pytest.fixture
def studio(tmp_path) -> Iterator[Studio]:
    s = start_studio(tmp_path, media=False, config=StudioConfig(min_answer_s=0.0))
    yield s
    s.stop()


def body(qid: str, key: str, p: float | None = 1.0) -> dict:
    return {"query_id": qid, "p": p, "client_key": key, "response_time_s": 2.0}


def participant(studio: Studio, secret: str, pid: str) -> httpx.Client:
    c = browser(studio)
    join(c, secret, pid=pid)
    assert c.post("/study/consent", data={"decision": "accept"}).status_code == 303
    return c


def counted(studio: Studio, who: httpx.Client) -> int:
    """How many answers of the person signed in on ``who`` count."""
    me = who.get("/api/me").json()["id"]
    return studio.store.answers.counts_of(me, round=None)[1]


def test_a_participant_answers_only_the_pairs_the_study_showed_them(studio: Studio) -> None:
    secret = make_study(studio, overlap=1, gold_rate=0.0, quota_answers=3)
    first = participant(studio, secret, "pid-first")
    second = participant(studio, secret, "pid-second")
    # a pair never served to them, answered again and again with new keys: never counts
    for i in range(3):
        r = first.post("/api/judgements", json=body("q1", f"key-same-pair-{i:03d}"))
        assert r.status_code == 403, r.text
        assert "was not given to you" in r.json()["detail"]
    # skipping it (twice) does not put it on their screen either
    for _ in range(2):
        assert first.post("/api/queries/q1/skip").status_code == 200
    skipped = first.post("/api/judgements", json=body("q1", "key-after-skips"))
    assert skipped.status_code == 403, skipped.text
    assert studio.store.answers.count() == 0
    assert first.get("/api/study/me").json()["done"] is False
    assert "C0DE42" not in first.get("/study/done").text
    # the pair the study gives the first person (overlap 1) is not the second person's
    q = first.get("/api/queries/next", params={"kind": "pair"}).json()["query"]["id"]
    assert first.get(f"/api/queries/{q}").status_code == 200
    hidden = second.get(f"/api/queries/{q}")
    assert hidden.status_code == 404 and "this study showed you" in hidden.json()["detail"]
    theirs = second.post("/api/judgements", json=body(q, "key-not-theirs-1"))
    assert theirs.status_code == 403 and "was not given to you" in theirs.json()["detail"]
    # nor is any other query, a rating stream included
    assert first.get("/api/queries/r1").status_code == 404
    assert first.get("/api/queries/q2").status_code == 404
    assert studio.store.answers.count() == 0


def test_a_participant_answers_a_pair_once_and_changes_it_by_undo(studio: Studio) -> None:
    secret = make_study(studio, overlap=2, gold_rate=0.0, quota_answers=3)
    c = participant(studio, secret, "pid-once")
    q = c.get("/api/queries/next", params={"kind": "pair"}).json()["query"]["id"]
    r = c.post("/api/judgements", json=body(q, "key-once-0001"))
    assert r.status_code == 201 and r.json()["duplicate"] is False
    again = c.post("/api/judgements", json=body(q, "key-once-0002", p=0.0))
    assert again.status_code == 409
    assert again.json()["detail"] == (
        "you already answered this pair; undo it first to change your answer"
    )
    resent = c.post("/api/judgements", json=body(q, "key-once-0001"))
    assert resent.status_code == 201 and resent.json()["duplicate"] is True
    assert counted(studio, c) == 1
    # undo, the page shows the pair again, a new answer counts in its place
    assert c.delete(f"/api/judgements/{r.json()['judgement_id']}").status_code == 200
    assert c.get(f"/api/queries/{q}").json()["query"]["id"] == q
    new = c.post("/api/judgements", json=body(q, "key-once-0003", p=0.0))
    assert new.status_code == 201 and new.json()["duplicate"] is False
    assert counted(studio, c) == 1


def test_an_annotator_answers_a_query_once_unless_undone_or_collected(studio: Studio) -> None:
    alice = studio.client("alice")
    first = alice.post("/api/judgements", json=body("q3", "key-alice-0001"))
    assert first.status_code == 201
    second = alice.post("/api/judgements", json=body("q3", "key-alice-0002", p=0.0))
    assert second.status_code == 409
    assert "undo it first to change your answer" in second.json()["detail"]
    assert len(studio.store.answers.on_query("alice", "q3")) == 1
    # undo, then answer again: the new answer counts instead
    assert alice.delete(f"/api/judgements/{first.json()['judgement_id']}").status_code == 200
    third = alice.post("/api/judgements", json=body("q3", "key-alice-0003", p=0.0))
    assert third.status_code == 201
    # once the trainer has collected it, undo is refused and says to answer again: allowed
    seq = studio.store.answers.get(third.json()["judgement_id"])[0]  # type: ignore[index]
    studio.store.rounds.set_cursor("trainer", seq)
    refused = alice.delete(f"/api/judgements/{third.json()['judgement_id']}")
    assert refused.status_code == 409 and "answer the query again" in refused.json()["detail"]
    assert alice.post("/api/judgements", json=body("q3", "key-alice-0004")).status_code == 201
    assert len(studio.store.answers.on_query("alice", "q3")) == 2
    # and that new answer, still undoable, is the one to undo before a third
    fifth = alice.post("/api/judgements", json=body("q3", "key-alice-0005", p=0.0))
    assert fifth.status_code == 409
    # another person's answer is theirs: bob answers q3 too
    assert studio.client("bob").post("/api/judgements", json=body("q3", "key-bob-01")).is_success


def test_an_undone_answer_sent_again_is_refused_not_reported_saved(studio: Studio) -> None:
    alice = studio.client("alice")
    r = alice.post("/api/judgements", json=body("q1", "key-undone-0001"))
    assert r.status_code == 201
    jid = r.json()["judgement_id"]
    assert alice.delete(f"/api/judgements/{jid}").status_code == 200
    before = counts(studio.store)
    resent = alice.post("/api/judgements", json=body("q1", "key-undone-0001"))
    assert resent.status_code == 409, resent.text
    assert "was undone" in resent.json()["detail"]
    assert "new client_key" in resent.json()["detail"]
    assert counts(studio.store) == before
    assert alice.get("/api/judgements/mine").json()["judgements"] == []
    # sent as a new answer, it counts
    new = alice.post("/api/judgements", json=body("q1", "key-undone-0002"))
    assert new.status_code == 201 and new.json()["duplicate"] is False
    assert [m["query_id"] for m in alice.get("/api/judgements/mine").json()["judgements"]] == ["q1"]


@pytest.fixture(params=["sqlite", pytest.param("postgres", marks=pytest.mark.postgres)])
def any_store(request: pytest.FixtureRequest, tmp_path) -> Iterator[Studio]:
    """A studio on SQLite and on PostgreSQL (a fresh database)."""
    if request.param == "sqlite":
        s = start_studio(tmp_path, media=False)
        yield s
        s.stop()
        return
    base = request.getfixturevalue("postgres_url")
    url, name = fresh_pg_database(base)
    s = start_studio(tmp_path, media=False, store_url=url)
    try:
        yield s
    finally:
        s.stop()
        drop_pg_database(base, name)


@pytest.mark.parametrize(
    ("method", "path", "name"),
    [
        ("GET", "/api/queries/%00", "query_id"),
        ("POST", "/api/queries/%00/skip", "query_id"),
        ("DELETE", "/api/judgements/%00", "jid"),
        ("GET", "/api/queries/a%00b", "query_id"),
        ("DELETE", "/api/judgements/j-%00", "jid"),
    ],
)
def test_an_odd_id_in_a_path_is_a_422_on_every_store(
    any_store: Studio, method: str, path: str, name: str
) -> None:
    alice = any_store.client("alice")
    before = counts(any_store.store)
    r = alice.request(method, path)
    assert r.status_code == 422, r.text
    assert name in r.json()["detail"]
    assert counts(any_store.store) == before
    assert alice.get("/api/queries/q1").status_code == 200  # the studio carries on
