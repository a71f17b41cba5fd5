"""Pref-GUIDE through the one loop: live ratings → stored rating streams → windowed labels →
the same agent continues on the learned reward."""

from __future__ import annotations

from math import comb

import numpy as np
import pytest
import torch

from preflab.aggregate import Feedback, WindowAggregator
from preflab.envs import make_vec_env
from preflab.errors import ConfigError, DataError
from preflab.kinds import PAIR
from preflab.policy.reward_wrapper import LearnedRewardVecEnv, SegmentRecorder
from preflab.policy.shaping import PolicyReward, PolicyRewardConfig, route_policy_reward
from preflab.records import Query, Rating
from preflab.reward import FitConfig, RewardConfig, RewardEnsemble
from preflab.runs import start_loop
from preflab.sources import StoreSource
from preflab.sources.evaluators import EvaluatorConfig
from preflab.sources.raters import NoQueries, SimulatedRaters
from preflab.store import FeedbackStore
from preflab.testing.factories import make_segment
from preflab_bench._prefguide_runs import (
    BinaryVoting,
    CappedLabels,
    GuideConfig,
    SampledWindows,
    make_aggregator,
    make_source,
    method_runs,
    train_config,
)

torch.set_num_threads(1)
EVALS = [EvaluatorConfig(), EvaluatorConfig(noise=0.3, gain=1.0)]
TINY = GuideConfig(
    n_envs=2,
    human_steps=512,
    post_steps=256,
    steps_per_round=256,
    item_length=2,
    eval_episodes=1,
    max_pairs=100_000,
)


def test_live_rating_is_the_policy_reward_and_keys_match_the_recorder() -> None:
    venv = make_vec_env("Pendulum-v1", 2, seed=0)
    rec = SegmentRecorder(venv, 3, env_id="Pendulum-v1")
    raters = SimulatedRaters(EVALS, 2, np.random.default_rng(0), scale=2.0)
    ens = RewardEnsemble(3, 1, RewardConfig(members=1, hidden=(4,)))
    with torch.no_grad():  # a constant learned reward: raw 0, standardised to (0 − (−1)) / 1 = 1
        ens.weights[-1].zero_()
        ens.biases[-1].zero_()
        ens.mix_mean.fill_(-1.0)
    pr = PolicyReward(PolicyRewardConfig(live_steps=100), model=ens, live=raters)
    pr.fitted = True
    env = LearnedRewardVecEnv(rec, pr)
    env.reset()
    rng = np.random.default_rng(1)
    for t in range(12):
        _o, rew, _d, infos = env.step(rng.uniform(-2, 2, size=(2, 1)).astype(np.float32))
        for e in range(2):  # the reward is the mean of the evaluators' ratings of that step
            _t, vals = raters._pending[(e * 1_000_000, t)]
            assert rew[e] == pytest.approx(vals.mean(), abs=1e-6)
            assert np.all(np.abs(vals) <= 1)
        assert "true_reward" in infos[0]
    batch = raters.ratings(rec.pop_segments())
    # 12 steps per env = 4 items of 3 steps: one stream per env, every step rated by both
    assert len(batch.queries) == 2 and all(len(q.a) == 4 for q in batch.queries)
    assert len(batch.ratings) == 2 * 12 * 2 and not raters._pending
    steps = sorted({(r.stream_id, r.step) for r in batch.ratings})
    assert [s for q, s in steps if q == batch.queries[0].id] == list(range(12))
    pr.end_live()  # post-human phase: the learned (here: constant) reward
    _o, rew, _d, _i = env.step(np.zeros((2, 1), np.float32))
    np.testing.assert_allclose(rew, [1.0, 1.0])


def test_live_phase_stores_rating_streams_and_post_phase_fits_on_window_labels(tmp_path) -> None:
    (run,) = method_runs(TINY, 2, 0, methods=("pooled",))
    loop = start_loop(
        run.train,
        tmp_path / "run",
        source=make_source(TINY, EVALS, 0),
        selector=NoQueries(),
        aggregator=WindowAggregator(window=TINY.window, delta=TINY.delta),
    )
    summary = loop.run()
    assert np.isfinite(summary.true_return)
    assert loop.reward.live is None  # the live phase ended, the same run went on
    store = FeedbackStore(tmp_path / "run" / "feedback.db", array_dir=tmp_path / "run" / "segments")
    streams = store.queries.all()
    assert streams and all(q.kind == "rating" for q in streams)
    ratings = store.ratings.all()
    assert {r.annotator_id for r in ratings} == {"evaluator-0", "evaluator-1"}
    segs = {s.id: s for s in store.segments.all()}
    n_steps = 0
    for q in streams:  # a stream = consecutive items of one episode
        items = [segs[s] for s in q.a]
        assert len({s.episode for s in items}) == 1
        assert [s.start for s in items] == [items[0].start + 2 * k for k in range(len(items))]
        n_steps += 2 * len(items)
    assert len(ratings) == 2 * n_steps  # every step of every item, by both evaluators
    live_steps = run.train.policy_reward.live_steps
    assert n_steps <= loop.state.history[-1]["env_steps"]
    assert n_steps >= live_steps - 2 * 2 * 10  # a few steps of cut-off items are lost
    # the labels the post-human phase fits on: Algorithm 1 on the stored data, counted by hand
    fb = Feedback(queries={q.id: q for q in streams}, judgements=(), ratings=ratings, segments=segs)
    labels = WindowAggregator(window=10).labels(fb)
    expect = sum(2 * max(0, len(q.a) - 9) * comb(10, 2) for q in streams)
    assert len(labels) == expect > 0
    assert {lab.p for lab in labels} <= {0.0, 0.5, 1.0}
    # the bench's capped Algorithm 1: the same labels below the cap, a uniform subset above
    assert SampledWindows(max_labels=len(labels)).labels(fb) == labels
    few = SampledWindows(max_labels=100, seed=3).labels(fb)
    assert len(few) == 100 and set(map(repr, few)) <= set(map(repr, labels))
    post = [r for r in loop.state.history if r["env_steps"] > live_steps]
    assert post and all(r["n_labels"] == len(labels) for r in post)
    assert all(np.isfinite(r["reward_train_loss"]) for r in post)
    store.close()


def test_method_aggregators() -> None:
    runs = method_runs(TINY, 3, 0)
    assert [r.method for r in runs] == [
        "individual",
        "individual",
        "individual",
        "voting",
        "pooled",
        "majority",
    ]
    assert [r.evaluator for r in runs[:3]] == ["evaluator-0", "evaluator-1", "evaluator-2"]
    ind = runs[0].aggregator
    assert isinstance(ind, SampledWindows) and ind.annotators == ("evaluator-0",)
    assert runs[4].aggregator.annotators is None  # type: ignore[attr-defined]  # pooled
    assert isinstance(runs[3].aggregator, CappedLabels)
    assert isinstance(runs[5].aggregator.inner, BinaryVoting)  # type: ignore[attr-defined]
    with pytest.raises(ConfigError, match="evaluator"):
        make_aggregator("individual", TINY, 0)
    with pytest.raises(ConfigError, match="method"):
        make_aggregator("regression", TINY, 0)
    tc = train_config(TINY, 0)
    assert tc.policy_reward.live_steps == TINY.human_steps and tc.segment_length == 2
    assert tc.total_steps == TINY.human_steps + TINY.post_steps


def _stream(store: FeedbackStore) -> Query:
    segs = [
        make_segment(f"s-{k}", obs=np.full((2, 3), k, np.float32), episode=0, start=2 * k)
        for k in range(3)
    ]
    store.segments.add(segs)
    q = Query(id="stream-0", kind="rating", a=tuple(s.id for s in segs))
    store.queries.add([q])
    return q


def test_store_source_drains_new_ratings_by_sequence(tmp_path) -> None:
    store = FeedbackStore(tmp_path / "fb.db", array_dir=tmp_path / "arr")
    q = _stream(store)
    src = StoreSource(store)
    assert len(src.ratings()) == 0
    store.ratings.add(
        Rating(annotator_id="ann", stream_id=q.id, step=k, t=0.1 * k, value=0.1) for k in range(4)
    )
    got = src.ratings()
    assert [r.step for r in got.ratings] == [0, 1, 2, 3]
    assert [x.id for x in got.queries] == [q.id] and len(got.segments) == 3
    assert len(src.ratings()) == 0  # each row once
    store.ratings.add([Rating(annotator_id="ann", stream_id=q.id, step=5, t=1.0, value=-0.5)])
    assert [r.step for r in src.ratings().ratings] == [5]
    store.close()


def test_bad_live_configurations_are_refused() -> None:
    ens = RewardEnsemble(3, 1, RewardConfig(members=1, hidden=(4,)))
    with pytest.raises(ConfigError, match="live"):
        PolicyReward(PolicyRewardConfig(live_steps=10), model=ens)
    with pytest.raises(ConfigError, match="--no-relabel"):
        route_policy_reward(
            PolicyRewardConfig(live_steps=10),
            use_actions=True,
            algo="sac",
            relabel=True,
            absorbing=False,
        )
    raters = SimulatedRaters(EVALS, 1, np.random.default_rng(0), scale=1.0)
    with pytest.raises(DataError, match="NoQueries"):
        raters.submit([PAIR.query("a", "b")], {})
    with pytest.raises(ConfigError, match="ids"):
        SimulatedRaters(EVALS, 1, np.random.default_rng(0), scale=1.0, ids=["x", "x"])


def test_simulated_raters_state_round_trip() -> None:
    a = SimulatedRaters(EVALS, 2, np.random.default_rng(3), scale=2.0)
    for t in range(5):
        a.rate(np.array([-1.0, -2.0]), np.array([0, 1_000_000]), np.array([t, t]))
    state = a.state()
    b = SimulatedRaters(EVALS, 2, np.random.default_rng(99), scale=2.0)
    b.load_state(state)
    x = a.rate(np.array([-3.0, 0.0]), np.array([0, 1_000_000]), np.array([5, 5]))
    y = b.rate(np.array([-3.0, 0.0]), np.array([0, 1_000_000]), np.array([5, 5]))
    np.testing.assert_array_equal(x, y)
    assert a._pending.keys() == b._pending.keys()


def test_people_rate_published_streams_through_the_store(tmp_path, pendulum_ppo_config) -> None:
    """The studio path: the trainer publishes rating streams, people write Rating rows into
    the store (here: a progress callback acting as the person), the loop reads them by
    sequence number and fits on their windowed labels."""
    from preflab.sources.raters import StreamSelector

    run = tmp_path / "run"
    run.mkdir()
    studio = FeedbackStore(run / "feedback.db", array_dir=run / "segments")
    written: list[Rating] = []

    def person(_row: dict) -> None:
        rated = {r.stream_id for r in written}
        for q in studio.queries.all():
            if q.kind != "rating" or q.id in rated:
                continue
            rew = np.concatenate([s.true_rewards for s in studio.segments.get(list(q.a))])
            new = [
                Rating(annotator_id="ann", stream_id=q.id, step=k, t=0.05 * k, value=v)
                for k, v in enumerate(np.clip(rew / 8.0 + 1.0, -1, 1).tolist())
            ]
            studio.ratings.add(new)
            written.extend(new)

    cfg = pendulum_ppo_config(
        n_envs=2,
        total_steps=640,
        total_labels=20,
        initial_label_frac=0.5,
        initial_steps=64,
        steps_per_round=192,
        segment_length=2,
        schedule="constant",
        reward=RewardConfig(members=1, hidden=(16,)),
        # two epochs a fit (defaults: 40 for the first, 10 after): what is checked is which
        # ratings the loop read and that it fitted on their labels, not how well
        first_fit_epochs=2,
        fit=FitConfig(epochs=2),
    )
    loop = start_loop(
        cfg,
        run,
        source=StoreSource(studio),
        selector=StreamSelector(min_items=10),
        aggregator=WindowAggregator(window=10),
        progress=person,
    )
    loop.run()
    streams = [q for q in studio.queries.all() if q.kind == "rating"]
    assert streams and len({q.id for q in streams}) == len(streams)
    items = [s for q in streams for s in q.a]
    assert len(items) == len(set(items))  # every item published once
    assert written and len(loop.ratings) <= len(written)
    assert {(r.stream_id, r.step) for r in loop.ratings} <= {(r.stream_id, r.step) for r in written}
    assert len(loop.ratings) == len({(r.stream_id, r.step) for r in loop.ratings})  # read once
    assert loop.fitted and loop.state.history[-1]["n_labels"] > 0
    studio.close()


def test_each_evaluator_trains_its_own_agent_and_every_method_continues_from_it(
    tmp_path,
) -> None:
    """The bench's design: evaluator k's agent is rated by k alone during the human phase;
    each post-human method continues a copy of that run on a fixed reward model."""
    from preflab.aggregate.capped import NoLabels
    from preflab.policy.agents import relabel_replay_buffer
    from preflab_bench._prefguide_runs import (
        continue_on_reward,
        evaluator_models,
        evaluator_source,
        human_config,
        post_reward_models,
    )

    cfg = GuideConfig(
        algo="sac",
        n_envs=1,
        human_steps=150,
        post_steps=60,
        steps_per_round=75,
        item_length=3,
        eval_episodes=1,
        max_pairs=300,
    )
    ids = ["evaluator-0", "evaluator-1"]
    models, dirs = [], []
    for k, eid in enumerate(ids):
        loop = start_loop(
            human_config(cfg, 10 + k),
            tmp_path / f"{eid}-human",
            source=evaluator_source(cfg, EVALS[k], eid, 0, k),
            selector=NoQueries(),
            aggregator=NoLabels(),
        )
        loop.run()
        assert {r.annotator_id for r in loop.ratings} == {eid}  # rated by its evaluator only
        assert not loop.fitted and loop.recorder.steps == cfg.human_steps
        fb = Feedback(
            queries=loop.queries, judgements=(), ratings=loop.ratings, segments=loop.segments
        )
        models.append(evaluator_models(fb, eid, cfg, np.random.default_rng(k)))
        loop.venv.close()
        loop.store.close()
        dirs.append(tmp_path / f"{eid}-human")
    # the two agents lived different episodes (their own seeds, their own raters)
    assert not np.array_equal(models[0].items.obs.numpy(), models[1].items.obs.numpy())
    # voting: every evaluator's model votes on evaluator 0's window pairs
    voted = post_reward_models(models, "voting", cfg, 0)
    assert len(voted) == 2 and voted[0] is not models[0].individual
    assert len(post_reward_models(models, "majority", cfg, 0)) == 2
    with pytest.raises(ConfigError, match="post-human method"):
        post_reward_models(models, "pooled", cfg, 0)
    before = sorted(p.name for p in (dirs[0] / "checkpoints").iterdir())
    reward = models[0].regression
    result = continue_on_reward(
        dirs[0],
        tmp_path / "evaluator-0-regression",
        train_config(cfg, 10),
        reward,
        models[0].items,
        evaluator_source(cfg, EVALS[0], ids[0], 0, 0),
    )
    assert result.env_steps == cfg.human_steps + cfg.post_steps  # continued, not restarted
    assert sorted(p.name for p in (dirs[0] / "checkpoints").iterdir()) == before
    # the post-human reward is the given model, never refit
    obs = models[0].items.obs[:, 0].numpy()
    acts = models[0].items.acts[:, 0].numpy()
    np.testing.assert_allclose(
        result.reward_model.predict(obs, acts), reward.predict(obs, acts), rtol=1e-5
    )
    # and the whole replay buffer (human phase included) carries that reward
    agent = result.agent
    n = agent.replay_buffer.pos
    stored = agent.replay_buffer.rewards[:n, 0].copy()
    relabel_replay_buffer(agent, lambda o, a, _n: result.reward_model.reward(o, a))
    np.testing.assert_allclose(stored, agent.replay_buffer.rewards[:n, 0], rtol=1e-4, atol=1e-5)
    assert n == cfg.human_steps + cfg.post_steps and np.std(stored) > 0
