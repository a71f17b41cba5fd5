"""Routing with people answering through the store, the run paced by them (issue 58): the
person is offered only the queries routed to people, the run's clock counts their answers and
the router's, and the run ends when the label budget is answered."""

from __future__ import annotations

import threading
import time
from pathlib import Path

import pytest

from preflab.config import TrainConfig
from preflab.kinds import kind_of
from preflab.records import Annotator, Judgement
from preflab.runs import start_loop
from preflab.sources.routing.config import RoutingConfig
from preflab.sources.routing.router import RoutingSource
from preflab.store import FeedbackStore

LOOK_S = 0.3
"""A query is answered no sooner than this after it was asked (the studio refuses an answer
sooner than its min_answer_s, 1 s by default, after serving: a person watches the clips)."""


class Person(threading.Thread):
    """Answers every open query (unanswered, not withdrawn, not a rating stream) that was asked
    at least LOOK_S ago, preferring the left clip, through its own store handle."""

    def __init__(self, run: Path) -> None:
        super().__init__(daemon=True)
        self.run_dir = run
        self.stop = threading.Event()
        self.answered: list[str] = []

    def run(self) -> None:
        while not (self.run_dir / "feedback.db").exists():
            time.sleep(0.05)
        store = FeedbackStore(self.run_dir / "feedback.db")
        store.annotators.add(Annotator(id="alice", source="human", name="alice"))
        try:
            while not self.stop.is_set():
                gone = store.queries.withdrawn_ids()
                todo = [
                    q
                    for q in store.queries.unanswered()
                    if q.id not in gone
                    and not kind_of(q).streams
                    and time.time() - q.created_at >= LOOK_S
                ]
                if not todo:
                    time.sleep(0.05)
                    continue
                q = todo[0]
                j = Judgement(
                    id=f"j-{q.id}", query_id=q.id, annotator_id="alice", source="human", p=1.0
                )
                store.answers.add([j])
                self.answered.append(q.id)
        finally:
            store.close()


@pytest.mark.slow  # ~25 s: a run paced by a person (the studio test covers the routing)
def test_a_paced_routed_run_asks_people_only_their_share(tmp_path: Path) -> None:
    # this person always prefers the left clip, so the AI never earns a threshold: people's
    # budget (8 of the 16 labels) sends the rest to the AI (people_spent='ai'; under the
    # default 'skip' they would get no label and the run would wait for people forever)
    route = RoutingConfig(people="store", budget_people=8, people_spent="ai")
    cfg = TrainConfig.smoke(source="route", route=route, total_labels=16)
    assert cfg.paced_by_labels
    person = Person(tmp_path / "run")
    person.start()
    try:
        loop = start_loop(cfg, tmp_path / "run")
        result = loop.run()
    finally:
        person.stop.set()
        person.join(10)
    router = loop.source
    assert isinstance(router, RoutingSource) and router.persists
    theirs = {q for q, r in router.routes.items() if r["answerer"] == "people"}
    assert {r["answerer"] for r in router.routes.values()} == {"people", "ai"}
    assert set(person.answered) == theirs  # every query routed to them, and no other
    assert router.used["people"] == len(theirs) == 8
    assert router.labels["people"] == 8 and router.labels["ai"] == 8
    assert result.ended_by == "labels" and result.n_labels == cfg.total_labels


def test_people_are_never_offered_a_query_the_router_sends_elsewhere(tmp_path: Path) -> None:
    """The loop asks the router who answers before it stores a round's queries, and stores
    them with the others withdrawn in one transaction: while the AI answers, and ever after,
    the studio offers people none of the queries routed to the AI (before, every query of the
    round was open to people until the AI had answered)."""
    route = RoutingConfig(people="store", budget_people=0, people_spent="ai")
    cfg = TrainConfig.smoke(source="route", route=route, total_labels=8)
    loop = start_loop(cfg, tmp_path / "run")
    router = loop.source
    assert isinstance(router, RoutingSource)
    store = FeedbackStore(tmp_path / "run" / "feedback.db")
    open_while_asked: list[set[str]] = []
    asked: list[str] = []
    submit = router.ai.submit

    def watched(queries, segments) -> None:  # what people could open while the AI works
        asked.extend(q.id for q in queries)
        open_while_asked.append({q.id for q in store.queries.open_for("a-person", limit=1000)})
        submit(queries, segments)

    router.ai.submit = watched  # type: ignore[method-assign]
    result = loop.run()
    assert result.n_labels == cfg.total_labels and asked
    assert all(not (seen & set(asked)) for seen in open_while_asked)
    assert {r["answerer"] for r in router.routes.values()} <= {"ai", "model"}
    assert store.queries.open_for("a-person", kind="pair", limit=1000) == []
    store.close()
