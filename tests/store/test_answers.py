"""Answers written with the studio's rules (on SQLite and PostgreSQL): one answer per person and
query when asked (``once``), and an undone judgement sent again refused rather than counted as
already stored (``refuse_undone``); nothing is written by a refused call."""

from __future__ import annotations

import numpy as np
import pytest

from preflab.errors import ConflictError, QuotaReachedError
from preflab.records import Annotator, Judgement, Query
from preflab.store import FeedbackStore
from preflab.store.annotators import hash_token
from preflab.store.answers import CODE_SHOWN, TAKEN_BACK, Quota
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


def jdg(
    jid: str, qid: str = "q0", who: str = "ann", p: float = 1.0, at: float | None = None
) -> Judgement:
    extra = {} if at is None else {"created_at": at}
    return Judgement(id=jid, query_id=qid, annotator_id=who, source="human", p=p, **extra)


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


def test_once_by_pair_refuses_the_same_pair_under_another_query_id(store: FeedbackStore) -> None:
    q0 = store.queries.get("q0")
    assert q0 is not None
    store.queries.add([Query(id="q0-again", kind="pair", a=q0.b, b=q0.a, round=2)])
    assert store.answers.add([jdg("j1")], once=True, by_pair=True) == 1
    with pytest.raises(ConflictError, match=r"already answered the pair of query q0-again"):
        store.answers.add([jdg("j2", "q0-again", p=0.0)], once=True, by_pair=True)
    with pytest.raises(ConflictError, match="already answered the pair"):  # two in one call
        store.answers.add([jdg("j3", "q1"), jdg("j4", "q1")], once=True, by_pair=True)
    assert [jid for jid, _u in store.answers.on_pair("ann", store.queries.get("q0-again"))] == [
        "j1"
    ]
    assert store.answers.add([jdg("j5", "q0-again", who="ben")], once=True, by_pair=True) == 1
    # by query id (not by_pair) the other id is another query, as before
    assert store.answers.add([jdg("j6", "q0-again", p=0.0)], once=True) == 1
    # undone, the pair may be answered again
    store.answers.retract("j1", "ann")
    store.answers.retract("j6", "ann")
    assert store.answers.add([jdg("j7", "q0-again")], once=True, by_pair=True) == 1


def test_refuse_withdrawn_refuses_an_answer_to_a_withdrawn_query(store: FeedbackStore) -> None:
    store.queries.withdraw(["q1"])
    with pytest.raises(ConflictError, match="taken back by the trainer") as info:
        store.answers.add([jdg("j1", "q1")], refuse_withdrawn=True)
    assert str(info.value) == TAKEN_BACK
    assert store.answers.count() == 0
    # without it (an ordinary annotator's answer on its way): stored, and it counts
    assert store.answers.add([jdg("j1", "q1")]) == 1
    assert store.answers.add([jdg("j1", "q1")], if_absent=True, refuse_withdrawn=True) == 0
    assert store.answers.add([jdg("j2", "q0")], refuse_withdrawn=True) == 1


def test_a_quota_deadline_stores_the_answer_that_reaches_it_and_none_after(
    store: FeedbackStore,
) -> None:
    quota = Quota("ann", deadline=1000.0)
    assert store.answers.add([jdg("j1", at=900.0)], quota=quota) == 1
    assert store.answers.add([jdg("j2", "q1", at=1000.0)], quota=quota) == 1  # reaches it
    with pytest.raises(QuotaReachedError, match="time quota"):
        store.answers.add([jdg("j3", at=1001.0)], quota=quota)
    assert store.answers.add([jdg("j4", who="ben", at=1001.0)], quota=quota) == 1  # not ann's
    # the answer that ended their time undone: time on task ends before the deadline again
    store.answers.retract("j2", "ann")
    assert store.answers.add([jdg("j5", "q1", at=1002.0)], quota=quota) == 1
    # both caps: the count is checked as before
    with pytest.raises(QuotaReachedError, match="quota is 2"):
        store.answers.add([jdg("j6", at=10.0)], quota=Quota("ann", 2, deadline=None))
    assert store.answers.counts_of("ann", round=None)[1] == 2


def test_no_undo_once_a_participant_is_completed(store: FeedbackStore) -> None:
    store.studies.put("main", link_hash=hash_token("secret"), config={"cap": 5})
    store.studies.enrol(
        "main", "p-1", key_hash=hash_token("p-1"), platform={}, platform_pid=None, cap=5
    )
    quota = Quota("p-1", 2)
    store.answers.add([jdg("j1", who="p-1"), jdg("j2", "q1", who="p-1")], quota=quota)
    store.answers.retract("j2", "p-1")
    assert store.answers.complete_study(quota) is False  # 1 answer that counts, quota 2
    assert store.studies.participant("p-1").completed_at is None
    store.answers.add([jdg("j3", "q1", who="p-1")], quota=quota)
    assert store.answers.complete_study(quota) is True
    stamped = store.studies.participant("p-1").completed_at
    assert stamped is not None
    with pytest.raises(ConflictError) as info:
        store.answers.retract("j3", "p-1")
    assert str(info.value) == CODE_SHOWN
    assert store.answers.counts_of("p-1", round=None)[1] == 2
    assert store.answers.complete_study(quota) is True  # the first stamp counts
    assert store.studies.participant("p-1").completed_at == stamped
    assert store.answers.complete_study(Quota("ann", 1)) is False  # no participant
    store.answers.add([jdg("j9")])
    store.answers.retract("j9", "ann")  # an ordinary annotator undoes as before
