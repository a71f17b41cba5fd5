"""A study participant's answers through a real studio server, on SQLite and PostgreSQL: no
undo once the completion code was shown (and none slipping in between the done page's count
and its stamp), one answer per pair across query ids (a pair the trainer asks again under a
new id), no answer to a pair the trainer took back, and the time quota checked where the
answer is stored."""

from __future__ import annotations

from collections.abc import Callable, Iterator
from typing import Any

import httpx
import numpy as np
import pytest
from sqlalchemy import update

from preflab.records import Judgement, Query
from preflab.store import schema as SC
from preflab.studio import study as S
from preflab.studio.config import StudioConfig
from preflab.studio.study_config import StudyConfig
from preflab.testing.factories import make_segments
from tests.store.conftest import drop_pg_database, fresh_pg_database
from tests.studio.api_server import Studio, start_studio


@pytest.fixture(params=["sqlite", pytest.param("postgres", marks=pytest.mark.postgres)])
def studio(request: pytest.FixtureRequest, tmp_path) -> Iterator[Studio]:
    """A studio on SQLite and on PostgreSQL (a fresh database)."""
    config = StudioConfig(min_answer_s=0.0)
    if request.param == "sqlite":
        s = start_studio(tmp_path, media=False, config=config)
        yield s
        s.stop()
        return
    base = request.getfixturevalue("postgres_url")
    url, name = fresh_pg_database(base)
    s = start_studio(tmp_path, media=False, config=config, store_url=url)
    try:
        yield s
    finally:
        s.stop()
        drop_pg_database(base, name)


def only_pairs(studio: Studio, n: int) -> list[Query]:
    """Withdraw the seeded queries and ask ``n`` fresh pairs (round 3) instead."""
    store = studio.store
    store.queries.withdraw([q.id for q in store.queries.all()])
    segs = make_segments(2 * n, rng=np.random.default_rng(3), obs_dim=3, env_id="Toy-v0")
    store.segments.add(segs)
    qs = [
        Query(id=f"p{i:03d}", kind="pair", a=(segs[2 * i].id,), b=(segs[2 * i + 1].id,), round=3)
        for i in range(n)
    ]
    store.queries.add(qs)
    return qs


def make_study(studio: Studio, **kw: Any) -> str:
    base = {"practice_pairs": 0, "quota_answers": 0, "gold_rate": 0.0, "completion_code": "C0DE42"}
    return S.create(studio.store, StudyConfig(**{**base, **kw}))


def participant(studio: Studio, secret: str, pid: str) -> httpx.Client:
    """A browser that joined by the study link and accepted the consent."""
    c = studio.client(follow_redirects=False)
    assert c.get(f"/s/{secret}", params={"pid": pid}).status_code == 303
    assert c.post("/study/consent", data={"decision": "accept"}).status_code == 303
    return c


def tab(studio: Studio, of: httpx.Client) -> httpx.Client:
    """Another tab of the same browser (the same cookie)."""
    c = studio.client(follow_redirects=False)
    c.cookies.update(of.cookies)
    return c


def serve(c: httpx.Client) -> str:
    """The participant's next pair (now on their screen), skipped so the next call serves
    another one; its id."""
    q = c.get("/api/queries/next", params={"kind": "pair"}).json()["query"]
    assert q is not None
    c.post(f"/api/queries/{q['id']}/skip")
    return str(q["id"])


def answer(c: httpx.Client, qid: str, key: str, p: float = 1.0) -> httpx.Response:
    return c.post(
        "/api/judgements",
        json={"query_id": qid, "p": p, "client_key": key, "response_time_s": 2.0},
    )


def me(c: httpx.Client) -> str:
    return str(c.get("/api/me").json()["id"])


def before_each_store_write(
    monkeypatch: pytest.MonkeyPatch, studio: Studio, first: Callable[[], None]
) -> None:
    """Run ``first`` once, just before the studio's next answer is stored (after its route has
    checked everything it checks before the write): another tab's answer landing in between,
    deterministically."""
    real = studio.store.answers.add
    pending = [first]

    def add(*args: Any, **kw: Any) -> int:
        if pending:
            pending.pop()()
        return real(*args, **kw)

    monkeypatch.setattr(studio.store.answers, "add", add)


# ----- F4: no undo once the completion code was shown ----------------------------------------
def test_undo_after_the_completion_code_is_refused_and_the_answers_stand(studio: Studio) -> None:
    only_pairs(studio, 4)
    a = participant(studio, make_study(studio, quota_answers=2), "pid-undo")
    for k in range(2):
        q = a.get("/api/queries/next", params={"kind": "pair"}).json()["query"]["id"]
        assert answer(a, q, f"undo-key-{k:04d}").status_code == 201
    mine = a.get("/api/judgements/mine").json()["judgements"]
    assert len(mine) == 2 and all(m["undoable"] for m in mine)
    page = a.get("/study/done")
    assert page.status_code == 200 and "C0DE42" in page.text
    for m in mine:
        r = a.delete(f"/api/judgements/{m['id']}")
        assert r.status_code == 409, r.text
        assert r.json()["detail"].startswith("your completion code was shown; your answers stand")
    # the history list no longer offers undo, and the payments table holds both answers
    assert [m["undoable"] for m in a.get("/api/judgements/mine").json()["judgements"]] == [
        False,
        False,
    ]
    row = studio.client("owner").get("/api/owner/study/payments").json()["rows"][0]
    assert row["answers_counted"] == 2 and row["completed"] is True
    assert row["completion_code_shown"] == "C0DE42"


def test_an_undo_between_the_done_pages_count_and_its_stamp_withholds_the_code(
    studio: Studio, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The done page counts the answers, then an undo commits, then the page stamps the
    completion: the stamp counts again (under the undo's lock) and shows no code."""
    only_pairs(studio, 4)
    a = participant(studio, make_study(studio, quota_answers=2), "pid-race")
    jids = []
    for k in range(2):
        q = a.get("/api/queries/next", params={"kind": "pair"}).json()["query"]["id"]
        r = answer(a, q, f"race-key-{k:04d}")
        assert r.status_code == 201
        jids.append(r.json()["judgement_id"])
    aid = me(a)
    real = S.progress
    armed = [True]

    def progress(*args: Any, **kw: Any) -> S.Progress:
        out = real(*args, **kw)
        if armed and out.done:  # the done page counted 2: an undo commits right after
            armed.pop()
            studio.store.answers.retract(jids[-1], aid)
        return out

    monkeypatch.setattr(S, "progress", progress)
    page = a.get("/study/done")
    monkeypatch.setattr(S, "progress", real)
    assert not armed  # the undo did come in between
    assert page.status_code == 200 and "C0DE42" not in page.text, page.text
    p = studio.store.studies.participant(aid)
    assert p is not None and p.completed_at is None
    row = studio.client("owner").get("/api/owner/study/payments").json()["rows"][0]
    assert row["answers_counted"] == 1 and row["completed"] is False


# ----- F5: one answer per pair across query ids; none to a pair taken back ----------------------
def test_a_pair_taken_back_and_asked_again_is_answered_once(studio: Studio) -> None:
    (q1,) = only_pairs(studio, 1)
    a1 = participant(studio, make_study(studio, overlap=2), "pid-withdrawn")
    a2 = tab(studio, a1)
    assert a1.get("/api/queries/next", params={"kind": "pair"}).json()["query"]["id"] == q1.id
    # a new round: the trainer takes q1 back and asks the same pair again under a new id
    q2 = Query(id="q-round4-same-pair", kind="pair", a=q1.b, b=q1.a, round=4)
    studio.store.queries.add([q2], withdrawn=[q1.id])
    assert a2.get("/api/queries/next", params={"kind": "pair"}).json()["query"]["id"] == q2.id
    late = answer(a1, q1.id, "tab1-answer-01", 1.0)
    assert late.status_code == 409, late.text
    assert late.json()["detail"].startswith(
        "this pair was taken back by the trainer; take the next one"
    )
    assert answer(a2, q2.id, "tab2-answer-01", 0.0).status_code == 201
    assert [j.query_id for _s, j in studio.store.answers.judgements()] == [q2.id]


def test_an_ordinary_annotators_answer_to_a_withdrawn_query_still_counts(studio: Studio) -> None:
    alice = studio.client("alice")
    studio.store.queries.withdraw(["q1"])
    assert answer(alice, "q1", "alice-late-0001").status_code == 201
    assert [j.query_id for _s, j in studio.store.answers.judgements()] == ["q1"]


def test_a_participant_answers_a_pair_once_across_query_ids(studio: Studio) -> None:
    """The same pair open under two ids (asked again in a new round, the old one not taken
    back), both on the participant's screens: the second answer is refused."""
    (q1,) = only_pairs(studio, 1)
    a1 = participant(studio, make_study(studio, overlap=2), "pid-twice")
    a2 = tab(studio, a1)
    assert a1.get("/api/queries/next", params={"kind": "pair"}).json()["query"]["id"] == q1.id
    q2 = Query(id="q-round4-same-pair", kind="pair", a=q1.b, b=q1.a, round=4)
    studio.store.queries.add([q2])
    assert a2.get("/api/queries/next", params={"kind": "pair"}).json()["query"]["id"] == q2.id
    assert answer(a1, q1.id, "tab1-answer-01", 1.0).status_code == 201
    second = answer(a2, q2.id, "tab2-answer-01", 0.0)
    assert second.status_code == 409, second.text
    assert "already answered this pair" in second.json()["detail"]
    assert [j.query_id for _s, j in studio.store.answers.judgements()] == [q1.id]


def test_two_tabs_answering_one_pair_under_two_ids_at_once_store_one(
    studio: Studio, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The other tab's answer to the pair lands after this answer's route checked (nothing
    yet) and before it is stored: the store's own check, by pair, refuses it."""
    (q1,) = only_pairs(studio, 1)
    a1 = participant(studio, make_study(studio, overlap=2), "pid-race-pair")
    a2 = tab(studio, a1)
    assert a1.get("/api/queries/next", params={"kind": "pair"}).json()["query"]["id"] == q1.id
    q2 = Query(id="q-round4-same-pair", kind="pair", a=q1.a, b=q1.b, round=4)
    studio.store.queries.add([q2])
    assert a2.get("/api/queries/next", params={"kind": "pair"}).json()["query"]["id"] == q2.id
    aid = me(a1)
    other = Judgement(id="j-other-tab", query_id=q1.id, annotator_id=aid, source="human", p=1.0)
    before_each_store_write(monkeypatch, studio, lambda: studio.store.answers.add([other]))
    r = answer(a2, q2.id, "tab2-answer-01", 0.0)
    assert r.status_code == 409, r.text
    assert "already answered the pair" in r.json()["detail"]
    assert [j.id for _s, j in studio.store.answers.judgements()] == ["j-other-tab"]


# ----- F7: the time quota is checked where the answer is stored ---------------------------------
def test_the_time_quota_is_checked_where_the_answer_is_stored(
    studio: Studio, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Two tabs answer after the time ran out, both past the route's checks: the first stored
    reaches the time quota (it ends their time on task), the second is refused with the
    quota's 403 and nothing more is stored."""
    only_pairs(studio, 4)
    a1 = participant(studio, make_study(studio, quota_minutes=30.0), "pid-time")
    a2 = tab(studio, a1)
    q_first, q_second = serve(a1), serve(a1)
    aid = me(a1)
    p = SC.participants
    with studio.store.engine.begin() as c:  # they started an hour ago: the time is up
        c.execute(
            update(p)
            .where(p.c.annotator_id == aid)
            .values(
                consent_at=p.c.consent_at - 3600.0,
                practice_done_at=p.c.practice_done_at - 3600.0,
            )
        )
    first = Judgement(id="j-first-tab", query_id=q_first, annotator_id=aid, source="human", p=1.0)
    before_each_store_write(monkeypatch, studio, lambda: studio.store.answers.add([first]))
    r = answer(a2, q_second, "time-race-0001")
    assert r.status_code == 403, r.text
    assert "quota" in r.json()["detail"]
    assert [j.id for _s, j in studio.store.answers.judgements()] == ["j-first-tab"]
    status = a1.get("/api/study/me").json()
    assert status["done"] is True
    page = a1.get("/study/done")
    assert page.status_code == 200 and "C0DE42" in page.text
