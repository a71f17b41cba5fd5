"""The people's clock while the trainer waits (``preflab.loop.pacing.PeopleClock.may_train``):
it asks enough pairs that a person who answers the last one needed finds the next one already
asked (its clips rendering meanwhile), never beyond the label budget.

A small stand-in for the loop gives the clock its state; the waits end by the owner's Finish
(the store's ``finish`` setting), so each call returns after a known number of looks."""

from __future__ import annotations

import dataclasses
import itertools
from typing import Any

import numpy as np
import pytest

from preflab.config import TrainConfig
from preflab.loop import pacing
from preflab.loop.pacing import ASK_AHEAD, PeopleClock
from preflab.records import STUDIO_CREATED, Judgement, Query, Segment
from preflab.store.person_queue import pair_key
from preflab.testing.factories import make_judgement, make_query, make_segments


class _Settings:
    """The store's settings: 'finish' is set after ``looks`` reads."""

    def __init__(self, looks: int) -> None:
        self.looks = looks

    def get(self, key: str) -> Any:
        assert key == "finish"
        self.looks -= 1
        return "now" if self.looks < 0 else None


class _Store:
    def __init__(self, looks: int) -> None:
        self.settings = _Settings(looks)


class _Run:
    """What :class:`PeopleClock` reads of a loop (``PacedRun``), with ``asked`` queries open."""

    answer_hint = "answer in the studio"

    def __init__(self, config: TrainConfig, *, asked: int, answered: int, looks: int) -> None:
        self.config = config
        self.store = _Store(looks)
        self._ids = itertools.count()
        self.queries: dict[str, Query] = {}
        self.judgements: list[Judgement] = []
        self.withdrawn: set[str] = set()
        self.n_labels = 0
        self.round = 1
        self.asks: list[int] = []
        self._segments = make_segments(2, rng=np.random.default_rng(0), id_prefix="s")
        for _ in range(asked):
            self._add()
        for qid in list(self.queries)[:answered]:
            self.judgements.append(make_judgement(f"j-{qid}", qid, "p", 1.0))
        # the steps the answers so far pay for, plus one answer more
        self.env_steps = config.pretrain_steps + int(config.label_steps * answered)

    def _add(self) -> None:
        k = next(self._ids)
        self.queries[f"q{k}"] = make_query(f"q{k}", f"a{k}", f"b{k}")

    def candidates(self) -> list[Segment]:
        return self._segments

    def collect(self) -> int:
        return 0

    def ask_more(self, n_queries: int) -> None:
        self.asks.append(n_queries)
        for _ in range(n_queries):
            self._add()

    def publish_waiting(self, status: dict[str, Any]) -> None:
        return None

    def wall(self) -> float:
        return 0.0


@pytest.fixture(autouse=True)
def _no_poll_sleep(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(pacing, "WAIT_POLL_S", 0.0)


def _config() -> TrainConfig:
    cfg = TrainConfig.smoke(source="store")
    assert cfg.paced_by_labels and cfg.total_labels >= 4
    return cfg


def test_a_waiting_trainer_keeps_one_pair_ready_beyond_the_answer_it_needs() -> None:
    cfg = _config()
    # one pair asked and open; the trainer needs one answer to take its next steps
    run = _Run(cfg, asked=1, answered=0, looks=1)
    assert PeopleClock.answers_needed(run, int(cfg.label_steps)) == 1
    assert PeopleClock().may_train(run, int(cfg.label_steps)) == "owner"
    assert run.asks == [ASK_AHEAD]  # before: nothing asked, so the next pair came only after
    assert len(PeopleClock().open_queries(run)) == 1 + ASK_AHEAD


def test_a_person_who_answered_everything_gets_the_pair_needed_and_one_more() -> None:
    cfg = _config()
    run = _Run(cfg, asked=2, answered=2, looks=1)
    assert PeopleClock.answers_needed(run, int(cfg.label_steps)) == 1
    assert PeopleClock().may_train(run, int(cfg.label_steps)) == "owner"
    assert run.asks == [1 + ASK_AHEAD]


def test_nothing_is_asked_beyond_the_label_budget() -> None:
    cfg = _config()
    n = cfg.total_labels
    # every label of the budget asked, all but one answered: the last one is open
    run = _Run(cfg, asked=n, answered=n - 1, looks=1)
    assert PeopleClock.answers_needed(run, int(cfg.label_steps)) == 1
    assert PeopleClock().may_train(run, int(cfg.label_steps)) == "owner"
    assert run.asks == []
    # one label of the budget left unasked: only that one is asked
    run = _Run(cfg, asked=n - 1, answered=n - 2, looks=1)
    PeopleClock().may_train(run, int(cfg.label_steps))
    assert run.asks == [1]


def test_asking_ahead_happens_once_while_the_trainer_keeps_waiting() -> None:
    cfg = _config()
    run = _Run(cfg, asked=1, answered=0, looks=5)  # five looks, nobody answers
    assert PeopleClock().may_train(run, int(cfg.label_steps)) == "owner"
    assert run.asks == [ASK_AHEAD]  # the open pairs suffice on every later look


def test_nothing_is_asked_ahead_that_the_rest_of_the_run_cannot_use() -> None:
    # 100 env steps per answer: the 400 steps after the first ones take 4 of the 12 labels
    cfg = TrainConfig.smoke(source="store", steps_per_label=100)
    assert cfg.total_labels == 12 and cfg.total_steps - cfg.pretrain_steps == 400
    run = _Run(cfg, asked=3, answered=3, looks=1)  # every pair asked is answered
    run.env_steps = cfg.total_steps - 100  # the last 100 steps need the 4th answer, the last
    assert PeopleClock.answers_needed(run, 100) == 1
    assert PeopleClock().may_train(run, 100) == "owner"
    assert run.asks == [1]  # a pair asked ahead here would be left open when the run ends


# ----- what a look costs: the sets a poll reads are kept up, not rebuilt --------------------------
def _open_recomputed(run: Any) -> list[str]:
    """PeopleClock.open_queries as it was, every set rebuilt from scratch (the reference)."""
    answered = {j.query_id for j in run.judgements}
    done = {pair_key(run.queries[q]) for q in answered if q in run.queries}
    out: list[str] = []
    for qid, q in run.queries.items():
        key = pair_key(q)
        composed = q.meta.get("created_by") == STUDIO_CREATED
        if qid in answered or qid in run.withdrawn or key in done or composed:
            continue
        done.add(key)
        out.append(qid)
    return out


def _asked_recomputed(run: Any) -> int:
    answered = {j.query_id for j in run.judgements}
    return sum(
        qid not in run.withdrawn and (q.meta.get("created_by") != STUDIO_CREATED or qid in answered)
        for qid, q in run.queries.items()
    )


def test_the_sets_kept_up_between_looks_match_them_recomputed_after_every_change() -> None:
    rng = np.random.default_rng(7)
    segs = [f"s{k}" for k in range(6)]  # few segments: the same pair is asked again, either way
    run = _Run(_config(), asked=0, answered=0, looks=0)
    clock = PeopleClock()
    n_q = n_j = 0
    for step in range(400):
        op = rng.choice(["ask", "ask", "compose", "answer", "answer", "withdraw", "drop", "resume"])
        if op in ("ask", "compose"):
            a, b = rng.choice(segs, 2, replace=False)
            q = (
                make_query(f"q{n_q}", str(a), str(b), round=step // 50)
                if op == "ask"
                else make_query(f"q{n_q}", [str(a)], [str(b)], meta={"created_by": STUDIO_CREATED})
            )
            run.queries[q.id] = q
            n_q += 1
        elif op == "answer" and run.queries:
            qid = str(rng.choice(list(run.queries)))
            run.judgements.append(make_judgement(f"j{n_j}", qid, "p", 1.0))  # appended in place
            n_j += 1
        elif op == "withdraw" and run.queries:
            run.withdrawn.add(str(rng.choice(list(run.queries))))
        elif op == "drop" and run.judgements:  # some stop counting: a new, shorter list
            keep = rng.random(len(run.judgements)) < 0.7
            run.judgements = [j for j, k in zip(run.judgements, keep, strict=True) if k]
        elif op == "resume":  # the same queries read back as new objects, the lists replaced
            run.queries = {qid: dataclasses.replace(q) for qid, q in run.queries.items()}
            run.judgements = list(run.judgements)
            run.withdrawn = set(run.withdrawn)
        assert clock.open_queries(run) == _open_recomputed(run), (step, op)
        answered = clock._answered.of(run.judgements)
        assert answered == {j.query_id for j in run.judgements}, (step, op)
        assert PeopleClock.asked(run, answered) == PeopleClock.asked(run) == _asked_recomputed(run)
    assert n_q > 100 and n_j > 50 and run.withdrawn  # every kind of change happened


def test_an_id_given_other_sides_is_worked_out_again() -> None:
    run = _Run(_config(), asked=2, answered=0, looks=0)
    clock = PeopleClock()
    assert clock.open_queries(run) == ["q0", "q1"]
    run.queries["q1"] = make_query("q1", "a0", "b0")  # q0's pair now: one question, not two
    assert clock.open_queries(run) == ["q0"]
    # a list changed in place where it was read is read afresh
    run.judgements.append(make_judgement("j0", "q0", "p", 1.0))
    assert clock.open_queries(run) == []
    run.judgements[0] = make_judgement("j1", "q9", "p", 1.0)
    assert clock.open_queries(run) == ["q0"]


def test_a_look_works_out_each_pair_key_once(monkeypatch: pytest.MonkeyPatch) -> None:
    """Waiting for people, each look used to rebuild every pair key (two sorted joins per
    query, several times a look): ~90 ms a look at 20k queries. Now each query's once."""
    calls = []

    def counted(q: Query) -> tuple[str, ...]:
        calls.append(q.id)
        return pair_key(q)

    monkeypatch.setattr(pacing, "pair_key", counted)
    cfg = _config()
    run = _Run(cfg, asked=3, answered=2, looks=6)
    clock = PeopleClock()
    assert clock.may_train(run, int(cfg.label_steps)) == "owner"
    assert sorted(calls) == sorted(run.queries)  # six looks, one ask ahead: each query once
    calls.clear()
    run.judgements.append(make_judgement("j-new", "q2", "p", 1.0))
    assert clock.open_queries(run) == _open_recomputed(run) and calls == []
