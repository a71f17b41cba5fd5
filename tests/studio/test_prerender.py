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
from tests.store.reads import count_query_reads


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


class _Asked:
    """A media service stand-in that remembers which clips were asked for, in order."""

    def __init__(self) -> None:
        self.asked: list[str] = []

    def key_for(self, segment_ids):  # type: ignore[no-untyped-def]
        return "0" * 32

    def request(self, segment_ids, priority, *, still=False):  # type: ignore[no-untyped-def]
        assert priority == 2 and still
        self.asked += list(segment_ids)
        return "0" * 32

    def status(self, key: str) -> str:
        return "queued"

    def path(self, key: str) -> None:
        return None


def _pair(qid: str, round: int = 0) -> Query:
    return Query(id=qid, kind="pair", a=(f"{qid}-a",), b=(f"{qid}-b",), round=round)


def test_each_new_open_query_is_rendered_once_as_it_comes(tmp_path: Path) -> None:
    """A look renders the queries stored since the last one that are still open: newest round
    first (a round stored after a newer one too), never one answered or withdrawn before it was
    seen, and none twice (answered, withdrawn or undone after it was rendered)."""
    from preflab.testing.factories import make_judgement

    store = FeedbackStore(tmp_path / "feedback.db", array_dir=tmp_path / "segments")
    media = _Asked()
    pre = Prerenderer(store, media)  # type: ignore[arg-type]
    try:
        store.queries.add([_pair("q1", 0), _pair("q2", 0)])
        store.queries.withdraw(["q2"])
        assert pre.render_new() == 1 and media.asked == ["q1-a", "q1-b"]
        store.queries.add([_pair("q3", 2)])
        store.queries.add([_pair("q4", 1), _pair("q5", 2)])  # an older round stored later
        assert pre.render_new() == 3
        assert media.asked[2:] == ["q3-a", "q3-b", "q5-a", "q5-b", "q4-a", "q4-b"]
        store.queries.add([_pair("q6"), _pair("q7"), _pair("q8")], withdrawn=["q7"])
        store.answers.add([make_judgement("j6", "q6", "h1", 1.0)])  # answered before a look
        store.answers.add([make_judgement("j1", "q1", "h1", 1.0)])
        store.answers.retract("j1", "h1")  # q1 answered and undone: rendered already
        store.queries.withdraw(["q3"])
        assert pre.render_new() == 1 and media.asked[8:] == ["q8-a", "q8-b"]
        assert pre.render_new() == 0 and len(media.asked) == 10
        # a fresh watcher (the studio restarted) renders every query with no answer (an
        # undone one counts: q1 is not rendered ahead again) nor withdrawn, once
        again = Prerenderer(store, _Asked())  # type: ignore[arg-type]
        assert again.render_new() == 3 and again.render_new() == 0
        assert again.media.asked == ["q5-a", "q5-b", "q4-a", "q4-b", "q8-a", "q8-b"]  # type: ignore[union-attr]
    finally:
        store.close()


def test_a_look_reads_only_the_queries_stored_since_the_last(tmp_path: Path, monkeypatch) -> None:
    """The watcher looks every second: it used to read every open query of the run and filter
    out those it had seen (158 ms a look at 20k queries). It reads on from the last seq read."""
    store = FeedbackStore(tmp_path / "feedback.db", array_dir=tmp_path / "segments")
    pre = Prerenderer(store, _Asked())  # type: ignore[arg-type]
    read = count_query_reads(monkeypatch)
    try:
        store.queries.add([_pair(f"q{k}") for k in range(50)])
        assert pre.render_new() == 50 and len(read) == 50
        read.clear()
        assert pre.render_new() == 0 and read == []  # nothing new: nothing read
        store.queries.add([_pair("q-new")])
        assert pre.render_new() == 1 and read == ["q-new"]
    finally:
        store.close()
