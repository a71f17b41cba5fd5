"""The store owns what counts: undone (retracted) judgements are left out of every read unless
asked for, readers follow ratings by sequence number, and the trainer's reader (StoreSource)
collects only judgements that count, each once, on SQLite and PostgreSQL."""

from __future__ import annotations

import numpy as np
import pytest

from preflab.errors import ConflictError
from preflab.records import Judgement, Query, Rating
from preflab.sources import StoreSource
from preflab.store import FeedbackStore
from preflab.store.llm_cache import LLMCache
from preflab.testing.factories import make_segments


def _store(url: str, tmp_path) -> FeedbackStore:
    store = FeedbackStore(url, array_dir=tmp_path / "segments")
    rng = np.random.default_rng(5)
    segs = make_segments(4, rng=rng, length=4, id_prefix="s", env_id="E", episode=range(4))
    store.segments.add(segs)
    store.queries.add(
        [
            Query(id="q1", kind="pair", a=("s0",), b=("s1",), round=1),
            Query(id="q2", kind="pair", a=("s2",), b=("s3",), round=1),
            Query(id="r1", kind="rating", a=("s0", "s1"), round=1),
        ]
    )
    return store


def _j(jid: str, qid: str, who: str = "alice", p: float | None = 1.0) -> Judgement:
    return Judgement(id=jid, query_id=qid, annotator_id=who, source="human", p=p)


def test_retracted_judgements_never_count_unless_asked_for(store_url, tmp_path) -> None:
    store = _store(store_url, tmp_path)
    try:
        store.answers.add([_j("j1", "q1"), _j("j2", "q2"), _j("j3", "q1", "bob", 0.0)])
        store.answers.retract("j2", "alice")
        assert [j.id for _s, j in store.answers.judgements()] == ["j1", "j3"]
        assert [j.id for _s, j in store.answers.judgements(include_retracted=True)] == [
            "j1",
            "j2",
            "j3",
        ]
        assert [j.id for _s, j in store.answers.judgements(source="human", after_seq=1)] == ["j3"]
        held = [j for _s, j in store.answers.judgements(include_retracted=True)]
        assert [j.id for j in store.answers.counted(held)] == ["j1", "j3"]
        assert store.answers.counted([]) == []
        # recent answers: newest first, undone ones out, undoable until the trainer collected
        assert [(j.id, u) for j, u in store.answers.recent("alice")] == [("j1", True)]
        seq1 = store.answers.get("j1")[0]  # type: ignore[index]
        store.answers.mark_collected(seq1)
        assert [(j.id, u) for j, u in store.answers.recent("alice")] == [("j1", False)]
        assert [(j.id, u) for j, u in store.answers.recent("bob")] == [("j3", True)]
        with pytest.raises(ConflictError, match="already collected"):
            store.answers.retract("j1", "alice")
        assert store.answers.retracted_ids() == {"j2"}
    finally:
        store.close()


def test_ratings_after_seq_follow_storage_order(store_url, tmp_path) -> None:
    store = _store(store_url, tmp_path)
    try:
        late = Rating(annotator_id="bob", stream_id="r1", step=0, t=0.1, value=1.0)
        early = Rating(annotator_id="alice", stream_id="r1", step=3, t=0.9, value=-1.0)
        store.ratings.add([early])
        store.ratings.add([late])
        assert store.ratings.all() == [early, late]  # by stream, annotator, time
        rows = store.ratings.after(0)
        assert [r for _s, r in rows] == [early, late]  # by sequence number
        assert store.ratings.after(rows[0][0]) == [rows[1]]
        assert store.ratings.after(rows[1][0]) == []
    finally:
        store.close()


def test_store_source_collects_what_counts_once(store_url, tmp_path) -> None:
    store = _store(store_url, tmp_path)
    try:
        src = StoreSource(store)
        store.answers.add([_j("j1", "q1"), _j("j2", "q2"), _j("j3", "q2", "bob", 0.0)])
        store.answers.retract("j2", "alice")  # undone before the trainer read it
        assert [j.id for j in src.collect()] == ["j1", "j3"]
        with pytest.raises(ConflictError, match="already collected"):
            store.answers.retract("j3", "bob")  # collected: counts for good
        store.answers.add([_j("j4", "q2", "alice", 0.5)])
        assert [j.id for j in src.collect()] == ["j4"]
        assert src.collect() == []
        state = src.state()
        top = store.answers.max_seq()
        # the undone judgement's seq is a gap that closes: nothing stays pending
        assert state["after_seq"] == top and state["low"] == top and state["pending"] == []
        # a resumed reader reads nothing twice and never the undone judgement
        again = StoreSource(store)
        again.load_state(state)
        assert again.collect() == []
        fresh = StoreSource(store)
        assert [j.id for j in fresh.collect()] == ["j1", "j3", "j4"]
    finally:
        store.close()


def test_store_source_reads_ratings_by_seq_with_their_streams(store_url, tmp_path) -> None:
    store = _store(store_url, tmp_path)
    try:
        src = StoreSource(store)
        assert len(src.ratings()) == 0
        first = Rating(annotator_id="alice", stream_id="r1", step=1, t=0.5, value=0.5)
        store.ratings.add([first])
        batch = src.ratings()
        assert batch.ratings == (first,) and [q.id for q in batch.queries] == ["r1"]
        assert [s.id for s in batch.segments] == ["s0", "s1"]
        assert len(src.ratings()) == 0  # each rating once
        second = Rating(annotator_id="bob", stream_id="r1", step=2, t=0.2, value=-0.5)
        store.ratings.add([second])
        assert src.ratings().ratings == (second,)
        assert src.ratings_after == store.ratings.max_seq()
    finally:
        store.close()


def test_llm_cache_is_its_own_part_and_first_answer_wins(store_url, tmp_path) -> None:
    store = _store(store_url, tmp_path)
    try:
        assert isinstance(store.llm_cache, LLMCache)
        store.llm_cache.put("k", "m", "prompt", "yes")
        store.llm_cache.put_cached_response("k", "m", "prompt", "no")
        assert store.llm_cache.get_cached_response("k") == "yes" == store.llm_cache.get("k")
        assert store.llm_cache.get("other") is None
    finally:
        store.close()
