"""Task instructions, the owner's activity panel, revoking an annotator and 'Finish now'
(issue #25) against a real uvicorn server and a real SQLite store."""

from __future__ import annotations

import copy
import statistics
import threading
from collections.abc import Iterator

import pytest

from preflab.studio import StudioConfig
from preflab.studio.schemas import TASK_MAX_CHARS
from tests.studio.api_server import Studio, counts, start_studio


@pytest.fixture
def studio(tmp_path) -> Iterator[Studio]:
    # a long token cache: revoking must not wait for it to expire
    s = start_studio(tmp_path, config=StudioConfig(token_cache_s=3600.0))
    yield s
    s.stop()


def answer(qid: str, key: str, rt: float, p: float = 1.0) -> dict:
    return {"query_id": qid, "p": p, "response_time_s": rt, "client_key": key}


def test_task_is_set_by_the_owner_and_read_by_everyone(studio: Studio) -> None:
    alice, owner = studio.client("alice"), studio.client("owner")
    assert alice.get("/api/task").json() == {"text": "", "updated_at": None}
    assert studio.client().get("/api/task").status_code == 401
    text = "Make the hopper move backwards, smoothly & <b>without</b> falling."
    r = owner.put("/api/owner/task", json={"text": text})
    assert r.status_code == 200 and r.json()["text"] == text
    got = alice.get("/api/task").json()
    assert got["text"] == text and got["updated_at"] > 0
    assert studio.store.settings.get("task")["text"] == text
    # annotators may not set it; too long or wrong type is 422 and changes nothing
    assert alice.put("/api/owner/task", json={"text": "x"}).status_code == 403
    n = counts(studio.store)
    assert (
        owner.put("/api/owner/task", json={"text": "x" * (TASK_MAX_CHARS + 1)}).status_code == 422
    )
    assert owner.put("/api/owner/task", json={"text": 5}).status_code == 422
    assert counts(studio.store) == n and alice.get("/api/task").json()["text"] == text
    assert owner.put("/api/owner/task", json={"text": "x" * TASK_MAX_CHARS}).status_code == 200
    # a plain string set from the trainer (--task) is read too; empty clears
    studio.store.settings.set("task", "Balance the pole")
    assert alice.get("/api/task").json()["text"] == "Balance the pole"
    assert owner.put("/api/owner/task", json={"text": "  "}).json()["text"] == ""


def test_activity_rates_medians_and_reward_accuracy(studio: Studio) -> None:
    alice, bob, owner = studio.client("alice"), studio.client("bob"), studio.client("owner")
    for k, (qid, rt) in enumerate([("q1", 2.0), ("q2", 5.0), ("q3", 3.0)]):
        assert (
            alice.post("/api/judgements", json=answer(qid, f"alice-key-{k}", rt)).status_code == 201
        )
    r = bob.post("/api/judgements", json=answer("q1", "bob-key-000", 7.0))
    assert r.status_code == 201
    # bob undoes it: it no longer counts, but he was active
    assert bob.delete(f"/api/judgements/{r.json()['judgement_id']}").status_code in (200, 204)
    studio.store.rounds.publish(
        0, env_id="Toy-v0", env_steps=10, total_steps=100, metrics={"reward_accuracy": 0.625}
    )
    studio.store.rounds.publish(1, env_id="Toy-v0", env_steps=20, total_steps=100, metrics={})
    body = owner.get("/api/owner/activity").json()
    rows = {a["id"]: a for a in body["annotators"]}
    a = rows["alice"]
    assert a["n_answers"] == 3
    assert a["median_response_s"] == statistics.median([2.0, 5.0, 3.0])
    assert a["answers_per_min"] == 3.0  # 3 answers within the first minute's window
    assert a["last_active"] is not None and a["revoked"] is False
    assert rows["bob"]["n_answers"] == 0 and rows["bob"]["last_active"] is not None
    assert rows["owner"]["answers_per_min"] is None and rows["owner"]["last_active"] is None
    assert (body["reward_accuracy"], body["reward_accuracy_round"]) == (0.625, 0)
    assert body["finish"] is None
    assert alice.get("/api/owner/activity").status_code == 403


def test_a_lookup_that_read_a_token_before_its_revoke_does_not_cache_it(
    studio: Studio, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The owner revokes alice while a request of hers is between its store lookup (which read
    her token as valid) and the token cache: that request may pass, but it must not put her
    back in the cache, where she would stay signed in for token_cache_s (an hour here)."""
    annotators = studio.store.annotators  # the app's own store
    lookup = annotators.by_token
    revoked: list[int] = []

    def revoked_meanwhile(token: str):
        found = lookup(token)
        if found is not None and found.id == "alice" and not revoked:
            monkeypatch.setattr(annotators, "by_token", lookup)
            revoked.append(
                studio.client("owner").post("/api/owner/annotators/alice/revoke").status_code
            )
        return found

    monkeypatch.setattr(annotators, "by_token", revoked_meanwhile)
    alice = studio.client("alice")
    assert alice.get("/api/me").status_code == 200  # looked up before the revoke
    assert revoked == [200]
    assert alice.get("/api/me").status_code == 401
    assert alice.post("/api/judgements", json=answer("q1", "alice-key-0", 2.0)).status_code == 401
    assert studio.client("bob").get("/api/me").status_code == 200


def test_revoke_is_effective_at_once_despite_the_token_cache(studio: Studio) -> None:
    alice, owner = studio.client("alice"), studio.client("owner")
    assert alice.get("/api/me").status_code == 200  # now in the token cache (1 h)
    assert alice.post("/api/judgements", json=answer("q1", "alice-key-0", 2.0)).status_code == 201
    r = owner.post("/api/owner/annotators/alice/revoke")
    assert r.status_code == 200 and r.json()["id"] == "alice"
    assert alice.get("/api/me").status_code == 401
    assert alice.post("/api/judgements", json=answer("q2", "alice-key-1", 2.0)).status_code == 401
    assert (
        studio.client().post("/api/login", json={"token": studio.tokens["alice"]}).status_code
        == 401
    )
    rows = {a["id"]: a for a in owner.get("/api/owner/activity").json()["annotators"]}
    assert rows["alice"]["revoked"] is True and rows["alice"]["n_answers"] == 1
    assert rows["bob"]["revoked"] is False
    assert studio.client("bob").get("/api/me").status_code == 200
    # a new link brings her back
    studio.store.annotators.set_token("alice", "alice-new-token-123")
    studio.tokens["alice"] = "alice-new-token-123"
    assert studio.client("alice").get("/api/me").status_code == 200
    rows = {a["id"]: a for a in owner.get("/api/owner/activity").json()["annotators"]}
    assert rows["alice"]["revoked"] is False
    # unknown ids, the owner, annotators revoking
    assert owner.post("/api/owner/annotators/nobody/revoke").status_code == 404
    assert owner.post("/api/owner/annotators/owner/revoke").status_code == 409
    assert owner.post("/api/owner/annotators/b%20ad/revoke").status_code == 422
    assert studio.client("bob").post("/api/owner/annotators/alice/revoke").status_code == 403
    assert studio.client("owner").get("/api/me").status_code == 200


def test_finish_now_is_owner_only_and_kept(studio: Studio) -> None:
    owner = studio.client("owner")
    assert studio.client("alice").post("/api/owner/finish").status_code == 403
    assert studio.store.settings.get("finish") is None
    r = owner.post("/api/owner/finish")
    assert r.status_code == 200 and r.json()["by"] == "owner"
    assert studio.store.settings.get("finish") == r.json()
    assert owner.post("/api/owner/finish").json() == r.json()  # the first request stays
    assert owner.get("/api/owner/activity").json()["finish"] == r.json()


def settings_write_runs_first(studio: Studio, monkeypatch: pytest.MonkeyPatch, meanwhile) -> list:
    """Make the app's next write of a run setting run ``meanwhile()`` (another request, as
    from a second tab or studio worker) just before its transaction begins, i.e. after any
    read the route made outside that transaction; returns what ``meanwhile`` returned."""
    settings = studio.store.settings  # the app's own store
    hooked = copy.copy(settings.db)  # the same engines; only the settings' writes see the hook
    write = hooked.write
    done: list = []
    fired = threading.Event()

    def write_after_meanwhile():
        if not fired.is_set():
            fired.set()  # the request meanwhile writes straight on
            done.append(meanwhile())
        return write()

    monkeypatch.setattr(hooked, "write", write_after_meanwhile)
    monkeypatch.setattr(settings, "db", hooked)
    return done


def test_two_revokes_at_once_are_both_recorded(
    studio: Studio, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Bob's revoke is recorded while alice's is between reading the "revoked" setting and
    writing it back: the activity page still shows both revoked."""
    owner = studio.client("owner")
    done = settings_write_runs_first(
        studio,
        monkeypatch,
        lambda: studio.client("owner").post("/api/owner/annotators/bob/revoke").status_code,
    )
    r = owner.post("/api/owner/annotators/alice/revoke")
    assert r.status_code == 200 and done == [200]
    assert sorted(studio.store.settings.get("revoked")) == ["alice", "bob"]
    rows = {a["id"]: a for a in owner.get("/api/owner/activity").json()["annotators"]}
    assert rows["alice"]["revoked"] is True and rows["bob"]["revoked"] is True
    assert rows["owner"]["revoked"] is False


def test_two_finish_presses_at_once_keep_the_first(
    studio: Studio, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A second "Finish now" lands while the first press is between its read and its write:
    the request stored first stays, and both presses answer with it."""
    owner = studio.client("owner")
    done = settings_write_runs_first(
        studio, monkeypatch, lambda: studio.client("owner").post("/api/owner/finish").json()
    )
    r = owner.post("/api/owner/finish")
    assert r.status_code == 200 and len(done) == 1
    stored = studio.store.settings.get("finish")
    assert stored == done[0] == r.json()
    assert owner.get("/api/owner/activity").json()["finish"] == stored


def test_cli_sets_the_task(tmp_path, capsys) -> None:
    from preflab.cli.main import main
    from preflab.store import FeedbackStore
    from tests.studio.api_server import seed_run

    run = tmp_path / "run"
    run.mkdir()
    store = FeedbackStore(run / "feedback.db", array_dir=run / "segments")
    seed_run(store)
    store.close()
    assert main(["studio", "task", "  Balance the pole upright  ", str(run)]) == 0
    assert "Balance the pole upright" in capsys.readouterr().out
    store = FeedbackStore(run / "feedback.db", array_dir=run / "segments")
    assert store.settings.get("task")["text"] == "Balance the pole upright"
    store.close()
    assert main(["studio", "task", "x" * (TASK_MAX_CHARS + 1), str(run)]) == 1
    err = capsys.readouterr().err
    assert "at most 500" in err and "Traceback" not in err


def test_a_round_that_cannot_be_built_is_503_once_logged(tmp_path, caplog) -> None:
    """A pool whose behaviours cannot be compared (two envs' observations mixed) answers 503
    with the reason, and its traceback is logged once, not on every poll and request."""
    import logging

    import numpy as np

    from preflab.testing.factories import make_segments
    from preflab_bench._image_pool import square_segments

    s = start_studio(tmp_path)
    try:
        flat = make_segments(3, rng=np.random.default_rng(0), obs_dim=3, env_id="Toy-v0")
        segs = square_segments(3) + flat
        s.store.segments.add(segs)
        s.store.rounds.publish_pool(0, [x.id for x in segs], member_returns=None, meta={})
        alice = s.client("alice")
        with caplog.at_level(logging.ERROR, logger="preflab.studio.groupwise_cache"):
            for _ in range(3):
                r = alice.get("/api/groupwise/round")
                assert r.status_code == 503, r.text
                assert "could not be built" in r.json()["detail"]
                assert "image observations" in r.json()["detail"]
        assert sum("building round 0 failed" in m for m in caplog.messages) <= 1
    finally:
        s.stop()
