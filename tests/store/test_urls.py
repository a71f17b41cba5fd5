"""Passwords in store URLs never reach messages, files or printed output."""

from __future__ import annotations

import pytest

from preflab.errors import StoreError
from preflab.store import FeedbackStore, mask_url, strip_password
from preflab.sweep import SweepSpec

URL = "postgresql+psycopg://alice:s3cret@127.0.0.1:1/preflab"


def test_mask_and_strip() -> None:
    assert mask_url(URL) == "postgresql+psycopg://alice:***@127.0.0.1:1/preflab"
    assert strip_password(URL) == "postgresql+psycopg://alice@127.0.0.1:1/preflab"
    assert strip_password("/tmp/x/feedback.db") == "/tmp/x/feedback.db"
    assert strip_password("") == ""  # no store given: the run's own


def test_a_relative_store_path_is_kept_absolute(tmp_path, monkeypatch) -> None:
    """config.json keeps a relative --store-url as the absolute path it meant, so a resume
    from another folder opens the run's store, not a new empty one beside it."""
    monkeypatch.chdir(tmp_path)
    assert strip_password("rel.db") == str(tmp_path / "rel.db")
    assert strip_password("sub/../rel.db") == str(tmp_path / "rel.db")


def test_unreachable_store_error_is_masked(tmp_path) -> None:
    with pytest.raises(StoreError) as info:
        FeedbackStore(URL, array_dir=tmp_path)
    assert "s3cret" not in str(info.value) and "cannot reach" in str(info.value)


@pytest.mark.postgres
def test_store_url_attribute_is_masked(postgres_url, tmp_path) -> None:
    url = postgres_url.replace("postgres@", "postgres:ignored-pw@")  # trust auth ignores it
    store = FeedbackStore(url, array_dir=tmp_path)
    assert "ignored-pw" not in store.url and "***" in store.url
    store.close()


def test_sweep_json_has_no_password() -> None:
    spec = SweepSpec(preset="smoke", base={"store_url": URL}, axes={"seed": [0]})
    assert "s3cret" not in spec.to_json()
    assert spec.trials()[0].config.store_url == URL  # the runs still get it
