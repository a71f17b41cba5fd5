"""The groupwise routes (issue #10) through the real app (FastAPI TestClient, real store, real
Pendulum segments and reward ensemble), without a browser: before any round, previews, spreads,
can't-tell answers, authentication and the round's cache."""

from __future__ import annotations

import numpy as np
import pytest
from fastapi.testclient import TestClient

from preflab.records import Annotator
from preflab.store import FeedbackStore
from preflab.studio.app import create_app
from preflab_bench._studio_groupwise_data import publish_pendulum_round

TOKEN = "tok-ann-" + "a" * 24
AUTH = {"Authorization": f"Bearer {TOKEN}"}


@pytest.fixture
def client(tmp_path):
    store = FeedbackStore(tmp_path / "f.db", array_dir=tmp_path / "segments")
    store.annotators.add(
        Annotator(id="h-ann", source="human", name="ann", meta={"role": "annotator"}),
        token=TOKEN,
    )
    app = create_app(store)
    app.state.groupwise.close()  # the tests build rounds on request, not in the watcher
    with TestClient(app) as c:
        c.store = store  # type: ignore[attr-defined]
        yield c
    store.close()


def test_before_any_round_and_without_a_token(client) -> None:
    assert client.get("/api/groupwise/round").status_code == 401
    r = client.get("/api/groupwise/round", headers=AUTH)
    assert r.status_code == 200 and r.json() == {"view": None}
    r = client.get("/api/groupwise/round?round=3", headers=AUTH)
    assert r.status_code == 404 and "round 3" in r.json()["detail"]
    body = {"round": 0, "a": ["s-x"], "b": ["s-y"], "p": 1.0, "client_key": "key-00000001"}
    r = client.post("/api/groupwise/judgements", headers=AUTH, json=body)
    assert r.status_code == 404 and "publishes" in r.json()["detail"]


def test_view_spread_clips_and_cant_tell(client) -> None:
    segs = publish_pendulum_round(client.store, 24, 0)
    view = client.get("/api/groupwise/round", headers=AUTH).json()["view"]
    assert view["round"] == 0 and view["n_behaviours"] == 24
    assert sorted(view["leaf_order"]) == sorted(s.id for s in segs)
    assert view["has_ensemble"] and view["group_suggestions"] and view["suggestions"]
    w = [e["weight"] for e in view["suggestions"]]
    assert w == sorted(w, reverse=True)  # highest disagreement first
    # every parent lists its representatives among its own members
    stack = [view["root"]]
    while stack:
        n = stack.pop()
        if "children" in n:
            assert set(n["reps"]) <= set(n["segments"]) and len(n["reps"]) == min(3, n["size"])
            stack += n["children"]
    # the cache: a second request is the same build
    cache = client.app.state.groupwise
    assert cache.view(0) is cache.view(None)
    ids = view["leaf_order"]
    r = client.post(
        "/api/groupwise/spread", headers=AUTH, json={"round": 0, "a": ids[:4], "b": ids[4:5]}
    )
    sa, sb = r.json()["a"], r.json()["b"]
    d = cache.view(0).distances
    rows = [cache.view(0).index[s] for s in ids[:4]]
    expect = np.mean([d[i, j] for k, i in enumerate(rows) for j in rows[k + 1 :]])
    assert sa["mean_dtw"] == pytest.approx(expect, abs=1e-3) and sb["mean_dtw"] is None
    r = client.get("/api/groupwise/clips?ids=" + ",".join(ids[:3]), headers=AUTH)
    clips = r.json()["clips"]
    assert [c["segment_id"] for c in clips] == ids[:3]
    assert {c["status"] for c in clips} == {"unavailable"}  # no media service in this app
    assert (
        client.get("/api/groupwise/clips?ids=" + ",".join(ids[:17]), headers=AUTH).status_code
        == 422
    )
    assert client.get("/api/groupwise/clips?ids=s-nope", headers=AUTH).status_code == 404
    body = {"round": 0, "a": ids[:2], "b": ids[2:5], "p": None, "client_key": "cant-tell-01"}
    r = client.post("/api/groupwise/judgements", headers=AUTH, json=body)
    assert r.status_code == 201 and r.json()["n_labels"] == 0
    r = client.post("/api/groupwise/judgements", headers=AUTH, json={**body, "b": ids[5:7]})
    assert r.status_code == 409  # the same client key for other groups
    r = client.post("/api/groupwise/judgements", headers=AUTH, json={**body, "p": 0.3})
    assert r.status_code == 422


def test_an_answer_on_the_round_just_ended_still_counts(client) -> None:
    """The person composed and watched two groups of round 0; the trainer published round 1
    before the key press: the answer is stored with round 0's behaviours, not refused."""
    old = publish_pendulum_round(client.store, 12, 0)
    ids = [s.id for s in old]
    publish_pendulum_round(client.store, 12, 1, seed=1)
    assert client.get("/api/groupwise/round", headers=AUTH).json()["view"]["round"] == 1
    body = {"round": 0, "a": ids[:3], "b": ids[3:5], "p": 1.0, "client_key": "late-answer-1"}
    r = client.post("/api/groupwise/judgements", headers=AUTH, json=body)
    assert r.status_code == 201 and r.json()["n_labels"] == 3
    (j,) = [j for _s, j in client.store.answers.judgements(source="human")]
    q = client.store.queries.get(j.query_id)
    assert q is not None and q.kind == "group" and set(q.a) == set(ids[:3]) and j.p == 1.0
    # a behaviour that is not in the round named is still refused
    bad = {**body, "b": ["s-nope"], "client_key": "late-answer-2"}
    assert client.post("/api/groupwise/judgements", headers=AUTH, json=bad).status_code in (
        404,
        422,
    )


def test_a_refused_group_answer_leaves_no_query_behind(client) -> None:
    """The studio stores a composed group query and its answer together: when the answer is
    refused (here its client key already names another answer of this person), the query is
    not stored either, so no question nobody can answer waits in the run."""
    from preflab.records import Judgement, Query
    from preflab.studio.routes_answers import judgement_id
    from preflab.studio.routes_groupwise import group_query_id

    ids = [s.id for s in publish_pendulum_round(client.store, 12, 0)]
    client.store.queries.add([Query(id="q-pair", kind="pair", a=(ids[0],), b=(ids[1],))])
    key = "used-before-01"
    taken = Judgement(
        id=judgement_id("h-ann", key),
        query_id="q-pair",
        annotator_id="h-ann",
        source="human",
        p=1.0,
    )
    client.store.answers.add([taken])
    n_queries = len(client.store.queries.all())
    body = {"round": 0, "a": ids[:2], "b": ids[2:4], "p": 1.0, "client_key": key}
    r = client.post("/api/groupwise/judgements", headers=AUTH, json=body)
    assert r.status_code == 409
    assert client.store.queries.get(group_query_id("h-ann", key)) is None
    assert len(client.store.queries.all()) == n_queries
    ok = {**body, "client_key": "fresh-key-0001"}
    r = client.post("/api/groupwise/judgements", headers=AUTH, json=ok)
    assert r.status_code == 201 and len(client.store.queries.all()) == n_queries + 1


def test_an_undone_suggestion_is_offered_again(client) -> None:
    """A suggestion answered and then undone is no longer marked answered: the answer does not
    count, so the view offers the suggestion again; the undone answer sent again is refused
    (409), not reported as saved."""
    publish_pendulum_round(client.store, 24, 0)
    view = client.get("/api/groupwise/round", headers=AUTH).json()["view"]
    g = view["group_suggestions"][0]
    assert not g["answered"]
    body = {"round": 0, "a": g["a"], "b": g["b"], "p": 1.0, "client_key": "sugg-answer-1"}
    body["suggestion_rank"] = g["rank"]
    r = client.post("/api/groupwise/judgements", headers=AUTH, json=body)
    assert r.status_code == 201
    answered = client.get("/api/groupwise/round", headers=AUTH).json()["view"]
    assert answered["group_suggestions"][0]["answered"]
    r = client.delete(f"/api/judgements/{r.json()['judgement_id']}", headers=AUTH)
    assert r.status_code == 200 and r.json() == {"undone": True}
    again = client.get("/api/groupwise/round", headers=AUTH).json()["view"]
    assert not again["group_suggestions"][0]["answered"]
    assert again["history"] == []
    # the page resending the undone answer (same client_key) is told it was undone, not saved
    r = client.post("/api/groupwise/judgements", headers=AUTH, json=body)
    assert r.status_code == 409 and "undone" in r.json()["detail"]
    assert not client.get("/api/groupwise/round", headers=AUTH).json()["view"]["history"]


def test_the_round_view_reads_only_your_answers_queries(client, monkeypatch) -> None:
    """GET /round used to read every query of the run (twice) to look up at most 2000 of yours:
    ~0.8 s at 20k queries. It reads the queries of your answers, and shows the same: your
    history edges and which suggestions your answers that count took."""
    from preflab.records import Annotator, Query
    from preflab.testing.factories import make_judgement, make_query

    store = client.store
    segs = publish_pendulum_round(store, 24, 0)
    ids = [s.id for s in segs]
    store.annotators.add(Annotator(id="h-other", source="human", name="other"), token="t" * 32)
    pairs = [make_query(f"q-{k}", ids[k], ids[k + 1]) for k in range(20)]
    store.queries.add(pairs)
    store.answers.add([make_judgement(f"j-o{k}", f"q-{k}", "h-other", 0.0) for k in range(20)])
    store.answers.add([make_judgement("j-mine", "q-3", "h-ann", 1.0)])
    g = client.get("/api/groupwise/round", headers=AUTH).json()["view"]["group_suggestions"][0]
    body = {"round": 0, "a": g["a"], "b": g["b"], "p": 1.0, "client_key": "sugg-answer-1"}
    assert client.post("/api/groupwise/judgements", headers=AUTH, json=body).status_code == 201
    read: list[str] = []
    from_row = Query.from_row

    def counted(row):  # type: ignore[no-untyped-def]
        read.append(row["id"])
        return from_row(row)

    monkeypatch.setattr(Query, "from_row", staticmethod(counted))
    view = client.get("/api/groupwise/round", headers=AUTH).json()["view"]
    assert len(read) == 2 and "q-3" in read  # yours: the pair and the composed groups
    assert view["group_suggestions"][0]["answered"]
    assert not any(s["answered"] for s in view["group_suggestions"][1:])
    pair_edges = [(e["from"], e["to"]) for e in view["history"] if e["judgement_id"] == "j-mine"]
    assert pair_edges == [(ids[3], ids[4])]
    assert {e["judgement_id"] for e in view["history"]} > {"j-mine"}  # and the groups' edges
