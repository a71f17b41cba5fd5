"""New rounds' clips are rendered as soon as the trainer stores the queries, before anyone asks
(no spinner on the first pair of a round), each query once, with the keys the page will ask for."""

from __future__ import annotations

import time
from pathlib import Path

from preflab.media import MediaConfig, MediaService
from preflab.records import Query
from preflab.store import FeedbackStore
from preflab.studio.clips import Prerenderer, query_view
from tests.media.test_service import recorded


def test_open_queries_are_rendered_before_anyone_asks(tmp_path: Path) -> None:
    store = FeedbackStore(tmp_path / "feedback.db", array_dir=tmp_path / "segments")
    segs = recorded("Pendulum-v1", 4, seed=3)
    store.segments.add(segs)
    media = MediaService(store, tmp_path / "cache", config=MediaConfig(size=64, workers=1))
    pre = Prerenderer(store, media)
    try:
        assert pre.render_new() == 0
        store.queries.add([Query(id="q1", kind="pair", a=(segs[0].id,), b=(segs[1].id,))])
        assert pre.render_new() == 1 and pre.render_new() == 0  # each query once
        store.queries.add([Query(id="q2", kind="pair", a=(segs[2].id,), b=(segs[3].id,))])
        assert pre.render_new() == 1
        view = query_view(store, media, store.queries.get("q2"), priority=0, fps=30)  # type: ignore[arg-type]
        keys = [c["media_key"] for c in (*view["a"], *view["b"])]
        deadline = time.monotonic() + 60
        while time.monotonic() < deadline and {media.status(k) for k in keys} != {"ready"}:
            time.sleep(0.1)
        assert {media.status(k) for k in keys} == {"ready"}
        assert media.renders == 4  # the page's request found the pre-rendered clips
    finally:
        media.close()
        store.close()


class _Recorded(MediaService):
    """The real media service, remembering the order clips were asked for."""

    asked: list[str]

    def request(self, segment_ids, priority=0, *, still=False):  # type: ignore[no-untyped-def]
        self.asked = [*getattr(self, "asked", []), *segment_ids]
        return super().request(segment_ids, priority, still=still)


def test_clips_are_rendered_in_a_persons_queue_order_and_withdrawn_ones_not(
    tmp_path: Path,
) -> None:
    store = FeedbackStore(tmp_path / "feedback.db", array_dir=tmp_path / "segments")
    segs = recorded("Pendulum-v1", 8, seed=4)
    store.segments.add(segs)
    media = _Recorded(store, tmp_path / "cache", config=MediaConfig(size=64, workers=1))
    pre = Prerenderer(store, media)
    ids = [s.id for s in segs]
    try:
        store.queries.add(
            [
                Query(id="old", kind="pair", a=(ids[0],), b=(ids[1],), round=0),
                Query(id="gone", kind="pair", a=(ids[2],), b=(ids[3],), round=0),
                Query(id="first", kind="pair", a=(ids[4],), b=(ids[5],), round=1),
                Query(id="second", kind="pair", a=(ids[6],), b=(ids[7],), round=1),
            ]
        )
        store.queries.withdraw(["gone"])
        assert pre.render_new() == 3
        # the person sees round 1 first, its first query first; a withdrawn query is never shown
        assert media.asked == [ids[4], ids[5], ids[6], ids[7], ids[0], ids[1]]
    finally:
        media.close()
        store.close()
