"""People's feedback through the store (:class:`preflab.sources.human.StoreSource`): the
rating streams a batch of new ratings names are read by id, in the order stored."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest

from preflab.records import Query, Rating
from preflab.sources import StoreSource
from preflab.store import FeedbackStore
from preflab.testing.factories import make_segments
from tests.store.reads import count_query_reads


def test_new_ratings_read_only_the_streams_they_name_in_store_order(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """StoreSource.ratings used to read every query of the run whenever ratings arrived."""
    store = FeedbackStore(tmp_path / "feedback.db", array_dir=tmp_path / "segments")
    segs = make_segments(6, rng=np.random.default_rng(3), length=4, id_prefix="s", env_id="E")
    store.segments.add(segs)
    store.queries.add([Query(id="r2", kind="rating", a=("s2", "s3"), round=1)])
    store.queries.add([Query(id=f"q{k}", kind="pair", a=("s0",), b=("s1",)) for k in range(40)])
    store.queries.add(
        [
            Query(id="r1", kind="rating", a=("s0", "s1"), round=1),
            Query(id="r3", kind="rating", a=("s4", "s5"), round=1),
        ]
    )
    read = count_query_reads(monkeypatch)
    try:
        src = StoreSource(store)
        store.ratings.add(
            [
                Rating(annotator_id="alice", stream_id="r1", step=1, t=0.5, value=0.5),
                Rating(annotator_id="bob", stream_id="r2", step=0, t=0.1, value=-0.5),
            ]
        )
        batch = src.ratings()
        assert [q.id for q in batch.queries] == ["r2", "r1"]  # the order stored
        assert sorted(read) == ["r1", "r2"]  # not the 40 pairs nor r3
        assert [s.id for s in batch.segments] == ["s0", "s1", "s2", "s3"]
        assert len(batch.ratings) == 2
    finally:
        store.close()
