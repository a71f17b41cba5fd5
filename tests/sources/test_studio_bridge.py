"""The trainer's studio hook (issue #10): each round's pool and ensemble returns go to the store;
group queries composed in the studio join the run and train the reward."""

from __future__ import annotations

import threading

import numpy as np
import pytest

from preflab.errors import DataError
from preflab.records import Judgement, Query
from preflab.reward import FitConfig, RewardConfig
from preflab.runs import train
from preflab.sources import StoreSource
from preflab.sources.studio_bridge import STUDIO_CREATED, publish_round_pool, studio_queries
from preflab.store import FeedbackStore
from preflab_bench._studio_groupwise_data import pendulum_segments


def test_pool_round_trip_and_errors(tmp_path) -> None:
    store = FeedbackStore(tmp_path / "f.db", array_dir=tmp_path / "segments")
    assert store.rounds.pool() is None and store.rounds.pool(0) is None
    segs = pendulum_segments(6, 10, 0)
    publish_round_pool(store, 0, segs, None)
    pool = store.rounds.pool(0)
    assert pool["segment_ids"] == [s.id for s in segs] and pool["member_returns"] is None
    assert [s.id for s in store.segments.get(pool["segment_ids"])] == pool["segment_ids"]
    store.rounds.publish_pool(3, [s.id for s in segs[:2]], member_returns=[[1.0, 2.0], [0.5, -1.0]])
    assert store.rounds.pool()["round"] == 3  # the latest
    store.rounds.publish_pool(3, [s.id for s in segs[2:4]])  # re-publishing replaces
    assert store.rounds.pool(3)["segment_ids"] == [s.id for s in segs[2:4]]
    with pytest.raises(DataError, match="twice"):
        store.rounds.publish_pool(4, [segs[0].id, segs[0].id])
    with pytest.raises(DataError, match="members"):
        store.rounds.publish_pool(4, [segs[0].id], member_returns=[[1.0, 2.0]])
    store.close()


def test_studio_group_query_trains_the_reward(tmp_path, pendulum_ppo_config) -> None:
    """A person's studio-composed group answer, stored before the trainer collects, becomes
    max(m, n) labels of the next fit; every round's pool is published with returns once fitted."""
    run = tmp_path / "run"
    run.mkdir()
    store = FeedbackStore(run / "feedback.db", array_dir=run / "segments")
    segs = pendulum_segments(7, 25, 5)
    store.segments.add(segs)
    q = Query(
        id="q-gstudio-1",
        kind="group",
        a=tuple(s.id for s in segs[:4]),
        b=tuple(s.id for s in segs[4:]),
        meta={"created_by": STUDIO_CREATED, "annotator_id": "h-ann"},
    )
    store.queries.add([q])
    store.answers.add(
        [Judgement(id="j-studio-1", query_id=q.id, annotator_id="h-ann", source="human", p=1.0)]
    )
    assert [x.id for x in studio_queries(store, set())] == [q.id]
    assert studio_queries(store, {q.id}) == []
    cfg = pendulum_ppo_config(
        total_steps=640,
        initial_steps=256,
        steps_per_round=384,
        segment_length=25,
        total_labels=4,
        initial_label_frac=0.5,
        pool_size=30,
        agent_kwargs='{"n_steps": 128}',
        reward=RewardConfig(members=3, hidden=(16, 16)),
        fit=FitConfig(epochs=2),
        first_fit_epochs=3,
        wait_for_labels_s=0.0,
    )
    answered: set[str] = {q.id}
    stop = threading.Event()

    def person() -> None:  # answers the trainer's own pair queries as they appear
        while not stop.is_set():
            for x in store.queries.all():
                if x.id not in answered:
                    answered.add(x.id)
                    store.answers.add(
                        [
                            Judgement(
                                id=f"j-{x.id}",
                                query_id=x.id,
                                annotator_id="h-ann",
                                source="human",
                                p=1.0,
                            )
                        ]
                    )
            stop.wait(0.05)

    t = threading.Thread(target=person, daemon=True)
    t.start()
    try:
        summary = train(cfg, run_dir=run, source=StoreSource(store))
    finally:
        stop.set()
        t.join(5)
    assert summary.n_labels >= max(len(q.a), len(q.b))  # the studio answer's 4 labels count
    pools = [store.rounds.pool(r) for r in range(3)]
    assert pools[0] is not None and pools[1] is not None
    assert pools[0]["member_returns"] is None  # before the first fit
    assert np.asarray(pools[1]["member_returns"]).shape == (3, len(pools[1]["segment_ids"]))
    assert len(pools[1]["segment_ids"]) <= cfg.pool_size
    store.close()
