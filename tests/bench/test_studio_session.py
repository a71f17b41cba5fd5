"""What ``preflab bench studio_session`` reads off a session: a real SQLite store and a page log
written by hand (the browser run itself is the smoke test in test_smoke_all.py)."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest

from preflab.records import Annotator, Judgement, Query, Segment
from preflab.store import FeedbackStore
from preflab_bench._studio_person import SessionLog, segment_score
from preflab_bench.studio_session import RoundWatch, analyse


@pytest.fixture
def store(tmp_path: Path) -> FeedbackStore:
    s = FeedbackStore(tmp_path / "feedback.db", array_dir=tmp_path / "segments")
    s.annotators.add(Annotator(id="pia", source="human", name="pia"), token="tok-" + "p" * 28)
    rng = np.random.default_rng(0)
    segs = [
        Segment(
            id=f"s{k}",
            obs=rng.normal(size=(5, 11)).astype(np.float32),
            acts=rng.normal(size=(5, 3)).astype(np.float32),
            true_rewards=np.full(5, float(k), np.float32),
            env_id="Hopper-v5",
        )
        for k in range(6)
    ]
    s.segments.add(segs)
    s.queries.add(
        [
            Query(id="q-a", kind="pair", a=("s0",), b=("s1",)),
            Query(id="q-b", kind="pair", a=("s2",), b=("s3",)),
            Query(id="q-c", kind="pair", a=("s4",), b=("s5",)),
            Query(id="q-a2", kind="pair", a=("s1",), b=("s0",)),  # q-a the other way round
        ]
    )
    yield s
    s.close()


def test_segment_score_reads_the_true_return_and_a_target(store: FeedbackStore) -> None:
    assert segment_score(store, "s3", "true", "Hopper-v5") == pytest.approx(15.0)
    (seg,) = store.segments.get(["s3"])
    assert segment_score(store, "s3", "backwards", "Hopper-v5") == pytest.approx(
        -float(np.mean(seg.obs[:, 5]))
    )


def test_analyse_counts_what_counted_repeats_and_waits(store: FeedbackStore) -> None:
    def judge(jid: str, q: str, p: float) -> None:
        store.answers.add([Judgement(id=jid, query_id=q, annotator_id="pia", source="human", p=p)])

    judge("j1", "q-a", 1.0)  # later undone
    judge("j2", "q-a", 0.0)
    judge("j3", "q-b", 1.0)
    judge("j4", "q-a2", 1.0)  # the same pair answered a second time
    store.answers.retract("j1", "pia")
    store.answers.mark_collected(store.answers.max_seq() - 1)  # j4 is not collected yet
    log = SessionLog(
        t_open=0.0,
        t_end=60_000.0,
        answers=[
            # true returns: s0 0, s1 5, s2 10, s3 15, s4 20, s5 25 (5 steps of k each)
            {"q": "q-a", "t": 5_000.0, "mistake": False, "p": 0.0, "left": 0, "right": 5},
            {"q": "q-a", "t": 15_000.0, "mistake": False, "p": 0.0, "left": 0, "right": 5},
            {"q": "q-b", "t": 25_000.0, "mistake": True, "p": 1.0, "left": 10, "right": 15},
            {"q": "q-a2", "t": 35_000.0, "mistake": False, "p": 1.0, "left": 5, "right": 0},
            # never stored
            {"q": "q-c", "t": 45_000.0, "mistake": False, "p": 0.0, "left": 20, "right": 25},
        ],
        undos=[{"q": "q-a", "after_s": 2.0, "t": 7_000.0, "ok": True}],
        visits=[
            {"q": "q-a", "t_show": 1_000.0, "t_ready": 4_000.0, "durations": [1.0, 1.5]},
            {"q": "q-a", "t_show": 9_000.0, "t_ready": 10_000.0, "durations": [1.0, 1.5]},
            {"q": "q-b", "t_show": 16_000.0, "t_ready": 18_000.0, "durations": [1.0, 1.0]},
            {"q": "q-a2", "t_show": 26_000.0, "t_ready": 28_000.0, "durations": [1.0, 1.0]},
            {"q": "q-c", "t_show": 36_000.0, "t_ready": 38_000.0, "durations": [1.0, 1.0]},
        ],
        monitor=[
            {"t": 1_000.0, "q": "q-a", "spin": True, "empty": False},
            {"t": 2_000.0, "q": "q-a", "spin": False, "empty": False},
            {"t": 5_200.0, "q": "q-b", "spin": False, "empty": False},
            {"t": 15_100.0, "q": "q-b", "spin": False, "empty": False},
            {"t": 16_000.0, "q": "q-b", "spin": True, "empty": False},
            {"t": 16_500.0, "q": "q-b", "spin": False, "empty": False},
            {"t": 25_300.0, "q": "q-a2", "spin": False, "empty": False},
            {"t": 35_000.0, "q": "q-c", "spin": False, "empty": False},
            {"t": 45_400.0, "q": None, "spin": False, "empty": True},
        ],
    )
    r = analyse(log, store, 1.0, "true", "Hopper-v5")
    assert r["answers_given"] == 5 and r["undos_ok"] == 1
    assert r["answers_expected"] == 4
    assert r["judgements_stored"] == 3  # j2, j3, j4
    assert r["judgements_collected"] == 2  # j2, j3 (j1 undone, j4 after the cursor)
    assert r["answers_lost"] == 1 and r["lost_query_ids"] == ["q-c"]
    assert r["pairs_answered_twice"] == 1
    assert r["pairs_shown_again"] == 1  # q-a: 3 shows, 1 allowed by the undo; q-a2 is q-a
    assert r["spinner_after_first"] == 1
    assert r["spinner_s"] == pytest.approx(1.5)
    # blocked beyond the clips: 3 − 1.5, 1 − 1 (shown again), 2 − 1, 2 − 1, 2 − 1
    assert r["blocked_s"] == pytest.approx(1.5 + 0 + 1 + 1 + 1)
    # after each key: 0.2 (q-a → q-b), 0.1 (second q-a answer; q-b already shown), 0.3, 0 , 0.4
    assert r["transit_s"] == pytest.approx(0.2 + 0.1 + 0.3 + 0.0 + 0.4, abs=1e-6)
    assert r["empty_s"] == pytest.approx(14.6)
    assert r["ui_wait_share"] == pytest.approx((4.5 + 1.0) / 60)
    # label error over the stored answers not undone (j1 was undone): j3 picked the lower return
    assert (r["answers_kept"], r["label_errors"]) == (3, 1)
    assert r["label_error"] == pytest.approx(1 / 3)


def test_round_watch_counts_waiting_time(store: FeedbackStore) -> None:
    watch = RoundWatch(store)
    watch.stop()
    watch.samples = [(0.0, "running"), (2.0, "waiting"), (5.0, "running"), (6.0, "waiting")]
    assert watch.waiting_s(0.0, 10.0) == pytest.approx(3.0)
    assert watch.waiting_s(3.0, 4.0) == pytest.approx(1.0)


@pytest.mark.parametrize(
    ("lo", "hi", "want"),
    [
        (85.0, 120.0, "met"),
        (20.0, 79.0, "missed"),
        (-320.0, 444.3, "not shown"),  # Amendment 7: the mean is below 80, the interval is not
        (70.0, 130.0, "not shown"),
        (float("nan"), float("nan"), "not shown"),
    ],
)
def test_the_return_verdict_reads_the_whole_interval(lo: float, hi: float, want: str) -> None:
    from preflab_bench._studio_session_report import return_verdict

    assert return_verdict(lo, hi).startswith(want)
