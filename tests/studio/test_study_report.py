"""A study's report over a real store: minutes on task for everyone from one read of the
answers, equal to each participant's own progress, in as many statements for 3 people as for
30."""

from __future__ import annotations

import time
from collections.abc import Iterator
from pathlib import Path

import numpy as np
import pytest
from sqlalchemy import event

from preflab.store import FeedbackStore
from preflab.studio import study as S
from preflab.studio.study_config import StudyConfig
from preflab.studio.study_report import report
from preflab.testing.factories import make_judgement, make_query, make_segments

N_PAIRS = 12


@pytest.fixture
def store(tmp_path: Path) -> Iterator[FeedbackStore]:
    s = FeedbackStore(tmp_path / "feedback.db")
    S.create(s, StudyConfig(practice_pairs=1, quota_answers=0, gold_rate=0.0, clip_s=2.0))
    segs = make_segments(2 * N_PAIRS, rng=np.random.default_rng(0), obs_dim=2, env_id="Toy-v0")
    s.segments.add(segs)
    s.queries.add([make_query(f"q{i}", segs[2 * i].id, segs[2 * i + 1].id) for i in range(N_PAIRS)])
    yield s
    s.close()


def enrol(store: FeedbackStore, aid: str, *, consent: bool, practice: bool = False) -> None:
    store.studies.enrol(
        S.STUDY_ID, aid, key_hash=f"k-{aid}", platform={}, platform_pid=None, cap=1000
    )
    if consent:
        store.studies.consent(aid, consent_sha256="x", token_hash=f"t-{aid}")
    if practice:
        store.studies.practice_done(aid)


def crowd(store: FeedbackStore, rng: np.random.Generator, people: int) -> None:
    """``people`` participants: some answer (at random times after now, in random order of
    time, the latest sometimes undone), some never answer, some never consent."""
    t0 = time.time()
    for k in range(people):
        aid = f"p-{k:03d}"
        enrol(store, aid, consent=k % 5 != 4, practice=k % 3 == 0)
        if k % 5 in (3, 4):
            continue  # no answers
        n = int(rng.integers(1, N_PAIRS))
        picks = rng.choice(N_PAIRS, size=n, replace=False)
        js = [
            make_judgement(
                f"j-{aid}-{i}",
                f"q{q}",
                aid,
                float(rng.integers(0, 2)),
                created_at=t0 + float(rng.uniform(1.0, 3600.0)),
                response_time_s=3.0,
            )
            for i, q in enumerate(picks)
        ]
        store.answers.add(js)
        if k % 2 == 0:
            store.answers.retract(js[-1].id, aid)  # their last stored answer no longer counts


@pytest.mark.parametrize("seed", range(3))
def test_minutes_on_task_match_each_participants_progress(store: FeedbackStore, seed) -> None:
    crowd(store, np.random.default_rng(seed), 17)
    r = report(store, n_boot=5)
    assert r is not None
    loaded = S.load(store)
    assert loaded is not None
    expected = {
        p.annotator_id: S.progress(store, p, loaded[1]).minutes
        for p in store.studies.participants(S.STUDY_ID)
    }
    assert r.minutes == pytest.approx(expected, abs=1e-9)
    assert any(m > 0 for m in expected.values()) and any(m == 0 for m in expected.values())


def statements(store: FeedbackStore) -> int:
    n = 0

    def count(*_args: object) -> None:
        nonlocal n
        n += 1

    event.listen(store.db.engine, "before_cursor_execute", count)
    try:
        assert report(store, n_boot=5) is not None
    finally:
        event.remove(store.db.engine, "before_cursor_execute", count)
    return n


def test_the_report_reads_the_store_as_often_for_30_people_as_for_3(store: FeedbackStore) -> None:
    crowd(store, np.random.default_rng(1), 3)
    few = statements(store)
    for k in range(27):
        enrol(store, f"late-{k:02d}", consent=True)
        store.answers.add([make_judgement(f"late-{k}", f"q{k % N_PAIRS}", f"late-{k:02d}", 1.0)])
    assert statements(store) == few
