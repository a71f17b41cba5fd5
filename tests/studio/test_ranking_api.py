"""Ranking queries through the studio API (issue 57): a person answers a ranking of k clips with
ranks; the queue rules hold as for pairs (no answer sooner than the minimum after serving, undo
until the trainer collects, skip to the end, no set of clips asked twice).

Expected p values are worked out by hand from the ranks (the share of the query's pairs i < j
that the ranking puts i above j, a tie counting ½), not taken from the code under test.
"""

from __future__ import annotations

import time
from collections.abc import Iterator

import pytest

from preflab.cli.train import main as train_main
from preflab.config import TrainConfig
from preflab.errors import ConfigError
from preflab.kinds import kind_of
from preflab.records import Query
from preflab.studio.config import StudioConfig
from tests.studio.api_server import Studio, counts, start_studio


@pytest.fixture
def quick(tmp_path) -> Iterator[Studio]:
    s = start_studio(tmp_path, config=StudioConfig(min_answer_s=0.05))
    add_rankings(s)
    yield s
    s.stop()


@pytest.fixture
def strict(tmp_path) -> Iterator[Studio]:
    s = start_studio(tmp_path, config=StudioConfig(min_answer_s=30.0))
    add_rankings(s)
    yield s
    s.stop()


def add_rankings(studio: Studio) -> None:
    """Round 3 (the newest): two ranking queries, of 4 and of 3 clips."""
    seg = [s.id for s in studio.store.segments.all()]
    studio.store.queries.add(
        [
            Query(id="rk4", kind="ranking", a=tuple(seg[:4]), round=3),
            Query(id="rk3", kind="ranking", a=tuple(seg[4:7]), round=3),
        ]
    )


def ranked(qid: str, ranks, key: str, **kw) -> dict:
    return {"query_id": qid, "ranks": ranks, "client_key": key, "response_time_s": 4.0, **kw}


def serve(client, kind: str = "ranking") -> dict:
    """The next query of the client's queue of ``kind`` (it counts as shown from now)."""
    q = client.get("/api/queries/next", params={"kind": kind}).json()["query"]
    assert q is not None
    return q


def refused(response, status: int, *words: str) -> str:
    assert response.status_code == status, response.text
    detail = response.json()["detail"]
    assert isinstance(detail, str)
    for w in words:
        assert w.lower() in detail.lower(), detail
    return detail


def test_a_ranking_is_served_with_all_its_clips_and_answered_with_ranks(quick: Studio) -> None:
    alice = quick.client("alice")
    q = serve(alice)
    assert (q["id"], q["kind"], len(q["a"]), q["b"]) == ("rk4", "ranking", 4, [])
    assert all(c["status"] == "ready" and c["media_url"] for c in q["a"])
    assert "true_rewards" not in str(q)
    time.sleep(0.1)  # longer than this studio's min_answer_s
    r = alice.post("/api/judgements", json=ranked("rk4", [1, 0, 2, 0], "key-rank-0001"))
    assert r.status_code == 201, r.text
    assert r.json()["duplicate"] is False
    found = quick.store.answers.get(r.json()["judgement_id"])
    assert found is not None
    j = found[1]
    # pairs (0,1) 1>0: 0 · (0,2) 1<2: 1 · (0,3) 1>0: 0 · (1,2) 0<2: 1 · (1,3) tie: ½ · (2,3): 0
    assert j.p == pytest.approx(2.5 / 6)
    assert j.meta["ranks"] == [1, 0, 2, 0]
    assert (j.meta["ui"], j.meta["client_key"], j.source) == ("studio", "key-rank-0001", "human")
    assert j.meta["undo_s"] == StudioConfig().undo_grace_s
    assert j.response_time_s == 4.0
    # the ranking's labels: every pair of its clips, by the ranks given
    query = quick.store.queries.get("rk4")
    assert query is not None
    labels = {(lab.a, lab.b): lab.p for lab in kind_of(query).labels(query, j)}
    a = query.a
    assert labels == {
        (a[0], a[1]): 0.0,
        (a[0], a[2]): 1.0,
        (a[0], a[3]): 0.0,
        (a[1], a[2]): 1.0,
        (a[1], a[3]): 0.5,
        (a[2], a[3]): 0.0,
    }
    # the same answer sent again (the page's outbox resends) is stored once
    again = alice.post("/api/judgements", json=ranked("rk4", [1, 0, 2, 0], "key-rank-0001"))
    assert again.status_code == 201 and again.json()["duplicate"] is True
    # the same key with other ranks is a conflict, not a second answer
    refused(alice.post("/api/judgements", json=ranked("rk4", [0, 1, 2, 3], "key-rank-0001")), 409)
    # the person's own list says what they answered
    mine = alice.get("/api/judgements/mine").json()["judgements"]
    assert [(m["query_id"], m["kind"], m["ranks"]) for m in mine] == [
        ("rk4", "ranking", [1, 0, 2, 0])
    ]
    assert mine[0]["p"] == pytest.approx(2.5 / 6)


def test_all_in_order_gives_p_1_and_cant_tell_is_a_skip_with_no_labels(quick: Studio) -> None:
    alice = quick.client("alice")
    serve(alice)
    time.sleep(0.1)
    r = alice.post("/api/judgements", json=ranked("rk4", [0, 1, 2, 3], "key-rank-order"))
    assert r.status_code == 201
    assert quick.store.answers.by_annotator("alice")[0][1].p == 1.0
    bob = quick.client("bob")
    serve(bob)
    time.sleep(0.1)
    r = bob.post("/api/judgements", json=ranked("rk4", None, "key-rank-cannot"))
    assert r.status_code == 201, r.text
    ((_, j),) = quick.store.answers.by_annotator("bob")
    assert j.p is None and "ranks" not in j.meta
    query = quick.store.queries.get("rk4")
    assert query is not None and kind_of(query).labels(query, j) == []
    mine = bob.get("/api/judgements/mine").json()["judgements"]
    assert (mine[0]["kind"], mine[0]["ranks"], mine[0]["p"]) == ("ranking", None, None)


@pytest.mark.parametrize(
    ("body", "words"),
    [
        (ranked("rk4", [0, 1, 2], "key-bad-00001"), ("4 clips", "got 3")),
        (ranked("rk4", [0, 1, 2, 3, 0], "key-bad-00002"), ("4 clips", "got 5")),
        (ranked("rk4", [0, 2, 2, 3], "key-bad-00003"), ("dense",)),
        (ranked("rk4", [1, 1, 2, 3], "key-bad-00004"), ("dense",)),
        (ranked("rk4", [], "key-bad-00005"), ("4 clips",)),
        (ranked("rk4", [0, 1, 2, -1], "key-bad-00006"), ("ranks.3",)),
        (ranked("rk4", [0, 1, 2, 8], "key-bad-00007"), ("ranks.3",)),
        (ranked("rk4", [0, 1, 2, 3.0], "key-bad-00008"), ("ranks.3",)),
        (ranked("rk4", [0, 1, True, 2], "key-bad-00009"), ("ranks.2",)),
        (ranked("rk4", ["0", "1", "2", "3"], "key-bad-00010"), ("ranks.0",)),
        (ranked("rk4", [[0], 1, 2, 3], "key-bad-00011"), ("ranks.0",)),
        (ranked("rk4", {"a": 0}, "key-bad-00012"), ("ranks",)),
        (ranked("rk4", "0123", "key-bad-00013"), ("ranks",)),
        (ranked("rk4", 0, "key-bad-00014"), ("ranks",)),
        (ranked("rk4", list(range(9)), "key-bad-00015"), ("ranks",)),
        (ranked("rk4", [0, 1, 2, 3], "key-bad-00016", p=1.0), ("not both",)),
        (ranked("rk4", None, "key-bad-00017", p=None), ("not both",)),
        (
            {"query_id": "rk4", "p": 1.0, "client_key": "key-bad-00018"},
            ("ranking of 4 clips", "ranks"),
        ),
        (
            {"query_id": "rk4", "p": None, "client_key": "key-bad-00019"},
            ("ranking of 4 clips", "ranks"),
        ),
        ({"query_id": "rk4", "client_key": "key-bad-00020"}, ("missing",)),
        (ranked("q3", [0, 1], "key-bad-00021"), ("pairwise", "with p")),
        (ranked("g1", None, "key-bad-00022"), ("group", "with p")),
        (ranked("r1", [0, 1], "key-bad-00023"), ("rating stream",)),
    ],
)
def test_malformed_ranks_are_422_and_store_nothing(quick: Studio, body: dict, words) -> None:
    alice = quick.client("alice")
    serve(alice)
    time.sleep(0.1)
    before = counts(quick.store)
    refused(alice.post("/api/judgements", json=body), 422, *words)
    assert counts(quick.store) == before


def test_unknown_ranking_query_is_404(quick: Studio) -> None:
    before = counts(quick.store)
    r = quick.client("alice").post("/api/judgements", json=ranked("nope", [0, 1], "key-nope-001"))
    refused(r, 404, "no query")
    assert counts(quick.store) == before


def test_a_ranking_answered_before_its_clips_were_watched_is_refused(strict: Studio) -> None:
    alice = strict.client("alice")
    assert serve(alice)["id"] == "rk4"
    r = alice.post("/api/judgements", json=ranked("rk4", [0, 1, 2, 3], "key-early-0001"))
    refused(r, 409, "watch all 4 clips first")
    assert 29 <= int(r.headers["Retry-After"]) <= 30
    assert strict.store.answers.by_annotator("alice") == []
    # a malformed answer is still a 422 (what was wrong), never stored
    refused(alice.post("/api/judgements", json=ranked("rk4", [0, 2], "key-early-0002")), 422)
    assert strict.store.answers.by_annotator("alice") == []


def test_undo_brings_the_ranking_back_until_the_trainer_collects_it(quick: Studio) -> None:
    alice = quick.client("alice")
    assert serve(alice)["id"] == "rk4"
    time.sleep(0.1)
    j1 = alice.post("/api/judgements", json=ranked("rk4", [0, 0, 1, 2], "key-undo-rank1")).json()
    assert serve(alice)["id"] == "rk3"  # answered: the next ranking
    r = alice.delete(f"/api/judgements/{j1['judgement_id']}")
    assert r.status_code == 200 and r.json() == {"undone": True}
    assert j1["judgement_id"] in quick.store.answers.retracted_ids()
    assert alice.get("/api/judgements/mine").json()["judgements"] == []
    assert serve(alice)["id"] == "rk4"  # open again, first of its round
    # answered again (a correction is a new judgement), then collected by the trainer
    j2 = alice.post("/api/judgements", json=ranked("rk4", [1, 0, 1, 2], "key-undo-rank2")).json()
    found = quick.store.answers.get(j2["judgement_id"])
    assert found is not None
    quick.store.rounds.set_cursor("trainer", found[0])
    mine = alice.get("/api/judgements/mine").json()["judgements"]
    assert [(m["ranks"], m["undoable"]) for m in mine] == [([1, 0, 1, 2], False)]
    before = counts(quick.store)
    refused(alice.delete(f"/api/judgements/{j2['judgement_id']}"), 409, "collected")
    assert counts(quick.store) == before


def test_skip_moves_a_ranking_to_the_end_and_ahead_lists_rankings(strict: Studio) -> None:
    alice = strict.client("alice")
    assert serve(alice)["id"] == "rk4"
    ahead = alice.get("/api/queries/ahead", params={"kind": "ranking", "k": 3, "exclude": "rk4"})
    assert ahead.status_code == 200, ahead.text
    qs = ahead.json()["queries"]
    assert [(q["id"], q["kind"], len(q["a"]), q["b"]) for q in qs] == [("rk3", "ranking", 3, [])]
    assert strict.store.people.state("alice", "rk3") is None  # listed ahead, not served
    assert alice.post("/api/queries/rk4/skip").json() == {"skipped": True}
    assert [q.id for q in strict.store.people.queue("alice", kind="ranking")] == ["rk3", "rk4"]
    assert serve(alice)["id"] == "rk3"
    # a pair's queue holds no ranking, and a ranking's queue no pair
    assert serve(alice, "pair")["id"] == "q3"
    bad = alice.get("/api/queries/ahead", params={"kind": "stream"})
    refused(bad, 422, "kind")


def test_the_same_clips_are_never_ranked_twice_by_one_person(quick: Studio) -> None:
    alice = quick.client("alice")
    rk4 = quick.store.queries.get("rk4")
    assert rk4 is not None
    # round 4 asks rk4's clips again in another order, and a set that differs by one clip
    other = quick.store.queries.get("rk3")
    assert other is not None
    quick.store.queries.add(
        [
            Query(id="rk4again", kind="ranking", a=tuple(reversed(rk4.a)), round=4),
            Query(id="rk4plus", kind="ranking", a=(*rk4.a[:3], other.a[0]), round=4),
        ]
    )
    served: list[str] = []
    for k in range(10):
        q = alice.get("/api/queries/next", params={"kind": "ranking"}).json()["query"]
        if q is None:
            break
        served.append(q["id"])
        time.sleep(0.1)
        n = len(q["a"])
        ranks = None if k == 0 else list(range(n))  # can't tell retires a set too
        r = alice.post("/api/judgements", json=ranked(q["id"], ranks, f"key-twice-{k:04d}"))
        assert r.status_code == 201, r.text
    # round 4 first; its copy of rk4 hides rk4 itself (the same clips), each set once
    assert served[:2] == ["rk4again", "rk4plus"]
    assert sorted(served) == sorted(["rk4again", "rk4plus", "rk3"])
    # another person still gets the newest round's copy
    assert serve(quick.client("bob"))["id"] == "rk4again"


def test_status_counts_the_queries_waiting_per_view(quick: Studio) -> None:
    status = quick.client("alice").get("/api/status").json()
    # q1 q2 q3 (compare), g1 (groups), r1 (rate), rk4 rk3 (rank)
    assert status["views"] == {"compare": 3, "groups": 1, "rate": 1, "rank": 2}
    assert status["waiting"] == 7


def test_ranking_runs_are_answered_by_the_teacher_or_people_in_the_studio() -> None:
    for source in ("teacher", "store"):
        assert TrainConfig(selector="ranking", source=source).source == source
    for source in ("crowd", "llm", "scalar"):
        with pytest.raises(ConfigError, match=rf"--source {source} answers pair or group"):
            TrainConfig(selector="ranking", source=source)


def test_train_studio_takes_source_store_and_refuses_other_sources(capsys) -> None:
    args = ["--studio", "--selector", "ranking", "--rank-size", "5", "--env-id", "Pendulum-v1"]
    for source in (["--source", "store"], ["--source=store"], []):
        assert train_main([*args, *source, "--print-config", "-"]) == 0
        out = capsys.readouterr().out
        assert 'selector = "ranking"' in out and 'source = "store"' in out
        assert "rank_size = 5" in out
    for source in (["--source", "crowd"], ["--source=teacher"], ["--source"]):
        with pytest.raises(ConfigError, match="drop --source"):
            train_main([*args, *source, "--print-config", "-"])
