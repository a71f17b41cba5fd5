"""Runs paced by people (clock 'labels'): the trainer never runs ahead of the answers by more
than its env steps per label, waits (publishing 'waiting') when it is ahead, withdraws a round's
unanswered queries when the next is published, and ends when the label budget is met, the owner
finishes it, or the deadline passes — never silently with 0 labels."""

from __future__ import annotations

import re
import threading
import time
from pathlib import Path

import pytest

from preflab.config import TrainConfig
from preflab.records import Annotator, Judgement
from preflab.runs import train
from preflab.store import FeedbackStore
from preflab.studio.schemas import ID_PATTERN


class Person(threading.Thread):
    """Answers the studio's open queries through its own store handle, one every ``pause_s``;
    every ``skip``-th new query goes to the end of the queue (answered when nothing else is
    open); stops when told or after ``limit`` answers."""

    def __init__(self, run: Path, *, pause_s: float, limit: int, skip: int = 0) -> None:
        super().__init__(daemon=True)
        self.run_dir, self.pause_s, self.limit, self.skip = run, pause_s, limit, skip
        self.stop = threading.Event()
        self.answered: list[str] = []
        self.seen_waiting = False

    def run(self) -> None:
        while not (self.run_dir / "feedback.db").exists():
            time.sleep(0.05)
        store = FeedbackStore(self.run_dir / "feedback.db")
        store.annotators.add(Annotator(id="alice", source="human", name="alice"))
        passed: set[str] = set()
        try:
            while not self.stop.is_set() and len(self.answered) < self.limit:
                rounds = store.rounds.all()
                self.seen_waiting |= any(r["status"] == "waiting" for r in rounds)
                gone = store.queries.withdrawn_ids()
                open_now = [q for q in store.queries.unanswered() if q.id not in gone]
                todo = [q for q in open_now if q.id not in passed] + [
                    q for q in open_now if q.id in passed
                ]
                if not todo:
                    time.sleep(0.05)
                    continue
                q = todo[0]
                first_look = q.id not in passed
                if first_look and self.skip and len(passed) < (len(self.answered) + 1) // self.skip:
                    passed.add(q.id)  # a pair this person leaves for later
                    continue
                store.answers.add(
                    [
                        Judgement(
                            id=f"j-{q.id}",
                            query_id=q.id,
                            annotator_id="alice",
                            source="human",
                            p=1.0,
                        )
                    ]
                )
                self.answered.append(q.id)
                time.sleep(self.pause_s)
        finally:
            store.close()


def _config(**kw: object) -> TrainConfig:
    return TrainConfig.smoke(source="store", **kw)  # type: ignore[arg-type]


def test_the_trainer_follows_the_answers_and_ends_when_the_budget_is_met(tmp_path: Path) -> None:
    cfg = _config()
    assert cfg.paced_by_labels
    assert cfg.label_steps == (cfg.total_steps - cfg.initial_steps) / cfg.total_labels
    person = Person(tmp_path / "run", pause_s=0.05, limit=10_000)
    person.start()
    try:
        result = train(cfg, run_dir=tmp_path / "run")
    finally:
        person.stop.set()
        person.join(10)
    assert result.ended_by == "labels" and result.n_labels == cfg.total_labels
    assert result.env_steps == cfg.total_steps
    import csv

    rows = list(csv.DictReader((tmp_path / "run" / "metrics.csv").open()))
    for row in rows:  # never ahead: every env step beyond the first ones is paid by an answer
        ahead = int(row["env_steps"]) - cfg.initial_steps
        assert ahead <= cfg.label_steps * int(row["n_judgements"]), row


def test_a_slow_person_who_skips_makes_the_trainer_wait(
    tmp_path: Path,
) -> None:
    cfg = _config()
    person = Person(tmp_path / "run", pause_s=0.3, limit=10_000, skip=3)
    person.start()
    try:
        result = train(cfg, run_dir=tmp_path / "run")
    finally:
        person.stop.set()
        person.join(10)
    assert person.seen_waiting  # the studio was told the trainer waits for people
    assert result.ended_by == "labels" and result.n_judgements == cfg.total_labels
    store = FeedbackStore(tmp_path / "run" / "feedback.db")
    try:  # every query, those asked while waiting included, is one the studio can answer
        assert all(re.fullmatch(ID_PATTERN, q.id) for q in store.queries.all())
    finally:
        store.close()


def test_the_owner_finishes_a_run_nobody_answers(tmp_path: Path) -> None:
    run = tmp_path / "run"

    def owner() -> None:
        while not (run / "feedback.db").exists():
            time.sleep(0.05)
        store = FeedbackStore(run / "feedback.db")
        while not any(r["status"] == "waiting" for r in store.rounds.all()):
            time.sleep(0.05)
        store.settings.set("finish", {"by": "owner"})
        store.close()

    t = threading.Thread(target=owner, daemon=True)
    t.start()
    result = train(_config(), run_dir=run)
    t.join(10)
    assert result.ended_by == "owner" and result.n_labels == 0
    assert result.env_steps < _config().total_steps


def test_the_deadline_ends_a_run_nobody_answers(tmp_path: Path) -> None:
    result = train(_config(max_minutes=0.01), run_dir=tmp_path / "run")
    assert result.ended_by == "deadline" and result.n_labels == 0


def test_simulated_sources_are_never_paced() -> None:
    assert not TrainConfig.smoke().paced_by_labels
    assert TrainConfig.smoke(clock="labels").paced_by_labels
    assert not TrainConfig.smoke(source="store", clock="steps").paced_by_labels
    with pytest.raises(Exception, match="steps_per_label"):
        TrainConfig.smoke(steps_per_label=0)


def test_a_new_round_withdraws_the_unanswered_queries_of_older_rounds(tmp_path: Path) -> None:
    from preflab.loop import PeopleClock
    from preflab.loop.pacing import ASK_AHEAD
    from preflab.runs import start_loop

    cfg = _config()
    loop = start_loop(cfg, tmp_path / "run")
    try:
        loop._t0 = time.perf_counter()  # what run() sets first
        loop._random_steps(cfg.initial_steps)
        loop.run_round(evaluate=False)  # round 0 asks; nobody answers
        first = list(loop.queries)
        assert len(first) > ASK_AHEAD and not loop.withdrawn
        loop._train_agent(cfg.steps_per_round)
        loop.run_round(evaluate=False)  # round 1: round 0's unanswered queries leave the studio,
        # but the newest (the pair asked ahead, likely on a person's screen) stays
        ahead = set(first[len(first) - ASK_AHEAD :])
        gone = set(first) - ahead
        assert loop.withdrawn == gone == loop.store.queries.withdrawn_ids()
        assert isinstance(loop.clock, PeopleClock)
        assert set(loop.clock.open_queries(loop)) == set(loop.queries) - gone
        # the schedule asks again for what was withdrawn: nothing of the budget is lost
        assert len(loop.queries) - len(loop.withdrawn) == sum(loop.schedule[:2])
        before = set(loop.queries)
        loop._ask(2, extra=True)  # asked while waiting for people: ids the studio accepts
        extra = set(loop.queries) - before
        assert extra and all(re.fullmatch(ID_PATTERN, q) for q in extra)
    finally:
        loop.close()


def test_a_group_answer_undone_in_the_studio_leaves_no_question_open(tmp_path: Path) -> None:
    """A person composes a group comparison in the studio (stored with its answer) and undoes
    it before the trainer collects it: the query stays stored and joins the run, but nobody
    can be asked it, so it is not open and takes nothing from the label budget. Before, the
    trainer counted it as an open question and waited for its answer until the run ended."""
    from preflab.loop import PeopleClock
    from preflab.records import STUDIO_CREATED, Query
    from preflab.runs import start_loop

    cfg = _config()
    loop = start_loop(cfg, tmp_path / "run")
    try:
        loop._t0 = time.perf_counter()
        loop._random_steps(cfg.initial_steps)
        loop.run_round(evaluate=False)  # round 0 asks; nobody answers yet
        assert isinstance(loop.clock, PeopleClock)
        open_before, asked_before = set(loop.clock.open_queries(loop)), loop.clock.asked(loop)
        assert open_before and asked_before == len(open_before)
        a, b = (s.id for s in loop.candidates()[:2])
        composed = Query(
            id="q-g-alice-1",
            kind="group",
            a=(a,),
            b=(b,),
            round=0,
            meta={"created_by": STUDIO_CREATED, "annotator_id": "alice"},
        )
        loop.store.annotators.add(Annotator(id="alice", source="human", name="alice"))
        j = Judgement(
            id="j-g-alice-1", query_id=composed.id, annotator_id="alice", source="human", p=1.0
        )
        assert loop.store.answers.add([j], if_absent=True, with_queries=[composed]) == 1
        loop.store.answers.retract(j.id, "alice")  # undone before the trainer collected it
        loop.collect()
        loop.asker.adopt(loop.pool)
        assert composed.id in loop.queries  # it joined the run ...
        assert set(loop.clock.open_queries(loop)) == open_before  # ... but is asked of nobody
        assert loop.clock.asked(loop) == asked_before
    finally:
        loop.close()


def test_answers_dropped_for_an_exclusion_stay_dropped_after_a_resume(tmp_path: Path) -> None:
    """The owner excludes a person, the next fit drops their answers, and the owner takes them
    back: the answers the trainer dropped stay dropped (docs/guide/study.md), in the running
    trainer and in one resumed from a checkpoint taken after the drop (before, the resumed run
    counted them again, and the two runs differed)."""
    from preflab.runs import start_loop
    from preflab.store.annotators import hash_token

    cfg = _config()
    loop = start_loop(cfg, tmp_path / "run")
    try:
        loop._t0 = time.perf_counter()
        loop._random_steps(cfg.initial_steps)
        loop.run_round(evaluate=False)  # round 0 asks
        store = loop.store
        store.studies.put("main", link_hash=hash_token("secret"), config={"cap": 2})
        store.studies.enrol(
            "main", "p-1", key_hash=hash_token("p-1"), platform={}, platform_pid=None, cap=2
        )
        qid = next(iter(loop.queries))
        store.answers.add(
            [Judgement(id="j-p1", query_id=qid, annotator_id="p-1", source="human", p=1.0)]
        )
        loop.collect()
        assert "j-p1" in {j.id for j in loop.judgements}
        store.studies.exclude("p-1", "random answers")
        loop.asker.labels()  # the next fit: dropped
        store.studies.include("p-1")  # taken back after the drop
        loop.asker.labels()
        assert "j-p1" not in {j.id for j in loop.judgements}
        state = loop.asker.state()
        loop.asker.load_state(state)  # a trainer resumed from this checkpoint
        loop.asker.resume_judgements(state["judgement_seq"])
        loop.asker.labels()
        assert "j-p1" not in {j.id for j in loop.judgements}
        assert loop.collect() == 0  # nor is it collected again
    finally:
        loop.close()
