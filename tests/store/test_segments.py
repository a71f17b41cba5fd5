"""Segments.add: a failed call leaves no array file of its own behind, and never removes one it
did not create (on SQLite and PostgreSQL; more segment tests in test_feedback_store.py)."""

from __future__ import annotations

import threading
from pathlib import Path

import numpy as np
import pytest
from sqlalchemy import event, text

from preflab.errors import StoreError
from preflab.records import Segment
from preflab.store import FeedbackStore
from preflab.testing.factories import make_segments


def _files(root: Path) -> dict[str, bytes]:
    """Every file under ``root`` (temporary ones too) and its bytes."""
    return {str(p.relative_to(root)): p.read_bytes() for p in root.rglob("*") if p.is_file()}


def _store_with(store_url: str, arrays: Path) -> tuple[FeedbackStore, list[Segment]]:
    """A store holding two segments (content ids)."""
    store = FeedbackStore(store_url, array_dir=arrays)
    old = make_segments(2, rng=np.random.default_rng(0), episode=range(2))
    assert store.segments.add(old) == 2
    return store, old


def _reads(store: FeedbackStore, segs: list[Segment]) -> None:
    """The store holds exactly ``segs``, arrays and all."""
    back = store.segments.all()
    assert [s.id for s in back] == [s.id for s in segs]
    for got, want in zip(back, segs, strict=True):
        np.testing.assert_array_equal(got.obs, want.obs)
        np.testing.assert_array_equal(got.true_rewards, want.true_rewards)


def test_a_failed_insert_writes_no_array_file(store_url, tmp_path) -> None:
    """The insert violates the seq index (a hand-edited counter hands out taken seqs): the
    call fails and no file of its segments is left (the arrays were written first, then
    orphaned)."""
    arrays = tmp_path / "segments"
    store, old = _store_with(store_url, arrays)
    before = _files(arrays)
    with store.engine.begin() as c:
        c.execute(text("UPDATE counters SET value = 0 WHERE name = 'segments'"))
    new = make_segments(3, rng=np.random.default_rng(1), episode=range(3))
    with pytest.raises(StoreError, match="refused add"):
        store.segments.add(new)
    assert _files(arrays) == before
    _reads(store, old)
    store.close()


def test_a_failed_array_write_removes_only_the_files_this_call_created(store_url, tmp_path) -> None:
    """The third segment's folder cannot be made (a file is in the way) after the rows were
    inserted: the second segment's file, which this call wrote, goes; the first's, which was
    there before (a checkpoint writes arrays without rows), stays; no row is stored. Once the
    way is clear the same call stores all three."""
    arrays = tmp_path / "segments"
    store, old = _store_with(store_url, arrays)
    new = make_segments(3, rng=np.random.default_rng(1), id_prefix="new-")
    assert store.arrays.write(new[0])  # arrays with no row, like the rollout pool's
    blocker = arrays / new[2].id[-4:]
    blocker.write_text("a file where new-2's folder goes")
    before = _files(arrays)
    with pytest.raises(StoreError, match=r"cannot write segment arrays .*new-2\.npz"):
        store.segments.add(new)
    assert _files(arrays) == before
    assert store.segments.count() == 2
    _reads(store, old)
    blocker.unlink()
    assert store.segments.add(new) == 3
    _reads(store, old + new)
    store.close()


@pytest.mark.postgres
def test_postgres_writer_of_a_taken_id_leaves_the_owners_file_and_none_of_its_own(
    postgres_url, tmp_path
) -> None:
    """Two writers of one id: the second waits on the first's uncommitted row, then fails on
    it once committed. The first's file stays, the second's other segment leaves no file."""
    from tests.store.conftest import drop_pg_database, fresh_pg_database

    url, name = fresh_pg_database(postgres_url)
    arrays = tmp_path / "segments"
    try:
        main, old = _store_with(url, arrays)
        first = FeedbackStore(url, array_dir=arrays)
        second = FeedbackStore(url, array_dir=arrays)
        x, y = make_segments(2, rng=np.random.default_rng(1), episode=range(2))
        reached, release = threading.Event(), threading.Event()

        @event.listens_for(first.engine, "commit")
        def _hold(_conn) -> None:  # before the DBAPI commit: the row and file are written
            reached.set()
            assert release.wait(30)

        errors: list[BaseException] = []

        def add_second() -> None:
            try:
                second.segments.add([y, x])
            except BaseException as exc:
                errors.append(exc)

        t1 = threading.Thread(target=first.segments.add, args=([x],))
        t1.start()
        assert reached.wait(30)
        # the first's files, less its staged copy (deleted once its call ends)
        owned = {k: v for k, v in _files(arrays).items() if not k.endswith(".tmp")}
        t2 = threading.Thread(target=add_second)
        t2.start()
        waiting = "SELECT count(*) FROM pg_stat_activity WHERE wait_event_type = 'Lock'"
        for _ in range(3000):  # until the second writer waits on the first's row of x
            with main.engine.connect() as c:
                if c.execute(text(waiting)).scalar_one():
                    break
            t2.join(0.01)
        else:
            pytest.fail("the second writer never waited on the first's row")
        release.set()
        t1.join(30)
        t2.join(30)
        assert len(errors) == 1 and isinstance(errors[0], StoreError)
        assert _files(arrays) == owned
        _reads(main, [*old, x])
        for s in (first, second, main):
            s.close()
    finally:
        drop_pg_database(postgres_url, name)
