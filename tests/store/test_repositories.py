"""The store is a set of repositories on one engine and one transaction rule: every repository
shares the store's Database, and every public method of each is guarded (a database error is a
StoreError saying nothing was written)."""

from __future__ import annotations

import inspect

import pytest
from sqlalchemy import text

from preflab.errors import StoreError
from preflab.store import FeedbackStore
from preflab.store.repository import Repository

REPOSITORIES = (
    "segments",
    "queries",
    "answers",
    "ratings",
    "annotators",
    "rounds",
    "settings",
    "people",
    "llm_cache",
)


def test_every_repository_shares_one_database_and_is_guarded(tmp_path) -> None:
    store = FeedbackStore(tmp_path / "feedback.db")
    try:
        for name in REPOSITORIES:
            repo = getattr(store, name)
            assert isinstance(repo, Repository), name
            assert repo.db is store.db, name
            for attr, fn in vars(type(repo)).items():
                if not attr.startswith("_") and inspect.isfunction(fn):
                    assert hasattr(fn, "__wrapped__"), f"{name}.{attr} is not guarded"
    finally:
        store.close()


def test_a_database_error_in_a_repository_is_a_store_error(tmp_path) -> None:
    store = FeedbackStore(tmp_path / "feedback.db")
    try:
        with store.engine.begin() as c:
            c.execute(text("DROP TABLE settings"))
        with pytest.raises(StoreError, match="during get"):
            store.settings.get("task")
        with pytest.raises(StoreError, match=r"during set.*Nothing of this call was written"):
            store.settings.set("task", "walk")
    finally:
        store.close()
