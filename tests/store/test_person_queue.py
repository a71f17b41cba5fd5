"""Each person's question queue (issue #25): no pair asked twice to the same person, across query
ids and rounds; skip moves a query to the end of its round; "can't tell" retires a pair; an
optional share of answered pairs comes back once as a consistency check."""

from __future__ import annotations

import numpy as np
import pytest

from preflab.errors import DataError
from preflab.records import Annotator, Judgement, Query
from preflab.store import FeedbackStore
from preflab.testing.factories import make_segments


@pytest.fixture
def store(store_url: str, tmp_path) -> FeedbackStore:
    s = FeedbackStore(store_url, array_dir=tmp_path / "segments")
    segs = make_segments(6, rng=np.random.default_rng(3), env_id="Toy-v0", episode=range(6))
    s.segments.add(segs)
    for who in ("ann", "ben"):
        s.annotators.add(Annotator(id=who, source="human", name=who))
    s.seg = [x.id for x in segs]  # type: ignore[attr-defined]
    yield s
    s.close()


def pair(qid: str, a: str, b: str, round: int = 0) -> Query:
    return Query(id=qid, kind="pair", a=(a,), b=(b,), round=round)


def answer(store: FeedbackStore, who: str, qid: str, p: float | None) -> Judgement:
    j = Judgement(id=f"j-{who}-{qid}-{p}", query_id=qid, annotator_id=who, source="human", p=p)
    store.answers.add([j])
    return j


def ids(qs: list[Query]) -> list[str]:
    return [q.id for q in qs]


def test_the_same_pair_is_asked_once_per_person_across_query_ids_and_rounds(
    store: FeedbackStore,
) -> None:
    s = store.seg  # type: ignore[attr-defined]
    # round 0 asks (s0, s1) three times (once the other way round) and (s2, s3) once
    store.queries.add(
        [
            pair("q0", s[0], s[1]),
            pair("q1", s[1], s[0]),
            pair("q2", s[0], s[1]),
            pair("q3", s[2], s[3]),
        ]
    )
    assert ids(store.people.queue("ann")) == ["q0", "q3"]  # each pair once
    answer(store, "ann", "q0", 1.0)
    assert ids(store.people.queue("ann")) == ["q3"]
    assert ids(store.people.queue("ben")) == ["q0", "q3"]  # per person
    # a later round asks the answered pair again: not to ann
    store.queries.add([pair("q4", s[1], s[0], round=1), pair("q5", s[4], s[5], round=1)])
    assert ids(store.people.queue("ann")) == ["q5", "q3"]
    assert ids(store.people.queue("ann", limit=1)) == ["q5"]
    assert ids(store.people.queue("ben")) == ["q4", "q5", "q3"]
    # undoing the answer brings the pair back (once)
    store.answers.retract("j-ann-q0-1.0", "ann")
    assert ids(store.people.queue("ann")) == ["q4", "q5", "q3"]


def test_cant_tell_retires_the_pair_for_that_person(store: FeedbackStore) -> None:
    s = store.seg  # type: ignore[attr-defined]
    store.queries.add([pair("q0", s[0], s[1]), pair("q1", s[2], s[3]), pair("q2", s[1], s[0])])
    answer(store, "ann", "q0", None)
    assert ids(store.people.queue("ann")) == ["q1"]
    assert ids(store.people.queue("ben")) == ["q0", "q1"]


def test_skip_moves_a_query_to_the_end_of_its_round(store: FeedbackStore) -> None:
    s = store.seg  # type: ignore[attr-defined]
    store.queries.add(
        [
            pair("a", s[0], s[1]),
            pair("b", s[2], s[3]),
            pair("c", s[4], s[5]),
            pair("old", s[0], s[2], round=-1),
        ]
    )
    assert ids(store.people.queue("ann")) == ["a", "b", "c", "old"]
    store.people.skip("ann", "a")
    assert ids(store.people.queue("ann")) == ["b", "c", "a", "old"]
    store.people.skip("ann", "b")
    assert ids(store.people.queue("ann")) == ["c", "a", "b", "old"]
    store.people.skip("ann", "a")  # skipped again: last again
    assert ids(store.people.queue("ann")) == ["c", "b", "a", "old"]
    assert store.people.state("ann", "a")["skips"] == 2  # type: ignore[index]
    assert ids(store.people.queue("ben")) == ["a", "b", "c", "old"]  # ann's skips are hers
    assert ids(store.people.queue("ann", exclude=["c"])) == ["b", "a", "old"]


def test_served_time_is_kept_per_person(store: FeedbackStore) -> None:
    s = store.seg  # type: ignore[attr-defined]
    store.queries.add([pair("q0", s[0], s[1])])
    assert store.people.state("ann", "q0") is None
    store.people.mark_served("ann", "q0")
    first = store.people.state("ann", "q0")
    assert first is not None and first["served_at"] is not None and first["skips"] == 0
    store.people.skip("ann", "q0")
    after = store.people.state("ann", "q0")
    assert after is not None and after["served_at"] == first["served_at"]
    assert after["skipped_at"] is not None and store.people.state("ben", "q0") is None
    store.people.mark_served("ann", "q0")  # served again: the first time counts
    assert store.people.state("ann", "q0")["served_at"] == first["served_at"]  # type: ignore[index]


def test_repeat_share_re_asks_answered_pairs_once_and_reports_agreement(
    store: FeedbackStore,
) -> None:
    s = store.seg  # type: ignore[attr-defined]
    qs = [pair(f"q{k}", s[k], s[k + 1]) for k in range(5)]
    store.queries.add(qs)
    for q in qs:
        answer(store, "ann", q.id, 1.0)
    assert store.people.queue("ann") == []
    assert store.people.queue("ann", repeat_share=0.0) == []
    again = ids(store.people.queue("ann", repeat_share=1.0))
    assert again == [q.id for q in qs]  # every answered pair, each once
    with pytest.raises(DataError, match="repeat_share"):
        store.people.queue("ann", repeat_share=1.5)
    # answered a second time: not asked a third time; agreement per annotator
    store.answers.add(
        [
            Judgement(id="j2-q0", query_id="q0", annotator_id="ann", source="human", p=1.0),
            Judgement(id="j2-q1", query_id="q1", annotator_id="ann", source="human", p=0.0),
        ]
    )
    assert "q0" not in ids(store.people.queue("ann", repeat_share=1.0))
    assert store.people.consistency() == {"ann": (2, 1)}
    # a can't-tell answer is never re-asked
    store.queries.add([pair("q9", s[0], s[5])])
    answer(store, "ben", "q9", None)
    assert "q9" not in ids(store.people.queue("ben", repeat_share=1.0))


def test_a_repeat_shown_the_other_way_round_is_compared_by_behaviour(
    store: FeedbackStore,
) -> None:
    s = store.seg  # type: ignore[attr-defined]
    store.queries.add([pair("x", s[0], s[1]), pair("y", s[1], s[0], round=1)])
    answer(store, "ann", "x", 1.0)  # s0 preferred
    answer(store, "ann", "y", 0.0)  # s0 (now on the right) preferred again: agrees
    answer(store, "ben", "x", 1.0)
    answer(store, "ben", "y", 1.0)  # s1 preferred: disagrees
    assert store.people.consistency() == {"ann": (1, 1), "ben": (1, 0)}


def test_a_skip_alone_never_counts_as_served(store: FeedbackStore) -> None:
    s = store.seg  # type: ignore[attr-defined]
    store.queries.add([pair("q0", s[0], s[1])])
    store.people.skip("ann", "q0")
    store.people.skip("ann", "q0")  # skipped again, never shown: still not served
    state = store.people.state("ann", "q0")
    assert state is not None and state["skips"] == 2 and state["served_at"] is None
    assert not store.people.served("ann", "q0")
    store.people.mark_served("ann", "q0")
    assert store.people.served("ann", "q0") and not store.people.served("ben", "q0")


def test_reasked_is_the_queues_consistency_check(store: FeedbackStore) -> None:
    s = store.seg  # type: ignore[attr-defined]
    qs = [pair(f"q{k}", s[k], s[k + 1]) for k in range(3)]
    store.queries.add(qs)
    answer(store, "ann", "q0", 1.0)
    answer(store, "ann", "q1", None)  # can't tell: never asked again
    assert not store.people.reasked("ann", qs[0], 0.0)
    assert store.people.reasked("ann", qs[0], 1.0)
    assert not store.people.reasked("ann", qs[1], 1.0)
    assert not store.people.reasked("ann", qs[2], 1.0)  # not answered: no re-ask
    again = set(ids(store.people.queue("ann", repeat_share=1.0)))
    assert {q.id for q in qs if store.people.reasked("ann", q, 1.0)} == again - {"q2"}
    answer(store, "ann", "q0", 0.0)  # answered twice: not a third time
    assert not store.people.reasked("ann", qs[0], 1.0)
