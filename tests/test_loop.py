"""The loop end to end on Pendulum-v1 (small budgets): outputs, learning, resume, bad input."""

import json
import math

import numpy as np
import pytest

from preflab.config import TrainConfig
from preflab.errors import ConfigError
from preflab.loop import label_schedule
from preflab.policy.evaluate import evaluate_policy
from preflab.reward import FitConfig
from preflab.runs import resume, start_loop, train
from preflab.sources.teacher import SyntheticTeacher, bpref_teacher
from preflab.store import FeedbackStore

SMALL = dict(
    env_id="Pendulum-v1",
    algo="sac",
    total_steps=4000,
    total_labels=40,
    initial_steps=1000,
    steps_per_round=1000,
    eval_episodes=5,
)


class RandomAgent:
    def __init__(self, space, seed: int) -> None:
        self.space = space
        self.space.seed(seed)

    def predict(self, obs, deterministic=True):
        return self.space.sample(), None


def test_label_schedule_spends_exactly_the_budget() -> None:
    for total, frac, rounds, kind in [
        (100, 0.25, 19, "hyperbolic"),
        (7, 0.0, 3, "constant"),
        (200, 0.1, 10, "hyperbolic"),
    ]:
        s = label_schedule(total, frac, rounds, kind)
        assert sum(s) == total and len(s) == rounds + 1 and min(s) >= 0
        assert s[0] == round(total * frac)
        if kind == "hyperbolic":
            assert s[1] >= s[-1]


def test_sessions_ask_the_first_rounds_number_until_the_budget_is_spent() -> None:
    # QPA / SURF / PEBBLE on walker: 100 labels, 10 a session, 25 rounds after the first
    assert label_schedule(100, 0.1, 25, "sessions") == [10] * 10 + [0] * 16
    assert label_schedule(12, 0.25, 2, "sessions") == [3, 3, 6]  # too few rounds: the last
    assert label_schedule(10, 0.0, 4, "sessions") == [0, 2, 2, 2, 4]  # no first round: 10/5


def test_smoke_run_learns_and_writes_outputs(tmp_path) -> None:
    cfg = TrainConfig(seed=0, **SMALL)
    summary = train(cfg, run_dir=tmp_path / "run")
    run = tmp_path / "run"
    for name in (
        "config.json",
        "summary.json",
        "metrics.csv",
        "learning_curves.png",
        "feedback.db",
    ):
        assert (run / name).exists(), name
    saved = json.loads((run / "summary.json").read_text())
    for key in (
        "true_return",
        "true_return_std",
        "n_labels",
        "reward_accuracy",
        "reward_corr",
        "env_steps",
        "wall_s",
    ):
        assert key in saved
    assert summary.n_labels == 40 and summary.env_steps == 4000
    assert TrainConfig.load(run / "config.json") == cfg
    # the reward model orders held-out segments like the true reward
    assert summary.reward_accuracy > 0.8 and summary.reward_corr > 0.8
    # and the policy beats the random policy by a wide margin (random Pendulum: about −1200)
    env = __import__("gymnasium").make("Pendulum-v1")
    rand_mean, _ = evaluate_policy(
        RandomAgent(env.action_space, 0), "Pendulum-v1", n_episodes=5, seed=10_000
    )
    assert summary.true_return > rand_mean + 300
    store = FeedbackStore(run / "feedback.db")
    assert store.answers.count() == 40 and store.queries.count() == 40


@pytest.mark.parametrize("warm_min_steps", [None, 0])
def test_warm_fits_use_their_own_step_floor(tmp_path, warm_min_steps: int | None) -> None:
    """The loop's first fit is cold (first_fit_epochs = 5, raised to the floor of 20 steps: the
    smoke run's ≤ 12 labels are one batch); every later fit is warm, 1 epoch = 1 step unless
    warm_min_steps is None, when the 20-step floor holds for them too."""
    fit = FitConfig(epochs=1, min_steps=20, warm_min_steps=warm_min_steps)
    cfg = TrainConfig.smoke(fit=fit)
    loop = start_loop(cfg, tmp_path / "run")
    loop.run()
    steps = [row["reward_fit_steps"] for row in loop.state.history if "reward_fit_steps" in row]
    assert len(steps) == cfg.n_rounds + 1
    assert steps[0] == 20
    assert steps[1:] == [20 if warm_min_steps is None else 1] * cfg.n_rounds


def test_interrupted_run_resumes_without_losing_judgements(tmp_path) -> None:
    # three rounds, as SMALL's, at a third of its steps (stopped after round 1: one to go)
    budget = {"total_steps": 1200, "initial_steps": 400, "steps_per_round": 400}
    cfg = TrainConfig(
        seed=1,
        **(SMALL | budget | {"total_labels": 12, "algo": "ppo", "n_envs": 2, "eval_episodes": 1}),
    )
    run = tmp_path / "run"

    def stop_after_round_1(row):
        if row["round"] == 1:
            raise KeyboardInterrupt

    with pytest.raises(KeyboardInterrupt):
        start_loop(cfg, run, progress=stop_after_round_1).run()
    before = {j.id for _s, j in FeedbackStore(run / "feedback.db").answers.judgements()}
    assert before
    summary = resume(run)
    after = {j.id for _s, j in FeedbackStore(run / "feedback.db").answers.judgements()}
    assert before < after  # kept, and round 2 asked more
    assert summary.n_labels == 12 and summary.env_steps >= 1200


def test_bad_input_is_refused_before_anything_is_written(tmp_path) -> None:
    with pytest.raises(ConfigError, match="Did you mean Pendulum-v1"):
        train(TrainConfig.smoke(env_id="Pendulm-v1"), run_dir=tmp_path / "a")
    with pytest.raises(ConfigError, match="budget of zero"):
        TrainConfig.smoke(total_labels=0)
    with pytest.raises(ConfigError, match="agent_kwargs"):
        TrainConfig.smoke(agent_kwargs="[1, 2]")
    with pytest.raises(ConfigError, match="seed must be"):
        TrainConfig.smoke(seed=-1)
    (tmp_path / "b").mkdir()
    (tmp_path / "b" / "config.json").write_text("{}")
    with pytest.raises(ConfigError, match="already holds a run"):
        train(TrainConfig.smoke(), run_dir=tmp_path / "b")
    assert (tmp_path / "b" / "config.json").read_text() == "{}"


@pytest.mark.slow
@pytest.mark.parametrize("seed", [0, 1, 2])
def test_pendulum_learns_across_seeds(tmp_path, seed: int) -> None:
    summary = train(
        TrainConfig(seed=seed, **(SMALL | {"total_steps": 8000, "total_labels": 80})),
        run_dir=tmp_path / "r",
    )
    assert summary.true_return > -700
    assert np.isfinite(summary.reward_corr) and summary.reward_corr > 0.85


@pytest.mark.parametrize(
    ("env_id", "steps"),
    # the fewest steps that still give asks before any episode ended (NaN), and after: Hopper's
    # random episodes, 9, 21 and 32 of them by its 2nd-4th asks (the last-10 window in play);
    # walker's first 1,000-step episode, ended before its last two asks
    [("Hopper-v5", 800), ("dm_control/walker-walk-v0", 1400)],
)
def test_loop_sets_bprefs_margin_before_each_ask(tmp_path, env_id: str, steps: int) -> None:
    """A B-Pref teacher with a relative rule gets, before every ask, the mean true return of the
    last 10 training episodes × segment length / episode limit (NaN before any episode ended):
    Hopper's TimeLimit, and DeepMind Control's 1,000 steps, which its spec does not state."""
    seen: list[tuple[float, list[float]]] = []

    class Watching(SyntheticTeacher):
        def submit(self, queries, segments) -> None:  # type: ignore[no-untyped-def]
            buf = loop.agent.ep_info_buffer
            seen.append((self.margin, [e["r"] for e in buf] if buf else []))
            super().submit(queries, segments)

    cfg = TrainConfig.smoke(env_id=env_id, total_steps=steps, n_envs=1)
    teacher = Watching(bpref_teacher("bpref-equal"), np.random.default_rng(0))
    loop = start_loop(cfg, tmp_path / "run", source=teacher)
    loop.run()
    assert len(seen) >= 3
    limit = 1000  # Hopper-v5's TimeLimit; a DeepMind Control episode
    for margin, returns in seen:
        if not returns:
            assert math.isnan(margin)
        else:
            assert margin == pytest.approx(np.mean(returns[-10:]) * cfg.segment_length / limit)
    assert any(r for _m, r in seen)  # the margin was set from real episodes at least once
    assert any(math.isfinite(m) for m, _r in seen)


def test_a_bpref_teacher_on_an_env_without_an_episode_limit_says_its_rules_never_apply(
    tmp_path,
) -> None:
    """Without an episode limit there is no margin, so the skip and equal rules cannot fire: the
    run says so (and how to fix it) instead of quietly teaching as the oracle."""
    import gymnasium as gym

    class EndsItsOwnEpisodes(gym.Wrapper):  # as DeepMind Control: 200 steps, not in a spec
        def reset(self, **kw):  # type: ignore[no-untyped-def]
            self.t = 0
            return self.env.reset(**kw)

        def step(self, action):  # type: ignore[no-untyped-def]
            self.t += 1
            obs, r, term, _trunc, info = self.env.step(action)
            return obs, r, term, self.t >= 200, info

    def no_limit() -> gym.Env:
        env = gym.make("Pendulum-v1").unwrapped
        env.spec = None  # an env of the user's own, registered without max_episode_steps
        return EndsItsOwnEpisodes(env)

    teacher = SyntheticTeacher(bpref_teacher("bpref-equal"), np.random.default_rng(0))
    result = train(TrainConfig.smoke(), run_dir=tmp_path / "run", env=no_limit, source=teacher)
    assert any("never apply" in w and "TimeLimit" in w for w in result.warnings)
    plain = train(TrainConfig.smoke(), run_dir=tmp_path / "oracle", env=no_limit)
    assert not any("never apply" in w for w in plain.warnings)  # the oracle has no such rule


def test_a_run_counts_its_equal_and_unanswered_judgements(tmp_path) -> None:
    """The summary says how often the teacher found a pair equally preferable (p = 0.5) and how
    often it gave no answer (p = None), as the store holds them: a teacher whose rule never
    fires (B-Pref's equal teacher without a margin) is visible in every run's summary."""
    import sqlite3

    from preflab.sources.teacher import TeacherConfig

    rules = TeacherConfig(skip_threshold=-100.0, equal_threshold=40.0)  # both fire on Pendulum
    teacher = SyntheticTeacher(rules, np.random.default_rng(0))
    result = train(TrainConfig.smoke(), run_dir=tmp_path / "run", source=teacher)
    with sqlite3.connect(tmp_path / "run" / "feedback.db") as db:
        ps = [p for (p,) in db.execute("SELECT p FROM judgements")]
    assert result.n_judgements == len(ps)
    assert result.n_equal == sum(p == 0.5 for p in ps) > 0
    assert result.n_skipped == sum(p is None for p in ps) > 0
    assert result.n_labels == len(ps) - result.n_skipped  # an equal answer is a label, a skip not
    saved = json.loads((tmp_path / "run" / "summary.json").read_text())
    assert (saved["n_equal"], saved["n_skipped"]) == (result.n_equal, result.n_skipped)
