"""People rate whole episodes in a paced run (issue #25, Pref-GUIDE in the studio): the trainer
publishes recent whole episodes through the studio bridge each round, a person rates them, and
the next fit uses the windowed labels of those ratings together with the pairwise judgements;
a resumed run knows the streams and their ratings."""

from __future__ import annotations

import threading
import time
from pathlib import Path

import numpy as np

from preflab.aggregate import Feedback, IdentityAggregator
from preflab.aggregate.capped import SampledWindows
from preflab.aggregate.combined import CombinedAggregator
from preflab.config import TrainConfig
from preflab.records import Annotator, Judgement, Rating, Segment
from preflab.runs import open_loop, start_loop
from preflab.sources.ratings import rating_key
from preflab.sources.studio_bridge import StudioBridge, episode_stream, recent_episodes
from preflab.store import FeedbackStore
from preflab.testing.factories import make_segment


def _seg(episode: int, start: int, length: int = 5) -> Segment:
    obs = np.full((length, 2), episode * 1000 + start, np.float32)
    return make_segment(obs=obs, episode=episode, start=start, env_id="Toy-v0")


def test_recent_whole_episodes_newest_first() -> None:
    e0 = [_seg(0, k) for k in (0, 5, 10)]  # env 0: episode 0 ended (episode 1 began)
    e1 = [_seg(1, 0)]  # env 0's current episode: not whole yet
    gap = [_seg(1_000_000, 0), _seg(1_000_000, 10)]  # env 1: a segment missing
    late = [_seg(1_000_001, 5)]  # env 1's next episode, without its start
    e2 = [_seg(2_000_000, 0), _seg(2_000_000, 5)]  # env 2: ended after e0
    pool = [*e0, *gap, *late, *e2, *e1, _seg(2_000_001, 0)]
    got = recent_episodes(pool, 5)
    assert [[s.id for s in ep] for ep in got] == [[s.id for s in e2], [s.id for s in e0]]
    assert recent_episodes(pool, 1) == [e2]
    assert recent_episodes(pool, 5, skip={2_000_000}) == [e0]
    q = episode_stream(e0, round=3)
    assert q.kind == "rating" and q.a == tuple(s.id for s in e0) and q.round == 3
    assert q.meta["n_steps"] == 15 and q.id == episode_stream(e0, round=3).id  # id from the content


def test_the_bridge_stores_a_stream_once(tmp_path: Path) -> None:
    store = FeedbackStore(tmp_path / "f.db", array_dir=tmp_path / "seg")
    pool = [_seg(0, 0), _seg(0, 5), _seg(1, 0)]
    bridge = StudioBridge(store)
    (q,) = bridge.publish_episodes(0, pool, 3)
    assert [x.id for x in bridge.publish_episodes(1, pool, 3, known={q.id})] == [q.id]
    assert [x.id for x in store.queries.all()] == [q.id]
    assert [s.id for s in store.segments.get(list(q.a))] == list(q.a)
    assert bridge.publish_episodes(1, pool, 0) == []
    store.close()


class Person(threading.Thread):
    """Through its own store handle: answers every open pair query (prefers the first clip) and
    rates every published episode, step by step, by its true reward (rescaled into [−1, 1])."""

    def __init__(self, run: Path) -> None:
        super().__init__(daemon=True)
        self.run_dir = run
        self.stop = threading.Event()
        self.rated: list[str] = []

    def run(self) -> None:
        while not (self.run_dir / "feedback.db").exists():
            time.sleep(0.05)
        store = FeedbackStore(self.run_dir / "feedback.db", array_dir=self.run_dir / "segments")
        store.annotators.add(Annotator(id="ann", source="human", name="ann"))
        try:
            while not self.stop.is_set():
                gone = store.queries.withdrawn_ids()
                busy = False
                for q in store.queries.open_for("ann", limit=None):
                    if q.id in gone:
                        continue
                    busy = True
                    if q.kind == "rating":
                        rew = np.concatenate(
                            [s.true_rewards for s in store.segments.get(list(q.a))]
                        )
                        v = np.clip(rew / 8.0 + 1.0, -1.0, 1.0)
                        store.ratings.add(
                            Rating(annotator_id="ann", stream_id=q.id, step=k, t=k / 30, value=x)
                            for k, x in enumerate(v.tolist())
                        )
                        self.rated.append(q.id)
                    else:
                        j = Judgement(
                            id=f"j-{q.id}", query_id=q.id, annotator_id="ann", source="human", p=1
                        )
                        store.answers.add([j])
                if not busy:
                    time.sleep(0.05)
        finally:
            store.close()


def test_ratings_of_published_episodes_join_the_next_fit(tmp_path: Path) -> None:
    run = tmp_path / "run"
    cfg = TrainConfig.smoke(source="store", segment_length=10, rate_episodes=1)
    assert cfg.paced_by_labels and cfg.aggregator == "auto"
    person = Person(run)
    person.start()
    rows: list[dict] = []
    try:
        loop = start_loop(cfg, run, progress=rows.append)
        assert isinstance(loop.aggregator, CombinedAggregator)
        result = loop.run()
    finally:
        person.stop.set()
        person.join(10)
    store = loop.store
    streams = [q for q in store.queries.all() if q.kind == "rating"]
    assert streams and set(loop.rating_queries) == {q.id for q in streams}
    assert not [q for q in loop.queries.values() if q.kind == "rating"]  # not in the budget
    for q in streams:  # whole episodes of Pendulum (200 steps), in step order
        segs = store.segments.get(list(q.a))
        assert [s.start for s in segs] == list(range(0, 200, 10))
        assert len({s.episode for s in segs}) == 1
    assert result.ended_by == "labels" and result.n_judgements == cfg.total_labels
    rated = [q for q in streams if q.id in person.rated]
    assert rated and loop.ratings  # the person's ratings reached the loop
    assert {r.stream_id for r in loop.ratings} <= {q.id for q in rated}

    # the last fit: one label per judgement, plus Pref-GUIDE's windows over the ratings
    feedback = Feedback(
        queries={**loop.queries, **loop.rating_queries},
        judgements=loop.judgements,
        ratings=loop.ratings,
        segments=loop.segments,
    )
    n_pairs = len(IdentityAggregator().labels(feedback))
    n_windows = len(SampledWindows(window=10, delta=0.1, max_labels=20_000).labels(feedback))
    assert n_pairs == cfg.total_labels and n_windows > 0
    assert result.n_labels == n_pairs + n_windows
    assert any(r["n_labels"] > r["n_judgements"] for r in rows)  # fits used the ratings
    stored = store.ratings.all()  # the person may have rated the last stream after the last fit
    store.close()

    # resume: the run knows its streams and reads every stored rating of them once
    again = open_loop(run)
    try:
        assert set(again.rating_queries) == set(loop.rating_queries)
        assert not again._orphans_pending
        again._take_ratings()
        assert sorted(map(rating_key, again.ratings)) == sorted(map(rating_key, stored))
        again._take_ratings()
        assert len(again.ratings) == len(stored)
        assert not [q for q in again.queries.values() if q.kind == "rating"]
    finally:
        again.close()
