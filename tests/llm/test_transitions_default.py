"""The language-model judge ranks consecutive states of one trajectory (paper 004, issue #27):
'auto' picks the transition sampler for --source llm, a rollout selector with long segments is
refused, and the sampler's pairs come back the same after a resume."""

import numpy as np

from preflab.config import TrainConfig
from preflab.config.constraints import llm_constraints
from preflab.llm.transitions import TransitionSelector
from preflab.reward import RewardConfig
from preflab.testing.llmserver import Reply, ScriptedServer


def test_auto_means_transitions_for_the_llm_and_disagreement_otherwise() -> None:
    assert TrainConfig(source="llm").selector_in_use == "transitions"
    assert TrainConfig().selector_in_use == "disagreement"
    assert TrainConfig(source="llm", selector="random").selector_in_use == "random"


def test_unrelated_segments_or_actions_for_the_judge_are_refused() -> None:
    env = "PrefLab/NoLock-v0"
    states = RewardConfig(use_actions=False)
    bad = TrainConfig.smoke(env_id=env, source="llm", selector="disagreement", reward=states)
    (msg,) = llm_constraints(bad, None)
    assert "consecutive states" in msg
    assert "--selector transitions" in msg and "--segment-length 1" in msg
    (msg,) = llm_constraints(TrainConfig.smoke(env_id=env, source="llm"), None)
    assert "--reward.no-use-actions" in msg  # single states carry no action
    assert llm_constraints(TrainConfig.smoke(env_id=env, source="llm", reward=states), None) == []
    ok = TrainConfig.smoke(env_id=env, source="llm", selector="random", segment_length=1)
    assert llm_constraints(ok, None) == []


def test_the_sampler_continues_after_a_resume_with_the_same_pairs() -> None:
    """A seeded sampler hands out pairs from its own generator: a fresh one with the saved
    cursor gives exactly the pairs the first would have given next, whatever RNG the loop
    passes."""
    first = TransitionSelector("PrefLab/NoLock-v0", 8, seed=5)
    asked = first.select([], None, 3, np.random.default_rng(0))
    later = first.select([], None, 3, np.random.default_rng(1))
    again = TransitionSelector("PrefLab/NoLock-v0", 8, seed=5)
    again.load_state({"next": 3})
    resumed = again.select([], None, 3, np.random.default_rng(99))
    assert [q.id for q in resumed] == [q.id for q in later]
    assert not {q.id for q in asked} & {q.id for q in later}
    assert first.state() == {"next": 6}


def test_a_default_llm_run_asks_one_step_transitions(tmp_path) -> None:
    from preflab.runs import train
    from preflab.store import FeedbackStore

    with ScriptedServer(lambda req, n: Reply(content="Yes.")) as srv:
        from preflab.config import LLMSourceConfig

        cfg = TrainConfig.smoke(
            env_id="PrefLab/NoLock-v0",
            source="llm",
            reward=RewardConfig(use_actions=False),
            llm=LLMSourceConfig(base_url=srv.base_url, model="tiny"),
        )
        result = train(cfg, run_dir=tmp_path / "run")
    assert result.n_labels == cfg.total_labels
    store = FeedbackStore(tmp_path / "run" / "feedback.db")
    try:
        queries = store.queries.all()
        assert queries and all(q.meta.get("transition") for q in queries)
        segs = store.segments.get([s for q in queries for s in (*q.a, *q.b)])
        assert {s.length for s in segs} == {1}
    finally:
        store.close()
