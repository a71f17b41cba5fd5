"""Run settings the owner and the trainer share: set, read back, overwrite, from two handles;
update one entry of a dict and set-if-absent, each in one transaction (concurrent changes kept)."""

from __future__ import annotations

import threading

import pytest

from preflab.store import FeedbackStore


def test_settings_round_trip_between_two_handles(store_url: str, tmp_path) -> None:
    a = FeedbackStore(store_url, array_dir=tmp_path / "segments")
    b = FeedbackStore(store_url, array_dir=tmp_path / "segments")
    try:
        assert a.settings.get("task") is None and a.settings.get("task", "") == ""
        a.settings.set("task", "walk backwards")
        a.settings.set("finish", {"by": "owner", "at": 3.5})
        assert b.settings.get("task") == "walk backwards"
        b.settings.set("task", "stand still")  # the latest value wins, one row per key
        assert a.settings.get("task") == "stand still"
        assert a.settings.get("finish") == {"by": "owner", "at": 3.5}
    finally:
        a.close()
        b.close()


def test_update_entry_keeps_the_other_entries(store_url: str, tmp_path) -> None:
    """Two processes each record one entry of a dict-valued setting (two revokes): both stay."""
    a = FeedbackStore(store_url, array_dir=tmp_path / "segments")
    b = FeedbackStore(store_url, array_dir=tmp_path / "segments")
    try:
        assert a.settings.update_entry("revoked", "alice", {"by": "owner", "at": 1.0}) == {
            "alice": {"by": "owner", "at": 1.0}
        }
        b.settings.update_entry("revoked", "bob", {"by": "owner", "at": 2.0})
        a.settings.update_entry("revoked", "alice", {"by": "owner", "at": 3.0})  # replaced
        assert b.settings.get("revoked") == {
            "alice": {"by": "owner", "at": 3.0},
            "bob": {"by": "owner", "at": 2.0},
        }
        a.settings.set("broken", [1, 2])  # not a dict: starts again from an empty one
        assert b.settings.update_entry("broken", "x", 1) == {"x": 1}
        assert a.settings.get("broken") == {"x": 1}
    finally:
        a.close()
        b.close()


@pytest.mark.parametrize("row_exists", [False, True])
def test_update_entry_reads_and_writes_in_one_transaction(
    store_url: str, tmp_path, monkeypatch: pytest.MonkeyPatch, row_exists: bool
) -> None:
    """Handle a has read the setting and not yet written it back when handle b updates
    another entry: b waits for a's transaction (SQLite's write lock, PostgreSQL's row lock), or,
    when the row was missing and b created it first, a's insert loses and a runs again on
    b's row. Either way both entries stay."""
    a = FeedbackStore(store_url, array_dir=tmp_path / "segments")
    b = FeedbackStore(store_url, array_dir=tmp_path / "segments")
    if row_exists:
        a.settings.set("revoked", {})
    read = a.settings._read_locked
    has_read, go_on = threading.Event(), threading.Event()

    def read_then_wait(c, key):
        got = read(c, key)
        if not has_read.is_set():  # only a's first try waits (a retry goes straight on)
            has_read.set()
            assert go_on.wait(30)
        return got

    monkeypatch.setattr(a.settings, "_read_locked", read_then_wait)
    errors: list[BaseException] = []

    def run(fn) -> threading.Thread:
        def target() -> None:
            try:
                fn()
            except BaseException as exc:  # reported below
                errors.append(exc)

        t = threading.Thread(target=target)
        t.start()
        return t

    try:
        ta = run(lambda: a.settings.update_entry("revoked", "alice", {"by": "owner", "at": 1.0}))
        assert has_read.wait(30)
        tb = run(lambda: b.settings.update_entry("revoked", "bob", {"by": "owner", "at": 2.0}))
        tb.join(0.3)  # b finishes (PostgreSQL, no row yet) or waits for a's transaction
        go_on.set()
        ta.join(30)
        tb.join(30)
        assert not errors and not ta.is_alive() and not tb.is_alive()
        assert sorted(b.settings.get("revoked")) == ["alice", "bob"]
    finally:
        go_on.set()
        a.close()
        b.close()


def test_setdefault_keeps_the_first_value(store_url: str, tmp_path) -> None:
    """ "Finish now" pressed in two places: the first request stays and both calls return it; a
    stored value ``keep`` rejects (a partial request) is replaced."""
    a = FeedbackStore(store_url, array_dir=tmp_path / "segments")
    b = FeedbackStore(store_url, array_dir=tmp_path / "segments")
    try:
        first = {"by": "owner", "at": 1.0}
        assert a.settings.setdefault("finish", first) == first
        assert b.settings.setdefault("finish", {"by": "other", "at": 2.0}) == first
        assert a.settings.get("finish") == first

        def whole(v: object) -> bool:
            return isinstance(v, dict) and "at" in v

        b.settings.set("partial", {"by": "owner"})
        assert a.settings.setdefault("partial", first, keep=whole) == first
        assert b.settings.setdefault("partial", {"by": "x", "at": 9.0}, keep=whole) == first
        assert b.settings.get("partial") == first
    finally:
        a.close()
        b.close()
