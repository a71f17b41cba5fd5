import numpy as np
import pytest
import torch

from preflab.errors import ConfigError
from preflab.reward import RewardConfig, SegmentBatch
from preflab.scalar import (
    EvaluatorConfig,
    ScalarModelConfig,
    fit_preferences,
    fit_regression,
    item_scores,
    pooled_labels,
    population,
    rate_stream,
    voting_labels,
    window_labels,
    window_pairs,
)

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
