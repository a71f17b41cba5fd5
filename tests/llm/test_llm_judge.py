"""The LLM judge as a FeedbackSource, the multi-query confidence, and the noisy ranker."""

from __future__ import annotations

import numpy as np
import pytest

from preflab.aggregate import ConfidenceAggregator, Feedback, IdentityAggregator
from preflab.errors import ConfigError, DataError, SourceError
from preflab.kinds import PAIR
from preflab.llm import (
    ChatClient,
    ClientConfig,
    LLMJudge,
    MemoryCache,
    NoisyRanker,
    confidence,
    noisy_answers,
    noisy_confidences,
    sample_transitions,
    state_segments,
    true_preference,
)
from preflab.llm.prompts import text_hash
from preflab.records import Query
from preflab.sources import FeedbackSource
from preflab.testing.llmserver import Reply, ScriptedServer

ENV = "PrefLab/Lock-v0"


def _pairs(n: int, seed: int = 0):
    a, b = sample_transitions(ENV, 3 * n, np.random.default_rng(seed))
    keep = np.flatnonzero(np.any(a != b, axis=1))[:n]
    sa, sb = state_segments(a[keep], ENV), state_segments(b[keep], ENV)
    segs = {s.id: s for s in sa + sb}
    queries = [PAIR.query(x.id, y.id) for x, y in zip(sa, sb, strict=True)]
    return queries, segs


def _client(srv: ScriptedServer, cache=None) -> ChatClient:
    cfg = ClientConfig(
        base_url=srv.base_url, model="m", max_retries=1, backoff_s=0.01, timeout_s=2.0
    )
    return ChatClient(cfg, cache=cache)


def test_judge_records_prompts_responses_and_soft_labels() -> None:
    # answers cycle yes, yes, no per pair: confidence that a ≻ b is 1/3
    def script(req, n):
        return Reply(
            content=["Therefore, the answer is yes.", "Yes.", "No, it got worse."][(n - 1) % 3]
        )

    queries, segs = _pairs(4)
    with ScriptedServer(script) as srv, _client(srv) as client:
        judge = LLMJudge(client, ENV, n_queries=3)
        assert isinstance(judge, FeedbackSource)
        judge.submit(queries, segs)
        js = judge.collect()
        assert judge.collect() == []
    assert len(js) == 12 and srv.requests == 12
    for j in js:
        assert j.source == "llm" and j.annotator_id == "llm:m"
        assert j.meta["response_hash"] == text_hash(j.meta["response"])
        assert "State[0]" in j.meta["prompt"][1]["content"] and len(j.meta["prompt_hash"]) == 64
    labels = ConfidenceAggregator().labels(
        Feedback(queries={q.id: q for q in queries}, judgements=js)
    )
    assert len(labels) == 4
    for lab in labels:
        assert len(lab.judgement_ids) == 3
    # the scripted order is per request, threads may reorder, but the totals are fixed
    assert sum(lab.p for lab in labels) == pytest.approx(4 / 3)
    # identity aggregation gives the 3·4 hard labels whose mean equals the soft labels (Lemma 1)
    hard = IdentityAggregator().labels(Feedback(queries={q.id: q for q in queries}, judgements=js))
    assert len(hard) == 12 and np.mean([h.p for h in hard]) == pytest.approx(1 / 3)


def test_unparseable_and_failed_answers_are_abstentions_never_labels() -> None:
    def script(req, n):
        if n % 3 == 0:
            return Reply(status=500, body="err")
        return Reply(content="I am not sure what you mean." if n % 3 == 1 else "Yes")

    queries, segs = _pairs(3)
    with ScriptedServer(script) as srv:
        cfg = ClientConfig(base_url=srv.base_url, model="m", max_retries=0, concurrency=1)
        with ChatClient(cfg) as client:
            judge = LLMJudge(client, ENV, n_queries=3)
            judge.submit(queries, segs)
            js = judge.collect()
    skipped = [j for j in js if j.p is None]
    assert len(skipped) == 6
    assert any(j.meta["error"] and "HTTP 500" in j.meta["error"] for j in skipped)
    assert any(j.meta["answer"] is None and j.meta["response"] for j in skipped)
    labels = ConfidenceAggregator().labels(
        Feedback(queries={q.id: q for q in queries}, judgements=js)
    )
    assert all(lab.p == 0.0 and len(lab.judgement_ids) == 1 for lab in labels)


def test_all_failed_raises_but_keeps_the_abstentions() -> None:
    queries, segs = _pairs(2)
    with ScriptedServer(lambda req, n: Reply(status=503, body="down")) as srv:
        cfg = ClientConfig(base_url=srv.base_url, model="m", max_retries=0)
        with ChatClient(cfg) as client:
            judge = LLMJudge(client, ENV, n_queries=2)
            with pytest.raises(SourceError, match="all 4 language-model requests failed"):
                judge.submit(queries, segs)
            assert [j.p for j in judge.collect()] == [None] * 4


def test_warm_cache_rerun_makes_no_request() -> None:
    cache = MemoryCache()
    queries, segs = _pairs(5)
    with ScriptedServer(lambda req, n: Reply(content="yes")) as srv:
        with _client(srv, cache) as client:
            judge = LLMJudge(client, ENV, n_queries=2)
            judge.submit(queries, segs)
            first = judge.collect()
            judge.submit(queries, segs)
            second = judge.collect()
        assert srv.requests == 10
    assert [j.p for j in first] == [j.p for j in second]
    assert all(j.meta["cached"] for j in second)


def test_judge_input_errors() -> None:
    queries, segs = _pairs(1)
    with ScriptedServer(lambda req, n: Reply()) as srv, _client(srv) as client:
        with pytest.raises(ConfigError, match="no state describer"):
            LLMJudge(client, "CartPole-v1")
        judge = LLMJudge(client, ENV)
        with pytest.raises(DataError, match="not passed to submit"):
            judge.submit(queries, {})
        group = Query(id="g", kind="group", a=("x", "y"), b=("z",))
        with pytest.raises(DataError, match="pairwise comparisons only"):
            judge.submit([group], segs)
        with pytest.raises(ConfigError, match="n_queries"):
            LLMJudge(client, ENV, n_queries=0)


def test_confidence_hand_computed() -> None:
    assert confidence([1.0, 0.0, 1.0, None]) == pytest.approx(2 / 3)
    assert confidence([None, None]) is None


def test_noisy_answers_accuracy_and_ties() -> None:
    rng = np.random.default_rng(0)
    truth = np.array([1.0] * 2000 + [0.0] * 2000 + [0.5] * 2000)
    ans = noisy_answers(truth, 0.7, 5, rng)
    assert ans.shape == (6000, 5) and set(np.unique(ans)) <= {0.0, 1.0}
    correct = (ans[:4000] == truth[:4000, None]).mean()
    assert abs(correct - 0.7) < 0.015  # 20k Bernoulli(0.7) draws: sd ≈ 0.003
    assert abs(ans[4000:].mean() - 0.5) < 0.015
    exact = noisy_confidences(truth[:4000], 1.0, 3, rng)
    np.testing.assert_array_equal(exact, truth[:4000])
    with pytest.raises(ConfigError, match="accuracy"):
        noisy_answers(truth, 0.3, 1, rng)


def test_noisy_ranker_source_matches_ground_truth_at_full_accuracy() -> None:
    queries, segs = _pairs(30)
    ranker = NoisyRanker(ENV, accuracy=1.0, n_queries=2, rng=np.random.default_rng(0))
    ranker.submit(queries, segs)
    js = ranker.collect()
    assert len(js) == 60
    labels = ConfidenceAggregator().labels(
        Feedback(queries={q.id: q for q in queries}, judgements=js)
    )
    a = np.stack([segs[lab.a].obs[0] for lab in labels])
    b = np.stack([segs[lab.b].obs[0] for lab in labels])
    t = true_preference(a, b, ENV)
    strict = t != 0.5
    np.testing.assert_array_equal(np.array([lab.p for lab in labels])[strict], t[strict])


def test_judgements_round_trip_through_the_feedback_store(tmp_path) -> None:
    import preflab.store as store_mod

    queries, segs = _pairs(3)
    store = store_mod.FeedbackStore(tmp_path / "run.sqlite")
    store.segments.add(segs.values())
    store.queries.add(queries)
    answer = Reply(content="Therefore, the answer is no.")
    with (
        ScriptedServer(lambda req, n: answer) as srv,
        _client(srv, cache=store.llm_cache) as client,
    ):
        judge = LLMJudge(client, ENV, n_queries=2)
        judge.submit(queries, segs)
        store.answers.add(judge.collect())
    back = [j for _, j in store.answers.judgements(source="llm")]
    assert len(back) == 6 and all(j.p == 1.0 for j in back)
    j = back[0]
    assert j.meta["response"] == "Therefore, the answer is no."
    assert j.meta["response_hash"] == text_hash(j.meta["response"])
    assert store.llm_cache.get_cached_response(j.meta["prompt_hash"]) == j.meta["response"]
    labels = ConfidenceAggregator().labels(
        Feedback(queries={q.id: q for q in store.queries.all()}, judgements=back)
    )
    assert sorted(lab.p for lab in labels) == [1.0, 1.0, 1.0]
