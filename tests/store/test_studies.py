"""The studies repository (issue #61) on SQLite and PostgreSQL: enrolment in one transaction
with the cap and closing, one participant per platform id, consent unlocking the studio token,
attention checks kept once (and decided once, against every gap before them), excluded people's
answers no longer counting, and a pair's places counted by its sides and taken in one step."""

from __future__ import annotations

import pytest

from preflab.errors import ConflictError, DataError
from preflab.records import Judgement
from preflab.store import FeedbackStore
from preflab.store.annotators import hash_token
from preflab.store.studies import StudyClosedError, StudyFullError
from preflab.testing.factories import make_query, make_segments


@pytest.fixture
def store(store_url, tmp_path):
    import numpy as np

    s = FeedbackStore(store_url, array_dir=tmp_path / "segments")
    segs = make_segments(4, rng=np.random.default_rng(0))
    s.segments.add(segs)
    s.queries.add(
        [make_query("q1", segs[0].id, segs[1].id), make_query("q2", segs[2].id, segs[3].id)]
    )
    s.studies.put("main", link_hash=hash_token("secret"), config={"cap": 2})
    yield s
    s.close()


def enrol(store: FeedbackStore, aid: str, pid: str | None, cap: int = 2) -> None:
    store.studies.enrol(
        "main",
        aid,
        key_hash=hash_token(aid),
        platform={"pid": pid} if pid else {},
        platform_pid=pid,
        cap=cap,
    )


def test_enrolment_caps_closes_and_keeps_one_participant_per_platform_id(store) -> None:
    enrol(store, "p-1", "A")
    with pytest.raises(ConflictError, match="already joined"):
        enrol(store, "p-2", "A")
    assert store.annotators.get("p-2") is None  # nothing of the refused one was written
    enrol(store, "p-3", None)
    with pytest.raises(StudyFullError):
        enrol(store, "p-4", "B")
    store.studies.set_closed("main", True)
    with pytest.raises(StudyClosedError):
        enrol(store, "p-5", "C", cap=10)
    store.studies.set_closed("main", False)
    enrol(store, "p-5", "C", cap=10)
    assert [p.annotator_id for p in store.studies.participants("main")] == ["p-1", "p-3", "p-5"]
    a = store.annotators.get("p-1")
    assert a is not None and a.name == "p-1" and a.meta == {"role": "annotator", "study": "main"}
    assert store.studies.by_pid("main", "A").annotator_id == "p-1"
    assert store.studies.by_key(hash_token("p-3")).annotator_id == "p-3"
    with pytest.raises(DataError, match="no study"):
        store.studies.set_closed("other", True)


def test_consent_unlocks_the_token_and_decline_takes_it_back(store) -> None:
    enrol(store, "p-1", "A")
    assert store.annotators.by_token("tok") is None
    store.studies.consent("p-1", consent_sha256="ab" * 32, token_hash=hash_token("tok"))
    assert store.annotators.by_token("tok").id == "p-1"
    p = store.studies.participant("p-1")
    assert p.consent_at is not None and p.consent_sha256 == "ab" * 32
    store.studies.decline("p-1")
    assert store.annotators.by_token("tok") is None
    assert store.studies.participant("p-1").declined_at is not None


def test_gold_answers_are_kept_once_and_checked(store) -> None:
    assert store.studies.add_gold([("q1", 1.0, "oracle")]) == 1
    assert store.studies.add_gold([("q1", 0.0, "owner"), ("q2", 0.0, "owner")]) == 1
    assert store.studies.gold() == {"q1": 1.0, "q2": 0.0}
    with pytest.raises(DataError, match=r"\[0, 1\]"):
        store.studies.add_gold([("q2", 2.0, "owner")])


def test_an_excluded_persons_answers_stop_counting(store) -> None:
    enrol(store, "p-1", "A")
    enrol(store, "p-2", "B")
    js = [
        Judgement(id=f"j{k}", query_id="q1", annotator_id=a, source="human", p=1.0)
        for k, a in enumerate(["p-1", "p-2"])
    ]
    store.answers.add(js)
    assert [j.id for j in store.answers.counted(js)] == ["j0", "j1"]
    store.studies.exclude("p-2", "random answers")
    assert store.studies.excluded_ids() == {"p-2"}
    assert [j.id for j in store.answers.counted(js)] == ["j0"]
    counts = store.studies.overlap_counts(reserved_since=0.0, exclude=store.studies.excluded_ids())
    assert counts == {"q1": 1}
    store.studies.include("p-2")
    assert [j.id for j in store.answers.counted(js)] == ["j0", "j1"]


def test_reserve_counts_a_pair_by_its_sides_and_takes_the_first_free_one(store) -> None:
    """A pair's places are counted by its two sides across query ids (a pair the trainer asked
    again under a new id is the same pair); answers and live holds both count; a skip and a
    withdrawal give a hold up; a person's own live hold and an attention check always pass."""
    q1, q2 = store.queries.get("q1"), store.queries.get("q2")
    take = store.studies.reserve
    assert take("main", "p-1", [q1, q2], overlap=1, reserve_s=600) == q1
    st = store.people.state("p-1", "q1")
    assert st["reserved_at"] is not None and st["served_at"] == st["reserved_at"]
    assert take("main", "p-2", [q1, q2], overlap=1, reserve_s=600) == q2  # q1 is held
    assert take("main", "p-3", [q1, q2], overlap=1, reserve_s=600) is None  # nothing written
    assert store.people.state("p-3", "q1") is None
    assert take("main", "p-1", [q1], overlap=1, reserve_s=600) == q1  # still theirs: renewed
    assert take("main", "p-3", [q1], overlap=1, reserve_s=600, exclude=["p-1"]) == q1
    store.people.skip("p-3", "q1")
    assert store.studies.pair_counts(reserved_since=0.0) == {
        tuple(sorted((*q1.a, *q1.b))): 1,
        tuple(sorted((*q2.a, *q2.b))): 1,
    }
    store.answers.add(
        [Judgement(id="j1", query_id="q1", annotator_id="p-1", source="human", p=1.0)]
    )
    store.queries.withdraw(["q1"])  # asked again, the sides the other way round
    store.queries.add([make_query("q1-again", q1.b[0], q1.a[0])])
    again = store.queries.get("q1-again")
    assert take("main", "p-4", [again], overlap=1, reserve_s=600) is None  # p-1 answered it
    assert take("main", "p-4", [again], overlap=2, reserve_s=600) == again
    assert store.studies.overlap_counts(reserved_since=0.0)["q1-again"] == 2
    store.studies.add_gold([("q2", 1.0, "owner")])
    assert take("main", "p-4", [q2], overlap=1, reserve_s=600) == q2  # a check: outside k


def test_reserve_counts_answers_under_ids_stored_after_its_last_look(store) -> None:
    """reserve reads only the answers and holds of the candidates' pairs, found by their sides
    in an index it reads on from the last query it saw: a pair asked again under a new id after
    that look, and answered there, fills the pair for the first id too."""
    q1 = store.queries.get("q1")
    take = store.studies.reserve
    assert take("main", "p-1", [q1], overlap=2, reserve_s=600) == q1  # the index is read here
    store.queries.add([make_query("q1-later", q1.b[0], q1.a[0])])
    store.answers.add(
        [
            Judgement(id=f"j-{who}", query_id="q1-later", annotator_id=who, source="human", p=1.0)
            for who in ("p-2", "p-3")
        ]
    )
    # p-1 holds the pair, p-2 and p-3 answered it under the later id: no place for p-4
    assert take("main", "p-4", [q1], overlap=3, reserve_s=600) is None
    assert take("main", "p-4", [q1], overlap=4, reserve_s=600) == q1


def test_checks_are_decided_once_against_every_gap_considered(store) -> None:
    segs = store.segments.all()
    store.queries.add([make_query(f"x{k}", segs[0].id, segs[k % 3 + 1].id) for k in range(6)])
    assert (
        store.studies.consider_checks({"q1": 4.0, "q2": -1.0, "x0": 2.0, "x1": 3.0}, quantile=0.75)
        == 1
    )
    assert store.studies.gold() == {"q1": 1.0}
    assert store.studies.considered(["q1", "q2", "x5"]) == {"q1", "q2"}
    # decided once: asking again changes nothing, whatever the gap
    assert store.studies.consider_checks({"q2": -9.0}, quantile=0.75) == 0
    # one new pair is cut against all before it: |-3.5| ≥ 3.5, the 3rd quartile of 4, 1, 2, 3, 3.5
    assert store.studies.consider_checks({"x2": -3.5}, quantile=0.75) == 1
    assert store.studies.consider_checks({"x3": 1.5}, quantile=0.75) == 0
    assert store.studies.consider_checks({"x4": 0.0}, quantile=0.0) == 0  # no gap: no check
    assert store.studies.gold() == {"q1": 1.0, "x2": 0.0}
