import numpy as np
import pytest
import torch

from preflab.errors import ConfigError
from preflab.kinds.rating_windows import window_labels, window_pairs
from preflab.reward import RewardConfig, SegmentBatch
from preflab.reward.scalar import (
    ScalarModelConfig,
    fit_preferences,
    fit_regression,
    item_scores,
    pooled_labels,
    voting_labels,
)
from preflab.sources.evaluators import EvaluatorConfig, population, rate_stream

torch.set_num_threads(1)


def pair_accuracy(values, quality, pairs):
    d_true = np.sign(quality[pairs[:, 0]] - quality[pairs[:, 1]])
    d_rate = np.sign(values[pairs[:, 0]] - values[pairs[:, 1]])
    keep = (d_true != 0) & (d_rate != 0)
    return (d_true[keep] == d_rate[keep]).mean()


def test_ratings_are_locally_consistent_but_globally_drifting():
    rng = np.random.default_rng(0)
    n = 4000
    quality = np.linspace(0, 3, n) + rng.normal(0, 0.5, n)  # the agent improves over time
    cfg = EvaluatorConfig(gain=2.0, adapt=0.01, drift=0.01, noise=0.05)
    values = rate_stream(cfg, quality, rng, scale=1.0)
    assert values.min() >= -1 and values.max() <= 1
    local = window_pairs(n, 10)
    far = np.stack([rng.integers(0, n // 4, 5000), rng.integers(3 * n // 4, n, 5000)], axis=1)
    assert pair_accuracy(values, quality, local) > 0.8
    assert pair_accuracy(values, quality, far) < 0.7


def test_population_kinds():
    rng = np.random.default_rng(1)
    top = population("top", 6, rng)
    mixed = population("mixed", 6, rng)
    assert max(c.noise for c in top) < min(c.noise for c in mixed[2::3])
    with pytest.raises(ConfigError):
        population("median", 3, rng)


def toy_items(rng, n=600):
    obs = rng.uniform(-1, 1, size=(n, 1, 2)).astype(np.float32)
    true = obs[:, 0, 0] - 0.5 * obs[:, 0, 1]
    return SegmentBatch.from_arrays(obs, np.zeros((n, 1, 1), np.float32)), true


def test_window_preferences_and_voting_recover_the_true_ordering():
    torch.manual_seed(0)
    rng = np.random.default_rng(2)
    items, true = toy_items(rng, 300)
    cfg = ScalarModelConfig(reward=RewardConfig(members=1, hidden=(32,)), max_pairs=3000)
    evals = [
        EvaluatorConfig(noise=0.05),
        EvaluatorConfig(noise=0.1),
        EvaluatorConfig(noise=0.6, gain=0.5),
    ]
    datasets = [window_labels(rate_stream(c, true, rng, scale=1.0), window=10) for c in evals]
    models = [fit_preferences(items, d, rng, cfg) for d in datasets]
    corr = [np.corrcoef(item_scores(m, items), true)[0, 1] for m in models]
    assert corr[0] > 0.9
    vote = voting_labels(models, items, window_pairs(len(items), 10), 0.1)
    assert vote.p.min() >= 0 and vote.p.max() <= 1
    voted = fit_preferences(items, vote, rng, cfg)
    assert np.corrcoef(item_scores(voted, items), true)[0, 1] > 0.85
    pooled = pooled_labels(datasets)
    assert len(pooled) == sum(len(d) for d in datasets)


def test_regression_baseline_fits_ratings():
    torch.manual_seed(0)
    rng = np.random.default_rng(3)
    items, true = toy_items(rng, 400)
    ratings = np.tanh(true)
    cfg = ScalarModelConfig(reward=RewardConfig(members=1, hidden=(32,)), regression_epochs=300)
    model = fit_regression(items, ratings, rng, cfg)
    assert np.corrcoef(item_scores(model, items), true)[0, 1] > 0.9


def _clean(**kw) -> EvaluatorConfig:
    """An evaluator without noise, drift or adaptation: its ratings follow from the formula."""
    return EvaluatorConfig(**({"gain": 1.0, "adapt": 0.0, "drift": 0.0, "noise": 0.0} | kw))


def test_bias_offsets_the_slider() -> None:
    q = np.zeros(20)  # quality equal to the first-seen expectation: tanh(0) = 0
    vals = rate_stream(_clean(bias=0.3), q, np.random.default_rng(0), scale=1.0)
    np.testing.assert_allclose(vals, 0.3)
    vals = rate_stream(_clean(bias=-0.9, gain=5.0), q - 1.0, np.random.default_rng(0), scale=1.0)
    np.testing.assert_allclose(vals, -0.9)  # first step sets the expectation: tanh(0) − 0.9


def test_reaction_delay_shifts_the_ratings() -> None:
    q = np.r_[np.zeros(10), np.ones(10)]  # the quality jumps at step 10
    for d in (0, 3):
        vals = rate_stream(_clean(delay=d), q, np.random.default_rng(0), scale=1.0)
        np.testing.assert_allclose(vals[: 10 + d], 0.0)
        np.testing.assert_allclose(vals[10 + d :], np.tanh(1.0))


def test_criterion_shifts_raise_the_expectation() -> None:
    q = np.zeros(50)
    vals = rate_stream(_clean(shift_rate=1.0, shift=0.2), q, np.random.default_rng(0), scale=1.0)
    assert vals[0] == 0.0 and np.all(np.diff(vals) <= 0) and vals[-1] < -0.5
    with pytest.raises(ConfigError):
        EvaluatorConfig(delay=-1)
    with pytest.raises(ConfigError):
        EvaluatorConfig(shift_rate=1.5)


def test_population_draws_each_tier_from_its_documented_ranges() -> None:
    from dataclasses import asdict

    from preflab.sources.evaluators import TIERS

    evals = population("mixed", 15, np.random.default_rng(4))
    assert len({tuple(asdict(e).values()) for e in evals}) == 15  # all distinct
    for k, e in enumerate(evals):
        ranges = TIERS[("top", "middle", "poor")[k % 3]]
        for name, (lo, hi) in ranges.items():
            assert lo <= getattr(e, name) <= hi, (k, name)
    again = population("mixed", 15, np.random.default_rng(4))
    assert again == evals  # deterministic given the generator
    poor, top = evals[2::3], evals[0::3]
    assert min(e.delay for e in poor) >= max(e.delay for e in top)
