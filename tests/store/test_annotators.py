"""Annotators' tokens and revocation (preflab.store.annotators): a revocation is a durable mark,
not only a cleared token hash, so no later write of a hash lets a revoked person in again."""

from __future__ import annotations

from collections.abc import Iterator

import pytest
from sqlalchemy import update

from preflab.errors import DataError
from preflab.records import Annotator
from preflab.store import FeedbackStore
from preflab.store import schema as S
from preflab.store.annotators import hash_token


@pytest.fixture
def store(store_url: str, tmp_path) -> Iterator[FeedbackStore]:
    s = FeedbackStore(store_url, array_dir=tmp_path / "segments")
    for who in ("alice", "bob"):
        s.annotators.add(
            Annotator(id=who, source="human", name=who, meta={"role": "annotator"}),
            token=f"{who}-token-123456",
        )
    yield s
    s.close()


def test_a_revoked_token_stays_refused_when_its_hash_is_stored_again(
    store: FeedbackStore,
) -> None:
    at = store.annotators.revoke_token("alice")
    assert store.annotators.by_token("alice-token-123456") is None
    # a study participant's link re-keys them by writing a token hash (Studies.rekey, consent)
    with store.engine.begin() as c:
        c.execute(
            update(S.annotators)
            .where(S.annotators.c.id == "alice")
            .values(token_hash=hash_token("alice-token-again"))
        )
    assert store.annotators.by_token("alice-token-again") is None
    assert store.annotators.id_for_token("alice-token-again") is None
    assert store.annotators.with_token() == {"bob"}
    assert store.annotators.is_revoked("alice") and not store.annotators.is_revoked("bob")
    assert store.annotators.revoked() == {"alice": {"at": at, "by": None}}
    a = store.annotators.get("alice")
    assert a is not None and a.meta["role"] == "annotator" and "at" in a.meta["revoked"]
    # revoking again keeps the first revocation's time; who revoked is recorded
    assert store.annotators.revoke_token("alice", by="someone") == at
    store.annotators.revoke_token("bob", by="owner")
    assert store.annotators.revoked()["bob"]["by"] == "owner"
    # the owner's new link lifts the revocation
    store.annotators.set_token("alice", "alice-new-token-1")
    assert store.annotators.id_for_token("alice-new-token-1") == "alice"
    assert not store.annotators.is_revoked("alice") and set(store.annotators.revoked()) == {"bob"}
    assert store.annotators.with_token() == {"alice"}
    assert store.annotators.get("alice").meta == {"role": "annotator"}  # type: ignore[union-attr]
    # unknown ids are named
    with pytest.raises(DataError, match="no annotator 'ghost'"):
        store.annotators.revoke_token("ghost", by="owner")
    with pytest.raises(DataError, match="no annotator 'ghost'"):
        store.annotators.set_token("ghost", "t")
    assert not store.annotators.is_revoked("ghost")
