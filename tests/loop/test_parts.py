"""The loop's parts on their own: the asker's schedule and judgement ids, and the size rule of
issue #57 (every module of the loop package at most 500 lines, one job each)."""

from __future__ import annotations

from pathlib import Path
from types import SimpleNamespace
from typing import Any

import numpy as np

import preflab.loop
from preflab.config import TrainConfig
from preflab.loop.asking import Asker
from preflab.loop.results import derived_id
from preflab.testing.factories import make_judgement, make_query

MAX_LINES = 500
"""Lines a module of the loop package may have (issue #57)."""


def _asker(**config: Any) -> Asker:
    """An asker over stand-ins for the parts it only keeps (nothing here calls them)."""
    parts = SimpleNamespace(
        store=None,
        source=None,
        selector=None,
        aggregator=None,
        bridge=None,
        hooks=None,
        rng=np.random.default_rng(0),
        tag=7,
        warnings=None,
    )
    return Asker(TrainConfig(**config), parts)  # type: ignore[arg-type]


def test_loop_modules_stay_small() -> None:
    root = Path(preflab.loop.__file__).parent
    sizes = {p.name: len(p.read_text().splitlines()) for p in root.glob("*.py")}
    assert {"rounds.py", "asking.py", "rollouts.py"} <= set(sizes)
    assert max(sizes.values()) <= MAX_LINES, sizes


def test_due_follows_the_schedule_and_asks_withdrawn_queries_again() -> None:
    asker = _asker(
        total_steps=3000,
        initial_steps=1000,
        steps_per_round=1000,  # 2 rounds after the initial one
        total_labels=10,
        initial_label_frac=0.3,
        schedule="constant",
    )
    assert asker.schedule == [3, 4, 3]
    assert asker.due(0) == 3
    asker.queries.update({f"q{i}": make_query(f"q{i}", f"a{i}", f"b{i}") for i in range(3)})
    assert asker.due(0) == 0 and asker.due(1) == 4
    asker.withdrawn.add("q0")  # withdrawn unanswered: it is asked again
    assert asker.due(0) == 1 and asker.due(2) == 8


def test_judgement_ids_number_each_annotators_answers_to_a_query() -> None:
    asker = _asker()
    answers = [("t", 1.0), ("t", 0.0), ("u", 1.0)]
    first = asker._identify([make_judgement("", "q1", who, p) for who, p in answers])
    assert [j.id for j in first] == [
        derived_id("j", "q1", "t", 0),
        derived_id("j", "q1", "t", 1),
        derived_id("j", "q1", "u", 0),
    ]
    asker.judgements.extend(first)  # the next answer of t to q1 is its third
    (later,) = asker._identify([make_judgement("", "q1", "t", 0.5)])
    assert later.id == derived_id("j", "q1", "t", 2)


def test_an_answer_to_a_query_not_asked_is_equal_at_one_half() -> None:
    asker = _asker()
    assert asker.is_equal(make_judgement("j", "elsewhere", "t", 0.5))
    assert not asker.is_equal(make_judgement("k", "elsewhere", "t", 1.0))
