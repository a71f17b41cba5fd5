"""State scores σ(s) from ranked pairs (the policy reward from σ: tests/llm/test_llm_policy.py)."""

from __future__ import annotations

import numpy as np
import pytest
import torch

from preflab.errors import ConfigError, DataError
from preflab.llm import (
    ScoreConfig,
    fit_state_scores,
    fit_state_scores_from_labels,
    progress,
    sample_transitions,
    state_segments,
    true_preference,
)
from preflab.policy.shaping import PolicyRewardConfig
from preflab.records import Label
from preflab.reward import FitConfig, LabelBatch, RewardConfig, RewardEnsemble, RewardTrainer

torch.set_num_threads(1)


def test_errors() -> None:
    with pytest.raises(ConfigError, match="mode"):
        PolicyRewardConfig(mode="both")  # type: ignore[arg-type]
    with pytest.raises(ConfigError, match="step_penalty"):
        PolicyRewardConfig(step_penalty=-1)
    with pytest.raises(ConfigError, match="discount"):
        PolicyRewardConfig(discount=1.5)
    with pytest.raises(DataError, match=r"one shape"):
        fit_state_scores(np.zeros((3, 2)), np.zeros((2, 2)), np.zeros(3), np.random.default_rng(0))


def test_one_member_trains_on_every_pair() -> None:
    # the issue: with one member, 1/e of the pairs were held out and never used
    fit = FitConfig(bootstrap=False, holdout=0.0, adapt_l2=False)
    trainer = RewardTrainer(RewardEnsemble(2, 0, RewardConfig(members=1, use_actions=False)), fit)
    ((train, _val),) = trainer._split(100, np.random.default_rng(0))
    assert sorted(train.tolist()) == list(range(100))
    with pytest.raises(ConfigError, match="adapt_l2"):
        FitConfig(bootstrap=False, holdout=0.0)


def test_scores_recover_a_known_ordering_and_flatten_uncertain_pairs() -> None:
    # 1-D states on a line; pairs of neighbours. Right half: confident "right is better";
    # left half: 50 % confidence. Scores rise on the right and stay flat on the left.
    rng = np.random.default_rng(0)
    x = np.linspace(-1, 1, 41)
    a = np.repeat(x[:-1], 5)[:, None]
    b = np.repeat(x[1:], 5)[:, None]
    p = np.where(a[:, 0] >= 0, 0.0, 0.5)  # P(a ≻ b): 0 → b (right neighbour) better
    sc = fit_state_scores(
        a, b, p, rng, ScoreConfig(epochs=100, hidden=(32, 32), l2=1e-4, batch_size=16)
    )
    s = sc.scores(x[:, None])
    right, left = s[x >= 0], s[x <= -0.1]
    assert np.all(np.diff(right) > 0)
    span = s.max() - s.min()
    assert (left.max() - left.min()) < 0.05 * span  # the paper's "uninformative" region


def test_learned_scores_rank_grid_transitions() -> None:
    env = "PrefLab/NoLock-v0"
    rng = np.random.default_rng(1)
    a, b = sample_transitions(env, 1500, rng)
    p = true_preference(a, b, env)
    sc = fit_state_scores(a, b, p, rng, ScoreConfig(epochs=15))
    ta, tb = sample_transitions(env, 500, np.random.default_rng(2))
    t = true_preference(ta, tb, env)
    m = t != 0.5
    acc = ((sc.scores(ta) > sc.scores(tb))[m] == (t[m] == 1)).mean()
    assert acc > 0.85
    # within one layout, scores follow the true progress (levels across layouts are not
    # identified: consecutive pairs never compare two layouts)
    same = sample_transitions(env, 1, np.random.default_rng(3))[0]
    assert np.isfinite(sc.scores(same)).all() and progress(same, env).shape == (1,)


def test_fit_from_labels_on_state_segments() -> None:
    obs = np.array([[0.0], [1.0], [2.0]], np.float32)
    segs = state_segments(obs)
    labels = [
        Label(a=segs[1].id, b=segs[0].id, p=1.0),
        Label(a=segs[2].id, b=segs[1].id, p=1.0),
    ] * 30
    sc = fit_state_scores_from_labels(
        segs, labels, np.random.default_rng(0), ScoreConfig(epochs=40)
    )
    s = sc.scores(obs)
    assert s[0] < s[1] < s[2]


def test_label_smoothing_bounds_the_score_scale_on_exact_labels() -> None:
    # a consistent chain 0 < 1 < 2 < 3 < 4 with hard 0/1 labels: raw Bradley–Terry keeps
    # growing the gaps; with smoothing s the optimum of each pair is log((1 − s)/s)
    x = np.arange(5, dtype=np.float32)[:, None]
    a, b = np.repeat(x[:-1], 15, axis=0), np.repeat(x[1:], 15, axis=0)
    p = np.zeros(len(a))  # b (the right neighbour) is better, with certainty
    cfg = dict(epochs=150, hidden=(16,), lr=1e-2, l2=0.0, batch_size=16)
    raw = fit_state_scores(a, b, p, np.random.default_rng(0), ScoreConfig(**cfg))
    s = 0.1
    smooth = fit_state_scores(
        a, b, p, np.random.default_rng(0), ScoreConfig(**cfg, label_smoothing=s)
    )
    gap = np.log((1 - s) / s)
    np.testing.assert_allclose(np.diff(smooth.scores(x)), gap, atol=0.05)
    assert np.all(np.diff(raw.scores(x)) > 2 * gap)  # unbounded without smoothing
    with pytest.raises(ConfigError, match="label_smoothing"):
        FitConfig(label_smoothing=0.5)


def test_label_smoothing_maps_targets_and_keeps_ties() -> None:
    trainer = RewardTrainer(
        RewardEnsemble(1, 0, RewardConfig(members=1, use_actions=False)),
        FitConfig(label_smoothing=0.1),
    )
    lb = LabelBatch.from_arrays(np.arange(3), np.arange(3, 6), np.array([0.0, 0.5, 1.0]))
    np.testing.assert_allclose(trainer.targets(lb).p.numpy(), [0.1, 0.5, 0.9], atol=1e-6)
