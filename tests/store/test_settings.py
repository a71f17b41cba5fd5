"""Run settings the owner and the trainer share: set, read back, overwrite, from two handles."""

from __future__ import annotations

from preflab.store import FeedbackStore


def test_settings_round_trip_between_two_handles(store_url: str, tmp_path) -> None:
    a = FeedbackStore(store_url, array_dir=tmp_path / "segments")
    b = FeedbackStore(store_url, array_dir=tmp_path / "segments")
    try:
        assert a.setting("task") is None and a.setting("task", "") == ""
        a.set_setting("task", "walk backwards")
        a.set_setting("finish", {"by": "owner", "at": 3.5})
        assert b.setting("task") == "walk backwards"
        b.set_setting("task", "stand still")  # the latest value wins, one row per key
        assert a.setting("task") == "stand still"
        assert a.setting("finish") == {"by": "owner", "at": 3.5}
    finally:
        a.close()
        b.close()
