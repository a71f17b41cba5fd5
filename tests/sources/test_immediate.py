"""The pending-judgement queue every at-once source holds (:mod:`preflab.sources.immediate`)."""

from __future__ import annotations

import json

import numpy as np
import pytest

from preflab.errors import DataError
from preflab.records import Judgement, new_id
from preflab.sources.immediate import PendingJudgements


def _j(p: float) -> Judgement:
    return Judgement(id=new_id("j"), query_id="q-1", annotator_id="a", source="synthetic", p=p)


def test_collect_drains_in_order_and_state_round_trips() -> None:
    q = PendingJudgements("teacher")
    q.add(_j(1.0))
    q.extend([_j(0.0), _j(0.5)])
    rng = np.random.default_rng(3)
    rng.random(5)
    st = json.loads(json.dumps(q.state(rng, stats={"n": 3})))
    assert list(st) == ["kind", "rng", "stats", "pending"] and st["kind"] == "teacher"
    assert [j.p for j in q.collect()] == [1.0, 0.0, 0.5] and q.collect() == [] and len(q) == 0
    fresh, rng2 = PendingJudgements("teacher"), np.random.default_rng(99)
    fresh.load_state(st, rng2, ("stats",))
    assert [j.p for j in fresh.collect()] == [1.0, 0.0, 0.5]
    assert rng2.random() == rng.random()  # the generator continues where it was saved


def test_a_state_of_another_kind_or_without_its_keys_is_refused() -> None:
    st = PendingJudgements("llm").state()
    assert list(st) == ["kind", "pending"]
    with pytest.raises(DataError, match="not of a 'crowd' source"):
        PendingJudgements("crowd").load_state(st)
    with pytest.raises(DataError, match="lacks"):
        PendingJudgements("llm").load_state(st, np.random.default_rng(0))
