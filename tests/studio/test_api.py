"""Studio API (Contract C) against a real uvicorn server and a real SQLite store.

After every rejected request the store's row counts are compared with those before it.
"""

from __future__ import annotations

import io
import json
import socket
import threading
import time
import zipfile
from collections.abc import Iterator
from pathlib import Path

import pytest
from sqlalchemy import text

from preflab.studio.config import StudioConfig
from preflab.studio.middleware import CSP
from tests.studio.api_server import Studio, counts, start_studio


@pytest.fixture
def studio(tmp_path) -> Iterator[Studio]:
    s = start_studio(tmp_path)
    yield s
    s.stop()


def rejected(studio: Studio, response, status: int, *, contains: str = "") -> None:
    """The response is ``status`` with a JSON detail message."""
    assert response.status_code == status, response.text
    assert response.headers["content-type"].startswith("application/json")
    detail = response.json()["detail"]
    assert isinstance(detail, str) and len(detail) > 10
    assert contains.lower() in detail.lower()


def judgement(qid: str = "q3", p=1.0, key: str = "key-00000001", **kw) -> dict:
    return {"query_id": qid, "p": p, "response_time_s": 2.5, "client_key": key, **kw}


# ----- auth ---------------------------------------------------------------------------------
def test_bad_and_missing_tokens_are_401(studio: Studio) -> None:
    before = counts(studio.store)
    anon = studio.client()
    for method, path, body in [
        ("GET", "/api/me", None),
        ("GET", "/api/status", None),
        ("GET", "/api/queries/next", None),
        ("POST", "/api/judgements", judgement()),
        ("DELETE", "/api/judgements/j-1", None),
        ("POST", "/api/ratings", {"query_id": "r1", "ratings": [{"step": 0, "t": 0, "value": 0}]}),
        ("GET", "/api/owner/overview", None),
        ("GET", "/media/" + "a" * 32 + ".mp4", None),
    ]:
        for headers in (
            {},
            {"Authorization": "Bearer wrong-token"},
            {"Authorization": "Basic abc"},
            {"Authorization": "Bearer"},
            {"Authorization": "Bearer " + "x" * 300},
        ):
            r = anon.request(method, path, json=body, headers=headers)
            rejected(studio, r, 401)
        r = anon.request(method, path, json=body, cookies={"preflab_token": "nope"})
        rejected(studio, r, 401)
    rejected(studio, anon.post("/api/login", json={"token": "wrong"}), 401)
    rejected(studio, anon.post("/api/login", json={"token": ""}), 422)
    rejected(studio, anon.post("/api/login", json={}), 422)
    assert counts(studio.store) == before


def test_login_sets_httponly_strict_cookie_and_logout_clears_it(studio: Studio) -> None:
    c = studio.client()
    r = c.post("/api/login", json={"token": studio.tokens["bob"]})
    assert r.status_code == 200 and r.json() == {"id": "bob", "name": "bob", "role": "annotator"}
    cookie = r.headers["set-cookie"].lower()
    assert "httponly" in cookie and "samesite=strict" in cookie and "path=/" in cookie
    assert c.get("/api/me").json()["id"] == "bob"  # the cookie authenticates
    # a cross-site write with the cookie is refused (SameSite backs this up in browsers)
    before = counts(studio.store)
    r = c.post("/api/judgements", json=judgement(), headers={"Origin": "http://evil.example"})
    rejected(studio, r, 403, contains="cross-site")
    assert counts(studio.store) == before
    same = c.post("/api/judgements", json=judgement(), headers={"Origin": studio.url})
    assert same.status_code == 201
    c.post("/api/logout")
    assert c.get("/api/me").status_code == 401


def test_only_token_hashes_are_stored(studio: Studio) -> None:
    studio.store.close()
    db = Path(studio.store.url.removeprefix("sqlite:///"))
    data = b"".join(p.read_bytes() for p in db.parent.glob(db.name + "*"))
    for tok in studio.tokens.values():
        assert tok.encode() not in data


# ----- public pages, headers --------------------------------------------------------------
def test_public_pages_and_security_headers(studio: Studio, tmp_path) -> None:
    c = studio.client()
    r = c.get("/")
    assert r.status_code == 200 and "front end is not built" in r.text
    assert "bash scripts/setup.sh" in r.text
    for path in ("/", "/index.html", "/api/me", "/nope", "/openapi.json", "/api/health"):
        h = c.get(path).headers
        assert h["content-security-policy"] == CSP
        assert h["x-content-type-options"] == "nosniff"
    assert c.get("/api/health").json()["ok"] is True
    assert c.get("/assets/app.js").status_code == 404
    assert "/api/judgements" in c.get("/openapi.json").json()["paths"]


def test_built_front_end_is_served(tmp_path) -> None:
    static = tmp_path / "static"
    (static / "assets").mkdir(parents=True)
    (static / "index.html").write_text("<!doctype html><title>Studio</title>")
    (static / "assets" / "app.js").write_text("console.log(1)")
    s = start_studio(tmp_path, static_dir=static, media=False)
    try:
        c = s.client()
        assert c.get("/").text.startswith("<!doctype html><title>Studio")
        r = c.get("/assets/app.js")
        assert r.status_code == 200 and "javascript" in r.headers["content-type"]
        assert r.headers["content-security-policy"] == CSP
        assert c.get("/assets/../index.html").status_code in (200, 404)  # normalised by client
        assert c.get("/assets/%2e%2e/%2e%2e/feedback.db").status_code == 404
    finally:
        s.stop()


def test_html_in_names_is_returned_verbatim_as_json(studio: Studio) -> None:
    alice = studio.client("alice")
    r = alice.get("/api/me")
    assert r.headers["content-type"] == "application/json"
    assert r.json()["name"] == "<script>alert(1)</script> Ann"
    assert r.headers["content-security-policy"] == CSP
    owner = studio.client("owner")
    r = owner.post("/api/owner/annotators", json={"name": "<img src=x onerror=alert(1)>"})
    assert r.status_code == 201 and r.json()["name"] == "<img src=x onerror=alert(1)>"
    names = [a["name"] for a in owner.get("/api/owner/overview").json()["annotators"]]
    assert "<img src=x onerror=alert(1)>" in names


# ----- queries, clips, media ----------------------------------------------------------------
def test_next_query_in_selector_order_with_clips(studio: Studio) -> None:
    alice = studio.client("alice")
    q = alice.get("/api/queries/next").json()["query"]
    assert q["id"] == "q3" and q["kind"] == "pair" and q["round"] == 2  # newest round first
    clip = q["a"][0]
    assert set(clip) == {
        "segment_id",
        "media_key",
        "media_url",
        "status",
        "length",
        "fps",
        "timing",
    }
    # issue #25: each clip says how it plays in real time (Toy-v0 is no gymnasium id: 30 steps/s)
    assert clip["timing"]["source"] == "default" and clip["fps"] == 30
    assert clip["status"] == "ready" and clip["length"] == 5
    assert clip["media_url"] == f"/media/{clip['media_key']}.mp4"
    # priority 0 for this query, 1 for the following ones
    prios = {ids: p for ids, p in studio.media.requests}  # type: ignore[union-attr]
    assert prios[(clip["segment_id"],)] == 0
    assert 1 in prios.values()
    assert alice.get("/api/queries/next", params={"after": "q3"}).json()["query"]["id"] == "g1"
    kinds = alice.get("/api/queries/next", params={"kind": "pair", "after": "q3"}).json()
    assert kinds["query"]["id"] == "q1"
    assert alice.get("/api/queries/next", params={"after": "unknown"}).json()["query"]["id"] == "q3"
    rejected(studio, alice.get("/api/queries/next", params={"kind": "trio"}), 422)
    assert alice.get("/api/queries/g1").json()["query"]["b"][0]["length"] == 5
    rejected(studio, alice.get("/api/queries/nope"), 404, contains="no query")
    # never the hidden true rewards
    for path in ("/api/queries/next", "/api/queries/g1", "/api/streams/next"):
        assert "true_return" not in alice.get(path).text
        assert "reward" not in alice.get(path).text


def test_media_range_requests_and_status(studio: Studio) -> None:
    alice = studio.client("alice")
    clip = alice.get("/api/queries/next").json()["query"]["a"][0]
    whole = alice.get(clip["media_url"])
    assert whole.status_code == 200 and whole.headers["content-type"] == "video/mp4"
    assert whole.content[4:8] == b"ftyp"
    part = alice.get(clip["media_url"], headers={"Range": "bytes=10-49"})
    assert part.status_code == 206 and part.content == whole.content[10:50]
    assert part.headers["content-range"] == f"bytes 10-49/{len(whole.content)}"
    st = alice.get(f"/api/media/{clip['media_key']}").json()
    assert st == {"key": clip["media_key"], "status": "ready", "url": clip["media_url"]}
    # a clip still rendering
    studio.media.pending.add("s-pending")  # type: ignore[union-attr]
    key = studio.media.request(["s-pending"], 0)  # type: ignore[union-attr]
    assert alice.get(f"/api/media/{key}").json()["status"] == "pending"
    rejected(studio, alice.get(f"/media/{key}.mp4"), 404)
    # the cookie works for media too
    c = studio.client()
    c.post("/api/login", json={"token": studio.tokens["bob"]})
    assert c.get(clip["media_url"]).status_code == 200


def test_path_traversal_in_media_urls_is_404(studio: Studio) -> None:
    alice = studio.client("alice")
    bad = [
        "/media/..%2f..%2fetc%2fpasswd",
        "/media/%2e%2e%2ffeedback.db",
        "/media/" + "A" * 32 + ".mp4",
        "/media/" + "a" * 31 + ".mp4",
        "/media/" + "a" * 32 + ".mp4.exe",
        "/media/" + "a" * 32 + ".mp4%00",
        "/media/" + "g" * 32 + ".mp4",
        "/media/feedback.db",
        "/api/media/..%2f..%2fetc%2fpasswd",
        "/api/media/" + "A" * 32,
    ]
    for path in bad:
        r = alice.get(path)
        assert r.status_code == 404, path
    # raw request line, not normalised by the client
    port = int(studio.url.rsplit(":", 1)[1])
    with socket.create_connection(("127.0.0.1", port)) as s:
        s.sendall(
            b"GET /media/../../../etc/passwd HTTP/1.1\r\nHost: x\r\nAuthorization: Bearer "
            + studio.tokens["alice"].encode()
            + b"\r\nConnection: close\r\n\r\n"
        )
        head = s.recv(4096).split(b"\r\n", 1)[0]
    assert head.split()[1] in (b"404", b"400"), head


def test_no_media_service_means_unavailable_clips(tmp_path) -> None:
    s = start_studio(tmp_path, media=False)
    try:
        q = s.client("alice").get("/api/queries/next").json()["query"]
        assert q["a"][0]["status"] == "unavailable" and q["a"][0]["media_url"] is None
        assert s.client("alice").get("/media/" + "a" * 32 + ".mp4").status_code == 404
    finally:
        s.stop()


# ----- judgements ---------------------------------------------------------------------------
def test_double_submission_is_idempotent(studio: Studio) -> None:
    alice = studio.client("alice")
    r1 = alice.post("/api/judgements", json=judgement())
    assert r1.status_code == 201 and r1.json()["duplicate"] is False and r1.json()["saved"]
    n = counts(studio.store)
    r2 = alice.post("/api/judgements", json=judgement())
    assert r2.status_code == 201 and r2.json() == {**r1.json(), "duplicate": True}
    assert counts(studio.store) == n
    # the same key with another answer is a conflict, nothing written
    rejected(studio, alice.post("/api/judgements", json=judgement(p=0.0)), 409)
    assert counts(studio.store) == n
    # another annotator's identical key is their own judgement
    r3 = studio.client("bob").post("/api/judgements", json=judgement())
    assert r3.status_code == 201 and r3.json()["judgement_id"] != r1.json()["judgement_id"]
    ((_s, j),) = studio.store.answers.by_annotator("alice")
    assert (j.query_id, j.p, j.source, j.response_time_s) == ("q3", 1.0, "human", 2.5)


@pytest.mark.parametrize(
    "body",
    [
        judgement(p=0.3),
        judgement(p=2),
        judgement(p=-1),
        judgement(p="1"),
        judgement(p=True),
        judgement(p=[1]),
        judgement(response_time_s=-1),
        judgement(response_time_s="fast"),
        judgement(key="short"),
        judgement(key="has spaces in it"),
        judgement(qid=""),
        judgement(qid="x" * 65),
        {"query_id": "q3", "client_key": "key-00000001"},
        {"p": 1, "client_key": "key-00000001"},
        {"query_id": "q3", "p": 1},
        [],
        "p=1",
        None,
    ],
)
def test_out_of_range_or_malformed_judgements_are_422(studio: Studio, body) -> None:
    alice = studio.client("alice")
    before = counts(studio.store)
    rejected(studio, alice.post("/api/judgements", json=body), 422)
    assert counts(studio.store) == before


def test_nan_and_bad_json_are_422(studio: Studio) -> None:
    alice = studio.client("alice")
    before = counts(studio.store)
    h = {"content-type": "application/json"}
    for raw in (
        b'{"query_id": "q3", "p": NaN, "client_key": "key-00000001"}',
        b'{"query_id": "q3", "p": Infinity, "client_key": "key-00000001"}',
        b'{"query_id": "q3", "p": 1, "client_key": "key-00000001"',
        b"\xff\xfe",
        b"",
    ):
        rejected(studio, alice.post("/api/judgements", content=raw, headers=h), 422)
    assert counts(studio.store) == before


def test_unknown_and_deleted_queries_are_404(studio: Studio) -> None:
    alice = studio.client("alice")
    before = counts(studio.store)
    rejected(
        studio, alice.post("/api/judgements", json=judgement("nope")), 404, contains="no query"
    )
    with studio.store.engine.begin() as c:  # the trainer withdrew q2
        c.execute(text("DELETE FROM queries WHERE id = 'q2'"))
    after_delete = counts(studio.store)
    assert after_delete["queries"] == before["queries"] - 1
    rejected(studio, alice.post("/api/judgements", json=judgement("q2")), 404)
    rejected(studio, alice.get("/api/queries/q2"), 404)
    assert counts(studio.store) == after_delete
    # a rating stream cannot be answered with a judgement
    rejected(studio, alice.post("/api/judgements", json=judgement("r1")), 422, contains="rating")
    assert counts(studio.store) == after_delete


def test_undo_before_and_after_trainer_cursor(studio: Studio) -> None:
    alice = studio.client("alice")
    j1 = alice.post("/api/judgements", json=judgement("q3", key="key-undo-0001")).json()
    j2 = alice.post("/api/judgements", json=judgement("q1", key="key-undo-0002")).json()
    mine = alice.get("/api/judgements/mine").json()["judgements"]
    assert [m["id"] for m in mine] == [j2["judgement_id"], j1["judgement_id"]]
    assert all(m["undoable"] for m in mine)
    r = alice.delete(f"/api/judgements/{j1['judgement_id']}")
    assert r.status_code == 200 and r.json() == {"undone": True}
    assert [m["id"] for m in alice.get("/api/judgements/mine").json()["judgements"]] == [
        j2["judgement_id"]
    ]
    assert alice.get("/api/queries/next").json()["query"]["id"] == "q3"  # open again
    # the trainer collects everything so far
    seq = studio.store.answers.get(j2["judgement_id"])[0]  # type: ignore[index]
    studio.store.rounds.set_cursor("trainer", seq)
    assert alice.get("/api/judgements/mine").json()["judgements"][0]["undoable"] is False
    before = counts(studio.store)
    rejected(
        studio, alice.delete(f"/api/judgements/{j2['judgement_id']}"), 409, contains="collected"
    )
    rejected(studio, alice.delete("/api/judgements/j-unknown"), 404)
    assert counts(studio.store) == before
    rejected(studio, alice.get("/api/judgements/mine", params={"limit": 0}), 422)
    rejected(studio, alice.get("/api/judgements/mine", params={"limit": "ten"}), 422)


def test_annotators_see_only_their_own_judgements(studio: Studio) -> None:
    alice, bob = studio.client("alice"), studio.client("bob")
    ja = alice.post("/api/judgements", json=judgement("q3", key="key-alice-001")).json()
    bob.post("/api/judgements", json=judgement("q1", p=0.0, key="key-bob-00001"))
    mine_b = bob.get("/api/judgements/mine").json()["judgements"]
    assert [m["query_id"] for m in mine_b] == ["q1"]
    assert ja["judgement_id"] not in json.dumps(mine_b)
    before = counts(studio.store)
    rejected(studio, bob.delete(f"/api/judgements/{ja['judgement_id']}"), 404)
    assert counts(studio.store) == before
    # bob still has q3 open: alice's answer does not close it for him
    assert bob.get("/api/queries/next").json()["query"]["id"] == "q3"
    assert bob.get("/api/status").json()["answered_total"] == 1


# ----- status -------------------------------------------------------------------------------
def test_status_reports_round_and_own_progress(studio: Studio) -> None:
    alice = studio.client("alice")
    st = alice.get("/api/status").json()
    assert st["round"] is None and st["waiting"] == 5 and st["answered_total"] == 0
    studio.store.rounds.publish(
        2,
        env_id="Toy-v0",
        env_steps=400,
        total_steps=1000,
        metrics={"n_labels": 12, "eval_true_return": float("nan")},
    )
    alice.post("/api/judgements", json=judgement("q3", key="key-status-01"))
    alice.post("/api/judgements", json=judgement("q1", key="key-status-02"))
    st = alice.get("/api/status").json()
    assert st == {
        "round": 2,
        "status": "running",
        "env_id": "Toy-v0",
        "env_steps": 400,
        "total_steps": 1000,
        "n_labels": 12,
        "answered_round": 1,
        "answered_total": 2,
        "waiting": 3,
        "trainer_updated_at": st["trainer_updated_at"],
        "round_answered": None,  # the trainer is not waiting for people
        "round_asked": None,
        "to_rate": 1,  # the fixture's stream r1
        "views": {"compare": 1, "groups": 1, "rate": 1},  # q2, g1 and r1, by studio view
    }
    assert st["trainer_updated_at"] > 0


# ----- ratings ------------------------------------------------------------------------------
def test_rating_stream_and_batches(studio: Studio) -> None:
    alice = studio.client("alice")
    stream = alice.get("/api/streams/next").json()["stream"]
    assert stream["query_id"] == "r1" and stream["n_steps"] == 10 and stream["status"] == "ready"
    assert stream["media_url"].endswith(".mp4")
    batch = [{"step": k // 2, "t": 0.1 * k, "value": -1 + 0.2 * k} for k in range(11)]
    r = alice.post("/api/ratings", json={"query_id": "r1", "ratings": batch})
    assert r.status_code == 201 and r.json()["stored"] == 11
    stored = studio.store.ratings.all(stream_id="r1", annotator_id="alice")
    assert [x.step for x in stored] == [b["step"] for b in batch]
    # a retried batch is stored once
    again = alice.post("/api/ratings", json={"query_id": "r1", "ratings": batch})
    assert again.status_code == 201 and again.json()["stored"] == 0
    assert alice.get("/api/streams/next").json()["stream"] is None
    assert alice.get("/api/status").json()["to_rate"] == 0  # rated: the Rate tab's badge goes
    assert studio.client("bob").get("/api/status").json()["to_rate"] == 1
    assert studio.client("bob").get("/api/streams/next").json()["stream"]["query_id"] == "r1"
    before = counts(studio.store)
    changed = [{**batch[0], "value": 0.9}]
    rejected(studio, alice.post("/api/ratings", json={"query_id": "r1", "ratings": changed}), 409)
    assert counts(studio.store) == before


@pytest.mark.parametrize(
    ("ratings", "status", "words"),
    [
        ([{"step": 3, "t": 0, "value": 0}, {"step": 2, "t": 1, "value": 0}], 422, "non-decreasing"),
        ([{"step": 1, "t": 1, "value": 0}, {"step": 2, "t": 1, "value": 0}], 422, "increasing"),
        ([{"step": 1, "t": 2, "value": 0}, {"step": 2, "t": 1, "value": 0}], 422, "increasing"),
        ([{"step": 0, "t": 0, "value": 1.01}], 422, "less than or equal"),
        ([{"step": 0, "t": 0, "value": -2}], 422, "greater than"),
        ([{"step": -1, "t": 0, "value": 0}], 422, ""),
        ([{"step": 10, "t": 0, "value": 0}], 422, "past the end"),
        ([{"step": 0, "t": "now", "value": 0}], 422, ""),
        ([{"step": 0.5, "t": 0, "value": 0}], 422, ""),
        ([], 422, ""),
        ([{"step": k, "t": k, "value": 0} for k in range(2001)], 422, "2000"),
        ([{"step": 0, "t": k + 0.123456789, "value": -0.123456789} for k in range(2000)], 413, ""),
    ],
)
def test_bad_rating_batches_are_rejected(studio: Studio, ratings, status, words) -> None:
    alice = studio.client("alice")
    before = counts(studio.store)
    r = alice.post("/api/ratings", json={"query_id": "r1", "ratings": ratings})
    rejected(studio, r, status, contains=words)
    assert counts(studio.store) == before


def test_ratings_for_unknown_or_pair_queries(studio: Studio) -> None:
    alice = studio.client("alice")
    before = counts(studio.store)
    one = [{"step": 0, "t": 0, "value": 0}]
    rejected(studio, alice.post("/api/ratings", json={"query_id": "zz", "ratings": one}), 404)
    rejected(studio, alice.post("/api/ratings", json={"query_id": "q1", "ratings": one}), 422)
    assert counts(studio.store) == before


def test_max_ratings_per_batch_under_a_larger_body_limit(tmp_path) -> None:
    from preflab.studio import StudioConfig

    s = start_studio(tmp_path, media=False, config=StudioConfig(max_body_bytes=1 << 20))
    try:
        before = counts(s.store)
        many = [{"step": 0, "t": k, "value": 0} for k in range(2001)]
        r = s.client("alice").post("/api/ratings", json={"query_id": "r1", "ratings": many})
        rejected(s, r, 422, contains="2000")
        assert counts(s.store) == before
    finally:
        s.stop()


# ----- body limit ---------------------------------------------------------------------------
def test_oversized_bodies_are_413(studio: Studio) -> None:
    alice = studio.client("alice")
    before = counts(studio.store)
    big = judgement(padding="x" * 70_000)
    rejected(studio, alice.post("/api/judgements", json=big), 413, contains="larger")

    def chunks():  # no Content-Length: counted while reading
        for _ in range(20):
            yield b" " * 8192

    r = alice.post(
        "/api/judgements", content=chunks(), headers={"content-type": "application/json"}
    )
    rejected(studio, r, 413)
    assert counts(studio.store) == before
    ok = alice.post("/api/judgements", json=judgement(padding="x" * 1000))
    assert ok.status_code == 201


# ----- owner --------------------------------------------------------------------------------
def test_owner_endpoints_are_403_for_annotators(studio: Studio) -> None:
    alice = studio.client("alice")
    before = counts(studio.store)
    rejected(studio, alice.get("/api/owner/overview"), 403, contains="owner")
    rejected(studio, alice.get("/api/owner/export"), 403)
    rejected(studio, alice.post("/api/owner/annotators", json={"name": "eve"}), 403)
    rejected(
        studio, alice.post("/api/owner/annotators", json={"name": "eve", "role": "owner"}), 403
    )
    assert counts(studio.store) == before


def test_owner_overview_agreement_sml_and_export(studio: Studio) -> None:
    owner = studio.client("owner")
    r = owner.post("/api/owner/annotators", json={"name": "carol"})
    assert r.status_code == 201
    carol = r.json()
    assert carol["link"] == f"{studio.url}/#token={carol['token']}"
    studio.tokens["carol"] = carol["token"]
    assert studio.client("carol").get("/api/me").json()["role"] == "annotator"
    rejected(studio, owner.post("/api/owner/annotators", json={"name": ""}), 422)
    rejected(studio, owner.post("/api/owner/annotators", json={"name": "x", "role": "god"}), 422)
    # two people on the same queries: agreement, no SML weights yet
    answers = {
        "alice": {"q1": 1, "q2": 1, "q3": 0, "g1": 1},
        "bob": {"q1": 1, "q2": 0, "q3": 0, "g1": 1},
        carol["id"]: {"q1": 1, "q2": 1, "q3": 0, "g1": 0},
    }
    for who in ("alice", "bob"):
        c = studio.client(who)
        for qid, p in answers[who].items():
            assert (
                c.post("/api/judgements", json=judgement(qid, p, f"key-{who}-{qid}")).status_code
                == 201
            )
    ov = owner.get("/api/owner/overview").json()
    rows = {a["id"]: a for a in ov["annotators"]}
    assert rows["alice"]["n_judgements"] == 4 and rows["alice"]["agreement"] == 0.75
    assert rows["alice"]["sml_weight"] is None
    assert rows["owner"]["agreement"] is None and rows["owner"]["role"] == "owner"
    assert {"a": "alice", "b": "bob", "shared": 4, "agreed": 3} in ov["agreement_pairs"]
    c = studio.client("carol")
    for qid, p in answers[carol["id"]].items():
        c.post("/api/judgements", json=judgement(qid, p, f"key-carol-{qid}"))
    ov = owner.get("/api/owner/overview").json()
    weights = {a["id"]: a["sml_weight"] for a in ov["annotators"]}
    assert all(isinstance(weights[w], float) for w in ("alice", "bob", carol["id"]))
    assert weights["owner"] is None
    # rounds as metrics rows
    studio.store.rounds.publish(
        1, env_id="Toy-v0", env_steps=10, total_steps=20, metrics={"n_labels": 3}
    )
    ov = owner.get("/api/owner/overview").json()
    assert ov["rounds"][0]["n_labels"] == 3 and ov["rounds"][0]["round"] == 1
    # export: a zip of the open format, without undone judgements
    one = [{"step": 0, "t": 0.5, "value": 0.25}]
    studio.client("bob").post("/api/ratings", json={"query_id": "r1", "ratings": one})
    late = owner.post("/api/judgements", json=judgement("q1", 0, "key-owner-late"))
    jid = late.json()["judgement_id"]
    assert owner.delete(f"/api/judgements/{jid}").status_code == 200
    r = owner.get("/api/owner/export")
    assert r.status_code == 200 and r.headers["content-type"] == "application/zip"
    zf = zipfile.ZipFile(io.BytesIO(r.content))
    names = set(zf.namelist())
    assert "preflab-export/judgements.parquet" in names and "preflab-export/manifest.json" in names
    import pyarrow.parquet as pq

    table = pq.read_table(io.BytesIO(zf.read("preflab-export/judgements.parquet")))
    assert jid not in table.column("id").to_pylist() and table.num_rows == 12
    ratings = pq.read_table(io.BytesIO(zf.read("preflab-export/ratings.parquet"))).to_pylist()
    assert ratings == [
        {"annotator_id": "bob", "stream_id": "r1", "step": 0, "t": 0.5, "value": 0.25}
    ]


def test_owner_activity_reads_the_judgements_once_and_keeps_undone_ones_for_last_active(
    studio: Studio,
) -> None:
    """The activity panel: answers that count, last active with undone answers, from one
    read of the judgements per request."""
    from sqlalchemy import event

    alice, bob, owner = (studio.client(w) for w in ("alice", "bob", "owner"))
    for qid, p in (("q1", 1), ("q2", 0), ("q3", 1)):
        assert (
            alice.post("/api/judgements", json=judgement(qid, p, f"key-a-{qid}")).status_code == 201
        )
    last = alice.post("/api/judgements", json=judgement("g1", 1, "key-a-g1")).json()
    assert bob.post("/api/judgements", json=judgement("q1", 0, "key-b-q1")).status_code == 201
    assert alice.delete(f"/api/judgements/{last['judgement_id']}").status_code == 200
    every = {j.id: j for _s, j in studio.store.answers.judgements(include_retracted=True)}
    reads: list[str] = []

    def note(_conn, _cursor, statement, *_args) -> None:
        # the request's reads only: the studio's pre-render thread looks for unanswered queries
        # (a read that names judgements) every second, whenever it falls due
        if "FROM judgements" in statement and threading.current_thread().name != "prerender":
            reads.append(statement)

    event.listen(studio.store.engine, "before_cursor_execute", note)
    try:
        body = owner.get("/api/owner/activity").json()
    finally:
        event.remove(studio.store.engine, "before_cursor_execute", note)
    assert len(reads) == 1, reads
    rows = {a["id"]: a for a in body["annotators"]}
    assert rows["alice"]["n_answers"] == 3 and rows["bob"]["n_answers"] == 1
    assert rows["owner"]["n_answers"] == 0 and rows["owner"]["last_active"] is None
    assert rows["alice"]["last_active"] == every[last["judgement_id"]].created_at  # undone
    assert rows["bob"]["last_active"] == max(
        j.created_at for j in every.values() if j.annotator_id == "bob"
    )
    assert rows["alice"]["median_response_s"] == 2.5
    assert rows["alice"]["answers_per_min"] == 3.0  # 3 in the first minute


def test_concurrent_double_submissions_store_one_row(studio: Studio) -> None:
    from concurrent.futures import ThreadPoolExecutor

    clients = [studio.client("alice") for _ in range(8)]
    body = judgement("q1", key="key-concurrent-1")
    with ThreadPoolExecutor(8) as pool:
        responses = list(pool.map(lambda c: c.post("/api/judgements", json=body), clients))
    assert [r.status_code for r in responses] == [201] * 8
    assert sum(not r.json()["duplicate"] for r in responses) == 1
    assert len({r.json()["judgement_id"] for r in responses}) == 1
    assert len(studio.store.answers.by_annotator("alice")) == 1


@pytest.mark.postgres
def test_core_flow_on_postgres(postgres_url, tmp_path) -> None:
    import uuid

    from sqlalchemy import create_engine

    name = "studio_api_" + uuid.uuid4().hex[:8]
    admin = create_engine(postgres_url, isolation_level="AUTOCOMMIT")
    with admin.connect() as c:
        c.execute(text(f"CREATE DATABASE {name}"))
    admin.dispose()
    s = start_studio(tmp_path, media=False, store_url=postgres_url.rsplit("/", 1)[0] + "/" + name)
    try:
        alice = s.client("alice")
        assert alice.get("/api/queries/next").json()["query"]["id"] == "q3"
        time.sleep(StudioConfig().min_answer_s)  # answers sooner after serving are refused
        r1 = alice.post("/api/judgements", json=judgement())
        r2 = alice.post("/api/judgements", json=judgement())
        assert (r1.status_code, r2.json()["duplicate"]) == (201, True)
        assert counts(s.store)["judgements"] == 1
        rejected(s, alice.post("/api/judgements", json=judgement(p=0.0)), 409)
        jid = r1.json()["judgement_id"]
        s.store.rounds.set_cursor("trainer", s.store.answers.get(jid)[0])  # type: ignore[index]
        rejected(s, alice.delete(f"/api/judgements/{jid}"), 409)
        ok = [{"step": 0, "t": 0.0, "value": 0.5}, {"step": 1, "t": 0.1, "value": -0.5}]
        assert alice.post("/api/ratings", json={"query_id": "r1", "ratings": ok}).status_code == 201
        assert s.client("owner").get("/api/owner/overview").status_code == 200
        assert s.client("bob").get("/api/owner/overview").status_code == 403
    finally:
        s.stop()
