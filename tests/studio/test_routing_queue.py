"""Routing with people in the studio (issue 58): the queries routed to people reach the person
through the studio's HTTP API (``GET /api/queries/next``, ``POST /api/judgements``, as the page
calls them, against a real uvicorn server and SQLite store) and the rest do not; the model's and
the AI's answers are stored by the router, and people's answers come back through it."""

from __future__ import annotations

import time
from collections.abc import Iterator

import numpy as np
import pytest

from preflab.kinds import PAIR
from preflab.reward.batch import SegmentBatch
from preflab.sources.human import StoreSource
from preflab.sources.routing.config import RoutingConfig
from preflab.sources.routing.router import RoutingSource
from preflab.sources.simulated_judge import SimulatedJudge, SimulatedJudgeConfig
from preflab.studio.config import StudioConfig
from preflab.testing.factories import make_segment
from tests.studio.api_server import Studio, start_studio


class TableModel:
    """The RewardModel protocol with every member's return of each segment given by id."""

    def __init__(self, returns: dict[str, list[float]]) -> None:
        self.returns = returns

    def predict(self, obs: np.ndarray, acts: np.ndarray | None = None) -> np.ndarray:
        raise AssertionError("routing reads segment returns only")

    def segment_returns(self, batch: SegmentBatch) -> np.ndarray:
        return np.array([self.returns[i] for i in batch.ids], np.float64).T


@pytest.fixture
def studio(tmp_path) -> Iterator[Studio]:
    s = start_studio(tmp_path, config=StudioConfig(min_answer_s=0.0, undo_grace_s=0.0))
    s.store.queries.withdraw([q.id for q in s.store.queries.all()])  # only this run's queries
    yield s
    s.stop()


def test_people_see_only_the_queries_routed_to_them(studio: Studio) -> None:
    store = studio.store
    rng = np.random.default_rng(0)
    returns = {f"r{k}": float(v) for k, v in enumerate(rng.normal(0, 5, 16))}
    segs = {k: make_segment(k, true_rewards=[v], env_id="Toy-v0") for k, v in returns.items()}
    ids = list(segs)
    # the model is sure about the first four pairs (members agree by far), unsure of the rest
    model = TableModel(
        {k: ([v * 100, v * 100] if ids.index(k) < 8 else [v, -v]) for k, v in returns.items()}
    )
    qs = [PAIR.query(ids[2 * k], ids[2 * k + 1], round=1) for k in range(8)]
    store.segments.add(list(segs.values()))
    store.queries.add(qs)  # the loop stores its queries before the source sees them
    cfg = RoutingConfig(people="store", calibration_share=0.5, min_calibration=1, target_error=0.45)
    router = RoutingSource(
        cfg,
        np.random.default_rng(1),
        ai=SimulatedJudge(SimulatedJudgeConfig(flip_rate=0.0), np.random.default_rng(2)),
        people=StoreSource(store, grace_s=0.0),
        store=store,
    )
    router.watch_model(lambda: model)
    for _ in range(3):
        router.calibration.add(1.0, True)  # the AI is trusted at confidence 1
    router.submit(qs, segs)
    theirs = {q for q, r in router.routes.items() if r["answerer"] == "people"}
    mine = {q.id for q in qs} - theirs
    assert theirs and mine  # both kinds of route happen in this set-up
    assert {router.routes[q.id]["answerer"] for q in qs[:4]} == {"model"}
    # people's queries say in their stored meta why they went to people (the export carries it)
    by_id = {q.id: q for q in store.queries.all()}
    assert {q for q in by_id if "route" in by_id[q].meta} == theirs
    assert all(by_id[q].meta["route"] == router.routes[q] for q in theirs)
    # the router stored its own answers (the loop stores nothing with people in the studio)
    stored = {j.query_id for _s, j in store.answers.judgements()}
    assert stored == mine

    alice = studio.client("alice")
    served: list[str] = []
    for k in range(len(qs) + 1):
        q = alice.get("/api/queries/next", params={"kind": "pair"}).json()["query"]
        if q is None:
            break
        served.append(q["id"])
        r = alice.post(
            "/api/judgements",
            json={"query_id": q["id"], "p": 1.0, "client_key": f"key-route-{k:04d}"},
        )
        assert r.status_code == 201, r.text
    assert set(served) == theirs and len(served) == len(theirs)

    time.sleep(0.05)
    got = router.collect()
    people = [j for j in got if j.source == "human"]
    assert {j.query_id for j in people} == theirs and all(j.annotator_id == "alice" for j in people)
    assert {j.query_id for j in got if j.source != "human"} == mine  # handed out once
    assert router.labels["people"] == len(theirs)
    calibrated = [q for q in theirs if router.routes[q]["reason"].startswith("calibration")]
    assert router.calibration.n == 3 + len(calibrated)
    assert router.collect() == []
