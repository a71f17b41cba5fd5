"""The trainer's reader collects a studio answer only after its undo grace period (issue #25):
undo within the grace period always succeeds, even while a reader collects, and exact resume
still reads every answer once."""

from __future__ import annotations

import dataclasses
import threading
import time
from collections.abc import Iterator

import numpy as np
import pytest

from preflab.errors import ConflictError, DataError
from preflab.records import Annotator, Judgement, Query
from preflab.sources import StoreSource
from preflab.store import FeedbackStore
from preflab.testing.factories import make_segments


class Clock:
    """A settable wall clock (seconds) for the reader."""

    def __init__(self, t: float) -> None:
        self.t = t

    def __call__(self) -> float:
        return self.t


@pytest.fixture
def store(tmp_path) -> Iterator[FeedbackStore]:
    s = FeedbackStore(tmp_path / "feedback.db", array_dir=tmp_path / "segments")
    segs = make_segments(8, rng=np.random.default_rng(5), env_id="Toy-v0", episode=range(8))
    s.segments.add(segs)
    s.queries.add(
        [Query(id=f"q{k}", kind="pair", a=(segs[k].id,), b=(segs[k + 1].id,)) for k in range(7)]
    )
    s.annotators.add(Annotator(id="ann", source="human", name="ann"))
    yield s
    s.close()


def studio_answer(qid: str, n: int, created_at: float | None = None) -> Judgement:
    return Judgement(
        id=f"j-{qid}-{n}",
        query_id=qid,
        annotator_id="ann",
        source="human",
        p=1.0,
        created_at=time.time() if created_at is None else created_at,
        meta={"ui": "studio", "client_key": f"key-{qid}-{n}"},
    )


def test_answers_wait_for_their_grace_period_and_stay_undoable(store: FeedbackStore) -> None:
    t0 = 1_000_000.0
    clock = Clock(t0)
    src = StoreSource(store, grace_s=10.0, clock=clock)
    store.answers.add([studio_answer("q0", 0, t0), studio_answer("q1", 0, t0 + 4)])
    clock.t = t0 + 9.9
    assert src.collect() == []
    store.answers.retract("j-q1-0", "ann")  # inside its grace period: undone
    clock.t = t0 + 10.0
    assert [j.id for j in src.collect()] == ["j-q0-0"]
    with pytest.raises(ConflictError, match="already collected"):
        store.answers.retract("j-q0-0", "ann")
    assert src.collect() == []
    # a script's judgement (no studio undo) is collected at once, once the older ones have been
    store.answers.add(
        [Judgement(id="j-x", query_id="q2", annotator_id="ann", source="human", p=0.0)]
    )
    assert [j.id for j in src.collect()] == ["j-x"]


def test_a_young_answer_holds_back_later_ones(store: FeedbackStore) -> None:
    """Read in store order: a later answer whose grace has passed (clocks differ) waits for the
    young one before it, so the cursor never passes an answer that can still be undone."""
    clock = Clock(500.0)
    src = StoreSource(store, grace_s=10.0, clock=clock)
    store.answers.add([studio_answer("q0", 0, 495.0), studio_answer("q1", 0, 480.0)])
    assert src.collect() == []
    store.answers.retract("j-q0-0", "ann")
    assert [j.id for j in src.collect()] == ["j-q1-0"]


def test_an_answer_in_its_grace_period_at_a_checkpoint_is_collected_once_after_resume(
    store: FeedbackStore,
) -> None:
    clock = Clock(2_000.0)
    src = StoreSource(store, grace_s=10.0, clock=clock)
    store.answers.add([studio_answer("q0", 0, 1_980.0), studio_answer("q1", 0, 1_995.0)])
    assert [j.id for j in src.collect()] == ["j-q0-0"]
    saved = src.state()
    store.answers.add([studio_answer("q2", 0, 1_996.0)])
    clock.t = 2_010.0
    resumed = StoreSource(store, grace_s=10.0, clock=clock)
    resumed.load_state(saved)
    assert [j.id for j in resumed.collect()] == ["j-q1-0", "j-q2-0"]
    assert resumed.collect() == []
    # the run that kept going (not resumed) reads the same answers once as well
    assert [j.id for j in src.collect()] == ["j-q1-0", "j-q2-0"]
    assert src.state() == resumed.state()
    with pytest.raises(DataError, match="grace_s"):
        StoreSource(store, grace_s=-1.0)


def test_undo_within_the_grace_period_succeeds_while_a_reader_collects(
    store: FeedbackStore,
) -> None:
    """A real reader collects in a loop on its own thread (and its own store connection) while
    a person answers and undoes; with a 60 s grace every undo made right after answering wins."""
    reader_store = FeedbackStore(store.url, array_dir=store.arrays.root)
    src = StoreSource(reader_store, grace_s=60.0)
    collected: list[Judgement] = []
    stop = threading.Event()

    def read() -> None:
        while not stop.is_set():
            collected.extend(src.collect())
            time.sleep(0.005)

    # an old answer (past its grace) shows the reader is really collecting
    store.answers.add([studio_answer("q6", 0, time.time() - 120.0)])
    thread = threading.Thread(target=read, daemon=True)
    thread.start()
    try:
        deadline = time.monotonic() + 30
        while not collected and time.monotonic() < deadline:
            time.sleep(0.01)
        assert [j.id for j in collected] == ["j-q6-0"]
        undone = 0
        for n in range(3):
            for k in range(6):
                j = studio_answer(f"q{k}", n)
                store.answers.add([j])
                if k % 2 == 0:
                    store.answers.retract(j.id, "ann")  # never "too late"
                    undone += 1
        assert undone == 9
    finally:
        stop.set()
        thread.join(timeout=10)
        reader_store.close()
    assert [j.id for j in collected] == ["j-q6-0"]  # nothing young was collected
    assert len(store.answers.retracted_ids()) == 9


def test_the_studio_s_undo_window_in_the_judgement_overrides_the_reader_s_default(
    store: FeedbackStore,
) -> None:
    """`preflab studio --undo-s 30` stamps each answer with its window (meta["undo_s"]); the
    reader waits that long for those answers, whatever its own default."""
    t0 = 2_000_000.0
    clock = Clock(t0)
    src = StoreSource(store, grace_s=10.0, clock=clock)
    long = studio_answer("q0", 0, t0)
    long = dataclasses.replace(long, meta={**long.meta, "undo_s": 30.0})
    store.answers.add([long])
    clock.t = t0 + 20.0
    assert src.collect() == []  # 20 s > the reader's 10 s, < the studio's 30 s
    clock.t = t0 + 30.0
    assert [j.id for j in src.collect()] == ["j-q0-0"]
    short = studio_answer("q1", 0, t0 + 30.0)
    short = dataclasses.replace(short, meta={**short.meta, "undo_s": 0.0})
    store.answers.add([short])
    assert [j.id for j in src.collect()] == ["j-q1-0"]  # no undo window: collected at once


def test_closing_undo_at_the_run_end_collects_answers_inside_their_window(
    store: FeedbackStore,
) -> None:
    """The run ends 1 s after an answer: closing undo commits it (the store refuses to undo it,
    saying the run has ended) and the reader takes it without waiting for its window."""
    from preflab.store.answers import RUN_ENDED

    t0 = 2_000_000.0
    clock = Clock(t0)
    src = StoreSource(store, grace_s=10.0, clock=clock)
    store.answers.add([studio_answer("q0", 0, t0 - 30), studio_answer("q1", 0, t0 - 1)])
    assert [j.id for j in src.collect()] == ["j-q0-0"]  # q1 is still undoable
    src.close_undo()
    with pytest.raises(ConflictError) as info:
        store.answers.retract("j-q1-0", "ann")
    assert str(info.value) == RUN_ENDED
    assert [j.id for j in src.collect()] == ["j-q1-0"]
    store.answers.add([studio_answer("q2", 0, t0)])  # one more on its way when the run ended
    assert [j.id for j in src.collect()] == ["j-q2-0"]
    assert src.collect() == []


def test_a_routed_run_closes_its_people_s_undo_window_at_the_end(store: FeedbackStore) -> None:
    """With people in the studio (``--route.people store``) the router passes the run's end on:
    an answer given 1 s before the end counts; a router whose people answer at once has no
    undo window for the loop to close."""
    from preflab.assemble import find_hooks, make_selector
    from preflab.sources.routing.config import RoutingConfig
    from preflab.sources.routing.router import RoutingSource
    from preflab.sources.simulated_judge import SimulatedJudge
    from preflab.sources.teacher import SyntheticTeacher

    t0 = 3_000_000.0
    clock = Clock(t0)
    cfg = RoutingConfig(people="store")
    judge = SimulatedJudge(cfg.judge, np.random.default_rng(1))
    routed = RoutingSource(
        cfg,
        np.random.default_rng(0),
        ai=judge,
        people=StoreSource(store, grace_s=10.0, clock=clock),
        store=store,
    )
    q0 = store.queries.get("q0")
    assert q0 is not None
    segments = {s.id: s for s in store.segments.get([*q0.a, *q0.b])}
    routed.submit([q0], segments)  # no calibration yet: the query goes to people
    assert routed.routes["q0"]["answerer"] == "people"
    assert routed.collect() == []
    store.answers.add([studio_answer("q0", 0, t0 - 1)])
    assert routed.collect() == []  # still undoable
    hooks = find_hooks(routed, make_selector("random"))
    assert hooks.undo_window is routed
    hooks.undo_window.close_undo()
    assert [j.id for j in routed.collect()] == ["j-q0-0"]
    assert routed.labels["people"] == 1

    teacher = SyntheticTeacher(rng=np.random.default_rng(2), annotator_id="oracle")
    at_once = RoutingSource(cfg, np.random.default_rng(0), ai=judge, people=teacher)
    assert find_hooks(at_once, make_selector("random")).undo_window is None


def test_an_undo_between_the_readers_read_and_its_mark_is_not_collected(
    store: FeedbackStore, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The reader reads the answers past their window, then marks them collected (two
    transactions). An undo that lands between the two succeeds (the studio says "undone"), so
    the reader must not hand that answer to the trainer; the other answers count for good."""
    t0 = 4_000_000.0
    src = StoreSource(store, grace_s=10.0, clock=Clock(t0))
    store.answers.add([studio_answer("q0", 0, t0 - 30), studio_answer("q1", 0, t0 - 30)])
    mark = store.answers.mark_collected

    def undo_lands_first(seq: int, **kw) -> None:
        store.answers.retract("j-q1-0", "ann")  # the person's undo, just before the mark
        mark(seq, **kw)

    monkeypatch.setattr(store.answers, "mark_collected", undo_lands_first)
    assert [j.id for j in src.collect()] == ["j-q0-0"]
    assert store.answers.retracted_ids() == {"j-q1-0"}
    with pytest.raises(ConflictError, match="already collected"):
        store.answers.retract("j-q0-0", "ann")
    assert src.collect() == []
