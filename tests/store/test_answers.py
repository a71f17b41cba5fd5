"""Answers written with the studio's rules (on SQLite and PostgreSQL): one answer per person and
query when asked (``once``), and an undone judgement sent again refused rather than counted as
already stored (``refuse_undone``); nothing is written by a refused call."""

from __future__ import annotations

import numpy as np
import pytest

from preflab.errors import ConflictError
from preflab.records import Annotator, Judgement, Query
from preflab.store import FeedbackStore
from preflab.testing.factories import make_segments


@pytest.fixture
def store(store_url: str, tmp_path) -> FeedbackStore:
    s = FeedbackStore(store_url, array_dir=tmp_path / "segments")
    segs = make_segments(4, rng=np.random.default_rng(5), env_id="Toy-v0", episode=range(4))
    s.segments.add(segs)
    s.queries.add(
        [
            Query(id="q0", kind="pair", a=(segs[0].id,), b=(segs[1].id,)),
            Query(id="q1", kind="pair", a=(segs[2].id,), b=(segs[3].id,)),
        ]
    )
    for who in ("ann", "ben"):
        s.annotators.add(Annotator(id=who, source="human", name=who))
    yield s
    s.close()


def jdg(jid: str, qid: str = "q0", who: str = "ann", p: float = 1.0) -> Judgement:
    return Judgement(id=jid, query_id=qid, annotator_id=who, source="human", p=p)


def test_once_refuses_a_second_answer_of_one_person_to_one_query(store: FeedbackStore) -> None:
    assert store.answers.add([jdg("j1")], if_absent=True, once=True) == 1
    assert store.answers.add([jdg("j1")], if_absent=True, once=True) == 0  # a resend passes
    with pytest.raises(ConflictError, match=r"ann already answered query q0 \(judgement j1\)"):
        store.answers.add([jdg("j2", p=0.0)], if_absent=True, once=True)
    with pytest.raises(ConflictError, match="already answered query q1"):  # two in one call
        store.answers.add([jdg("j3", "q1"), jdg("j4", "q1")], once=True)
    assert store.answers.count() == 1
    assert store.answers.add([jdg("j5", who="ben"), jdg("j6", "q1")], once=True) == 2
    assert [jid for jid, _u in store.answers.on_query("ann", "q0")] == ["j1"]
    # undone, the query may be answered again
    store.answers.retract("j1", "ann")
    assert store.answers.on_query("ann", "q0") == []
    assert store.answers.add([jdg("j7", p=0.0)], once=True) == 1
    # collected by the trainer: no longer undoable
    assert store.answers.on_query("ann", "q0") == [("j7", True)]
    store.answers.mark_collected(store.answers.max_seq())
    assert store.answers.on_query("ann", "q0") == [("j7", False)]


def test_refuse_undone_refuses_a_resent_undone_judgement(store: FeedbackStore) -> None:
    store.answers.add([jdg("j1")], if_absent=True)
    store.answers.retract("j1", "ann")
    assert store.answers.undone("j1") and not store.answers.undone("nope")
    with pytest.raises(ConflictError, match="j1 was undone"):
        store.answers.add([jdg("j1")], if_absent=True, refuse_undone=True)
    assert store.answers.add([jdg("j1")], if_absent=True) == 0  # without it: already stored
    assert store.answers.count() == 1 and store.answers.judgements() == []
