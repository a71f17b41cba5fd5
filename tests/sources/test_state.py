"""Every feedback source declares ``persists`` and saves / restores its state: a fresh source
loaded with a saved state gives exactly the answers the saved one would have given."""

from __future__ import annotations

import json

import numpy as np
import pytest

from preflab.crowd import CrowdConfig, CrowdSource
from preflab.errors import DataError
from preflab.kinds import PAIR
from preflab.llm import (
    ChatClient,
    ClientConfig,
    LLMJudge,
    NoisyRanker,
    sample_transitions,
    state_segments,
)
from preflab.records import Judgement, Query, Segment
from preflab.sources import FeedbackSource, StoreSource
from preflab.sources.deciders import DecisionConfig, DecisionMaker
from preflab.sources.teacher import SyntheticTeacher, TeacherConfig
from preflab.store import FeedbackStore
from preflab.testing.factories import make_segments
from preflab.testing.llmserver import Reply, ScriptedServer

ENV = "PrefLab/Lock-v0"


def queries(segs: dict[str, Segment], seed: int) -> list[Query]:
    rng = np.random.default_rng(seed)
    ids = list(segs)
    out = []
    for _ in range(20):
        a, b = rng.choice(len(ids), 2, replace=False)
        out.append(PAIR.query(ids[a], ids[b]))
    return out


def answers(js: list[Judgement]) -> list[tuple[str, str, float | None]]:
    return [(j.query_id, j.annotator_id, j.p) for j in js]


def roundtrip(state: dict) -> dict:
    return json.loads(json.dumps(state))  # the state must survive JSON


MAKERS = {
    "teacher": lambda seed: SyntheticTeacher(
        TeacherConfig(beta=1.0, epsilon=0.2), np.random.default_rng(seed)
    ),
    "crowd": lambda seed: CrowdSource(
        CrowdConfig(n_users=5, answer_rate=0.6), np.random.default_rng(seed)
    ),
    "ranker": lambda seed: NoisyRanker(
        "none",
        accuracy=0.7,
        n_queries=3,
        rng=np.random.default_rng(seed),
        truth_fn=lambda a, b: (a[:, 0] > b[:, 0]).astype(np.float64),
    ),
    "decision_maker": lambda seed: DecisionMaker(
        "pairwise", DecisionConfig(noise_std=1.0), rng=np.random.default_rng(seed)
    ),
}


@pytest.mark.parametrize("kind", sorted(MAKERS))
def test_state_restores_the_generator_and_the_pending_answers(kind: str) -> None:
    segs = {
        s.id: s
        for s in make_segments(12, rng=np.random.default_rng(0), random_acts=False, id_prefix="s")
    }
    saved = MAKERS[kind](0)
    assert isinstance(saved, FeedbackSource) and saved.persists is False
    saved.submit(queries(segs, 1), segs)
    saved.collect()
    saved.submit(queries(segs, 2), segs)  # asked, not collected yet: pending
    state = roundtrip(saved.state())
    later = queries(segs, 3)
    saved.submit(later, segs)
    expected = saved.collect()

    fresh = MAKERS[kind](99)  # another seed: only the loaded state can make it agree
    fresh.load_state(state)
    fresh.submit(later, segs)
    got = fresh.collect()
    assert answers(got) == answers(expected)
    assert got[0].id == expected[0].id  # the pending judgements come back as they were
    # without the state the answers differ (the test would be vacuous otherwise)
    other = MAKERS[kind](99)
    other.submit(queries(segs, 2), segs)
    other.submit(later, segs)
    assert answers(other.collect()) != answers(expected)


def test_loading_another_kinds_state_is_an_error() -> None:
    teacher = MAKERS["teacher"](0)
    with pytest.raises(DataError, match="'crowd' source"):
        teacher.load_state(MAKERS["crowd"](0).state())


def test_llm_judge_state_keeps_uncollected_judgements() -> None:
    a, b = sample_transitions(ENV, 12, np.random.default_rng(0))
    keep = np.flatnonzero(np.any(a != b, axis=1))[:3]
    sa, sb = state_segments(a[keep], ENV), state_segments(b[keep], ENV)
    segs = {s.id: s for s in sa + sb}
    qs = [PAIR.query(x.id, y.id) for x, y in zip(sa, sb, strict=True)]
    with ScriptedServer(lambda req, n: Reply(content="Yes.")) as srv:
        cfg = ClientConfig(base_url=srv.base_url, model="m", max_retries=1, timeout_s=2.0)
        with ChatClient(cfg) as client:
            judge = LLMJudge(client, ENV, n_queries=2)
            assert isinstance(judge, FeedbackSource) and judge.persists is False
            judge.submit(qs, segs)
            state = roundtrip(judge.state())
            fresh = LLMJudge(client, ENV, n_queries=2)
            fresh.load_state(state)
            got, want = fresh.collect(), judge.collect()
    assert len(got) == 6 and [(j.id, j.p, j.meta["response"]) for j in got] == [
        (j.id, j.p, j.meta["response"]) for j in want
    ]


def test_store_source_cursor_survives_a_restart(tmp_path) -> None:
    store = FeedbackStore(tmp_path / "f.db")
    segs = {
        s.id: s
        for s in make_segments(4, rng=np.random.default_rng(0), random_acts=False, id_prefix="s")
    }
    qs = queries(segs, 0)[:4]
    store.segments.add(segs.values())
    store.queries.add(qs)

    def answer(q: Query, k: int) -> Judgement:
        return Judgement(id=f"j{k}", query_id=q.id, annotator_id="h", source="human", p=1.0)

    store.answers.add([answer(qs[0], 0), answer(qs[1], 1)])
    src = StoreSource(store)
    assert isinstance(src, FeedbackSource) and src.persists is True
    assert [j.id for j in src.collect()] == ["j0", "j1"]
    state = roundtrip(src.state())
    store.answers.add([answer(qs[2], 2)])
    fresh = StoreSource(store)
    fresh.load_state(state)
    assert [j.id for j in fresh.collect()] == ["j2"]
    assert fresh.collect() == []
    with pytest.raises(DataError, match="after_seq"):
        fresh.load_state({"kind": "store", "after_seq": -1})
