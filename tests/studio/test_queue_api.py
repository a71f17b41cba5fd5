"""The question queue through the studio API (issue #25): no pair asked twice to a person,
skip to the end, prefetch of the next queries, no answer sooner than the minimum after serving,
consistency checks for the owner."""

from __future__ import annotations

import time
from collections.abc import Iterator

import pytest

from preflab.errors import ConfigError
from preflab.records import Query
from preflab.studio.config import StudioConfig
from tests.store.reads import count_query_reads
from tests.studio.api_server import Studio, start_studio


@pytest.fixture
def strict(tmp_path) -> Iterator[Studio]:
    s = start_studio(tmp_path, config=StudioConfig(min_answer_s=30.0))
    yield s
    s.stop()


@pytest.fixture
def quick(tmp_path) -> Iterator[Studio]:
    s = start_studio(tmp_path, config=StudioConfig(min_answer_s=0.05, repeat_share=1.0))
    yield s
    s.stop()


def body(qid: str, p: float | None, key: str) -> dict:
    return {"query_id": qid, "p": p, "client_key": key, "response_time_s": 1.0}


def test_an_answer_sooner_than_the_minimum_after_serving_is_refused(strict: Studio) -> None:
    alice = strict.client("alice")
    q = alice.get("/api/queries/next", params={"kind": "pair"}).json()["query"]
    assert q["id"] == "q3"
    r = alice.post("/api/judgements", json=body("q3", 1.0, "key-too-early-1"))
    assert r.status_code == 409
    assert "watch both clips first" in r.json()["detail"]
    # the page sends it again after Retry-After: whole seconds until the 30 s minimum is over
    assert 29 <= int(r.headers["Retry-After"]) <= 30
    assert strict.store.answers.by_annotator("alice") == []
    # a double key press (a second answer straight away) is refused the same way
    r2 = alice.post("/api/judgements", json=body("q3", 0.0, "key-too-early-2"))
    assert r2.status_code == 409
    # the minimum is per person: bob was never shown q3 by this studio
    assert strict.client("bob").get("/api/queries/next").json()["query"]["id"] == "q3"
    assert (
        strict.client("bob").post("/api/judgements", json=body("q3", 1, "key-bob-001")).status_code
        == 409
    )


def test_an_answer_after_the_minimum_is_stored_and_its_resend_passes(quick: Studio) -> None:
    alice = quick.client("alice")
    assert alice.get("/api/queries/next", params={"kind": "pair"}).json()["query"]["id"] == "q3"
    time.sleep(0.1)  # longer than this studio's min_answer_s
    r = alice.post("/api/judgements", json=body("q3", 1.0, "key-after-min-1"))
    assert r.status_code == 201
    stored = quick.store.answers.get(r.json()["judgement_id"])
    assert stored is not None  # stamped with this studio's undo window, which the trainer honours
    assert stored[1].meta["undo_s"] == StudioConfig().undo_grace_s
    alice.get("/api/queries/next", params={"kind": "pair"})  # serves the next one meanwhile
    again = alice.post("/api/judgements", json=body("q3", 1.0, "key-after-min-1"))
    assert again.status_code == 201 and again.json()["duplicate"] is True


def test_a_pair_asked_again_in_a_later_round_is_not_shown_to_who_answered_it(
    quick: Studio,
) -> None:
    store = quick.store
    q3 = store.queries.get("q3")
    assert q3 is not None
    alice = quick.client("alice")
    assert alice.get("/api/queries/next", params={"kind": "pair"}).json()["query"]["id"] == "q3"
    time.sleep(0.1)
    assert alice.post("/api/judgements", json=body("q3", 0.0, "key-q3-alice")).status_code == 201
    # round 3 asks q3's pair again, the other way round, and a new pair
    store.queries.add(
        [
            Query(id="q3again", kind="pair", a=q3.b, b=q3.a, round=3),
            Query(id="q4", kind="pair", a=q3.a, b=store.queries.get("q1").a, round=3),  # type: ignore[union-attr]
        ]
    )
    seen: list[str] = []
    for _ in range(20):
        q = alice.get("/api/queries/next", params={"kind": "pair"}).json()["query"]
        if q is None:
            break
        seen.append(q["id"])
        time.sleep(0.1)
        key = f"key-{q['id']}-{len(seen)}"
        assert alice.post("/api/judgements", json=body(q["id"], 1.0, key)).status_code == 201
    # every pair once; then the consistency check (repeat_share = 1) re-asks answered pairs,
    # once each, in the order of the queue
    assert seen[:3] == ["q4", "q1", "q2"]
    assert "q3again" not in seen
    assert sorted(seen[3:]) == sorted(["q3", "q4", "q1", "q2"])
    assert quick.client("bob").get("/api/queries/next").json()["query"]["id"] == "q3again"
    owner = quick.client("owner").get("/api/owner/consistency").json()
    assert owner["repeat_share"] == 1.0
    row = next(r for r in owner["annotators"] if r["id"] == "alice")
    # q3 was answered 0 then 1 (disagrees); the others 1 and 1 (agree)
    assert (row["repeats"], row["agreed"]) == (4, 3) and row["agreement"] == 0.75
    assert quick.client("alice").get("/api/owner/consistency").status_code == 403


def test_skip_moves_the_pair_to_the_end_and_ahead_prefetches_the_next(strict: Studio) -> None:
    alice = strict.client("alice")
    nxt = lambda: alice.get("/api/queries/next", params={"kind": "pair"}).json()["query"]["id"]  # noqa: E731
    assert nxt() == "q3"
    ahead = alice.get("/api/queries/ahead", params={"kind": "pair", "k": 3, "exclude": "q3"})
    assert ahead.status_code == 200
    data = ahead.json()
    assert [q["id"] for q in data["queries"]] == ["q1", "q2"]
    assert data["rules"] == {"min_plays": 1, "min_answer_s": 30.0, "undo_grace_s": 10.0}
    assert all(c["status"] == "ready" for q in data["queries"] for c in q["a"] + q["b"])
    # prefetched clips were asked for at once, the next one at the priority of the one shown
    assert strict.media is not None
    pri = {ids[0]: p for ids, p in strict.media.requests}
    q1 = strict.store.queries.get("q1")
    assert q1 is not None and pri[q1.a[0]] == 0
    assert strict.store.people.state("alice", "q1") is None  # not served by prefetching
    # skip q1 (round 1): it goes after q2, not before round 2's q3
    assert alice.post("/api/queries/q1/skip").json() == {"skipped": True}
    assert [q.id for q in strict.store.people.queue("alice", kind="pair")] == ["q3", "q2", "q1"]
    assert alice.post("/api/queries/q3/skip").status_code == 200
    assert nxt() == "q3"  # the only one of round 2: still first
    assert alice.post("/api/queries/nope/skip").status_code == 404
    bad = alice.get("/api/queries/ahead", params={"k": 0})
    assert bad.status_code == 422


def test_config_rejects_out_of_range_values() -> None:
    with pytest.raises(ConfigError, match="repeat_share"):
        StudioConfig(repeat_share=2.0)
    with pytest.raises(ConfigError, match="min_answer_s"):
        StudioConfig(min_answer_s=-1.0)


def test_a_rendered_pair_goes_before_one_whose_clips_are_still_rendering(quick: Studio) -> None:
    """A new round's first pair still rendering (a spinner) waits behind rendered pairs of the
    queue; once its clips are ready it is asked first again (the queue's own order)."""
    assert quick.media is not None
    q3 = quick.store.queries.get("q3")  # the newest round's pair: first in everyone's queue
    assert q3 is not None
    for sid in (*q3.a, *q3.b):  # still rendering
        quick.media.pending.add(sid)
        for f in quick.media.cache_dir.glob("*.mp4"):
            f.unlink()
    alice = quick.client("alice")
    first = alice.get("/api/queries/next", params={"kind": "pair"}).json()["query"]
    assert first["id"] == "q1" and all(c["status"] == "ready" for c in first["a"] + first["b"])
    ahead = alice.get("/api/queries/ahead", params={"kind": "pair", "k": 3, "exclude": "q1"})
    assert [q["id"] for q in ahead.json()["queries"]] == ["q2", "q3"]
    quick.media.pending.clear()  # rendered now: the queue's order again
    bob = quick.client("bob")
    assert bob.get("/api/queries/next", params={"kind": "pair"}).json()["query"]["id"] == "q3"


def test_the_next_pairs_and_the_status_read_a_few_queries_of_a_long_run(
    quick: Studio, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Every open page polls GET /api/queries/next, /ahead and /api/status: each used to read
    every open query of the run (and every pair the person answered) to pick a few or count
    them (460 ms a request at 20k queries). They read the few they show, and the status counts
    in the store, whatever the run's length."""
    store = quick.store
    old = [  # an older round of 1,500 pairs, half of them asked twice (once the other way)
        Query(id=f"old{k}", kind="pair", a=(f"x{k % 750}",), b=(f"y{k % 750}",), round=0)
        if k < 750
        else Query(id=f"old{k}", kind="pair", a=(f"y{k % 750}",), b=(f"x{k % 750}",), round=0)
        for k in range(1500)
    ]
    store.queries.add(old)
    read = count_query_reads(monkeypatch)
    alice = quick.client("alice")
    assert alice.get("/api/queries/next").json()["query"]["id"] == "q3"
    window = StudioConfig().ready_window  # the first few: the rendered ones among them first
    assert read == ["q3", "g1", "r1", "q1", "q2", "old0", "old1", "old2"][:window]
    read.clear()
    ahead = alice.get("/api/queries/ahead", params={"k": 3, "exclude": "q3"}).json()["queries"]
    assert [q["id"] for q in ahead] == ["q1", "q2", "old0"]  # pairs, by default
    assert len(read) == window
    read.clear()
    status = alice.get("/api/status").json()
    assert read == ["r1"]  # the streams to rate (at most 10), nothing of the queue
    # the counts of the whole queue, read here once
    whole = store.people.queue("alice", repeat_share=1.0)
    assert status["waiting"] == len(whole) == 5 + 750
    assert status["views"] == {"compare": 3 + 750, "groups": 1, "rate": 1}
