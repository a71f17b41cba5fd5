"""A short end-to-end run: sample consecutive states, ask the noisy ranker N times, aggregate
to confidences, fit σ, and check that σ ranks fresh pairs well (better than the ranker)."""

from __future__ import annotations

import numpy as np
import pytest
import torch

from preflab.aggregate import ConfidenceAggregator, Feedback
from preflab.llm import (
    ChatClient,
    ClientConfig,
    LLMJudge,
    MemoryCache,
    NoisyRanker,
    ScoreConfig,
    fit_state_scores_from_labels,
    sample_transitions,
    transition_queries,
    true_preference,
)
from preflab.testing.llmserver import Reply, ScriptedServer

torch.set_num_threads(1)
ENV = "PrefLab/NoLock-v0"


def _queries(n: int, seed: int):
    queries, segs, _, _ = transition_queries(ENV, n, np.random.default_rng(seed), oversample=2)
    return queries, segs


def _accuracy(scorer, seed: int, *, moves_only: bool = False) -> float:
    ta, tb = sample_transitions(ENV, 600, np.random.default_rng(seed))
    t = true_preference(ta, tb, ENV)
    m = t != 0.5
    if moves_only:  # pairs where the agent changed cell (what a position-only judge can tell)
        m &= np.any(ta[:, :2] != tb[:, :2], axis=1)
    return float(((scorer.scores(ta) > scorer.scores(tb))[m] == (t[m] == 1)).mean())


@pytest.mark.parametrize("seed", [0])
def test_noisy_ranker_multi_query_loop_learns(seed: int) -> None:
    queries, segs = _queries(1500, seed)
    ranker = NoisyRanker(ENV, accuracy=0.7, n_queries=5, rng=np.random.default_rng(seed))
    ranker.submit(queries, segs)
    labels = ConfidenceAggregator().labels(
        Feedback(queries={q.id: q for q in queries}, judgements=ranker.collect())
    )
    assert len(labels) == len(queries)
    scorer = fit_state_scores_from_labels(
        list(segs.values()), labels, np.random.default_rng(seed), ScoreConfig(epochs=12)
    )
    # a single answer is right 70% of the time; σ fit on 5-query confidences does far better
    assert _accuracy(scorer, 100 + seed) > 0.85


def test_llm_judge_loop_through_a_local_server_uses_the_answers() -> None:
    # the "model" answers from the prompt: yes iff State[1] is closer to the goal (Manhattan);
    # the judge's labels must then train a σ that ranks fresh pairs well.
    import re

    def script(req, n):
        text = req["messages"][1]["content"].split("Q: State[0]:")[-1]
        pos = [tuple(map(int, m)) for m in re.findall(r"agent is at \((\d+), (\d+)\)", text)]
        goal = (
            tuple(map(int, re.findall(r"goal is at \((\d+), (\d+)\)", text)[0]))
            if "goal is at" in text
            else pos[1]
        )
        d = [abs(x - goal[0]) + abs(y - goal[1]) for x, y in pos]
        if d[1] == d[0]:
            return Reply(content="I cannot tell from these descriptions.")  # → abstention
        return Reply(
            content="Therefore, the answer is yes." if d[1] < d[0] else "The answer is no."
        )

    queries, segs = _queries(600, 3)
    with ScriptedServer(script) as srv:
        cfg = ClientConfig(base_url=srv.base_url, model="scripted", temperature=0.0)
        with ChatClient(cfg, cache=MemoryCache()) as client:
            judge = LLMJudge(client, ENV, n_queries=1)
            judge.submit(queries, segs)
            js = judge.collect()
    assert any(j.p is None for j in js) and any(j.p is not None for j in js)
    labels = ConfidenceAggregator().labels(
        Feedback(queries={q.id: q for q in queries}, judgements=js)
    )
    scorer = fit_state_scores_from_labels(
        list(segs.values()), labels, np.random.default_rng(0), ScoreConfig(epochs=15)
    )
    assert _accuracy(scorer, 7, moves_only=True) > 0.75


@pytest.mark.slow
def test_core_training_loop_with_the_noisy_ranker_as_source(tmp_path) -> None:
    from preflab.config import TrainConfig
    from preflab.reward import RewardConfig
    from preflab.runs import train

    cfg = TrainConfig(
        env_id=ENV,
        algo="ppo",
        seed=0,
        total_steps=2048,
        total_labels=120,
        initial_steps=512,
        steps_per_round=512,
        segment_length=1,
        selector="random",
        pool_size=300,
        n_envs=4,
        reward=RewardConfig(members=1, use_actions=False),
        eval_episodes=2,
        first_fit_epochs=10,
    )
    from preflab.selection.selectors import RandomSelector

    class DistinctRandom:
        """The core's RandomSelector on candidates with distinct ids: small grids repeat
        states, and two candidates with one content id would form an invalid pair."""

        def select(self, candidates, ensemble, n_queries, rng, *, round=0):
            unique = list({c.id: c for c in candidates}.values())
            return RandomSelector().select(unique, ensemble, n_queries, rng, round=round)

    ranker = NoisyRanker(ENV, accuracy=0.8, n_queries=5, rng=np.random.default_rng(0))
    summary = train(
        cfg,
        run_dir=tmp_path,
        source=ranker,
        selector=DistinctRandom(),
        aggregator=ConfidenceAggregator(),
    )
    # every label is one pair's 5-answer confidence
    assert summary.n_labels == 120 and summary.n_judgements == 5 * 120
    assert summary.env_steps >= 2048
