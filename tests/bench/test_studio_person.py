"""The simulated studio person's label count (``preflab_bench._studio_person.label_errors``)
on a real SQLite store when nothing was answered."""

from __future__ import annotations

from preflab.records import Judgement, Query
from preflab.store import FeedbackStore
from preflab_bench._studio_person import label_errors


def test_label_errors_of_no_answers_are_none_of_none(session_store: FeedbackStore) -> None:
    """No answers of the kind asked: (0 wrong, 0 labels), which the callers turn into
    answers_kept 0 (the report then gives no verdict on the pairs' error); a group answer is
    not counted among pair labels, and a pair answer is."""
    assert label_errors(session_store, "true", "Hopper-v5", "pair") == (0, 0)
    session_store.queries.add(
        [
            Query(id="g1", kind="group", a=("s5", "s6"), b=("s0",)),
            Query(id="p1", kind="pair", a=("s0",), b=("s1",)),
        ]
    )
    session_store.answers.add(
        [Judgement(id="j1", query_id="g1", annotator_id="pia", source="human", p=1.0)]
    )
    assert label_errors(session_store, "true", "Hopper-v5", "pair") == (0, 0)
    session_store.answers.add(  # s0 (return 0) preferred to s1 (return 4): wrong
        [Judgement(id="j2", query_id="p1", annotator_id="pia", source="human", p=1.0)]
    )
    assert label_errors(session_store, "true", "Hopper-v5", "pair") == (1, 1)
    assert label_errors(session_store, "true", "Hopper-v5", "group") == (0, 2)
