"""Run settings the owner and the trainer share: set, read back, overwrite, from two handles."""

from __future__ import annotations

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
