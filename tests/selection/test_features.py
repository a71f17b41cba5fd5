"""Feature normalisation and DTW distances against an independent dynamic programme."""

from __future__ import annotations

import logging

import numpy as np
import pytest

from preflab.errors import ConfigError, DataError
from preflab.selection.features import (
    FeatureConfig,
    behaviour_distances,
    behaviour_features,
    dtw_distances,
)
from preflab.testing.factories import make_segments


def _dtw_reference(x: np.ndarray, y: np.ndarray) -> float:
    """Textbook multivariate DTW: sqrt of the least sum of squared step distances."""
    n, m = len(x), len(y)
    acc = np.full((n + 1, m + 1), np.inf)
    acc[0, 0] = 0.0
    for i in range(1, n + 1):
        for j in range(1, m + 1):
            cost = float(((x[i - 1] - y[j - 1]) ** 2).sum())
            acc[i, j] = cost + min(acc[i - 1, j], acc[i, j - 1], acc[i - 1, j - 1])
    return float(np.sqrt(acc[n, m]))


def test_pooled_normalisation() -> None:
    rng = np.random.default_rng(0)
    xs = [rng.normal(3.0, 5.0, size=(int(rng.integers(5, 20)), 3)) for _ in range(6)]
    xs[0][:, 2] = 7.0
    for x in xs[1:]:
        x[:, 2] = 7.0  # a constant dimension stays finite (0)
    feats = behaviour_features(xs)
    pooled = np.concatenate(feats)
    assert np.allclose(pooled[:, :2].mean(0), 0.0, atol=1e-12)
    assert np.allclose(pooled[:, :2].std(0), 1.0)
    assert np.all(pooled[:, 2] == 0.0)
    # pooled, not per behaviour: a behaviour keeps its offset from the others
    assert [f.shape for f in feats] == [x.shape for x in xs]


def test_segments_with_and_without_actions() -> None:
    rng = np.random.default_rng(1)
    segs = make_segments(3, rng=rng, length=10, obs_dim=2, act_dim=3, random_rewards=False)
    assert behaviour_features(segs)[0].shape == (10, 2)
    assert behaviour_features(segs, use_actions=True)[0].shape == (10, 5)


def test_dtw_matches_reference_on_varying_lengths() -> None:
    rng = np.random.default_rng(2)
    xs = [np.ascontiguousarray(rng.normal(size=(int(rng.integers(3, 12)), 4))) for _ in range(7)]
    d = dtw_distances(xs)
    assert d.shape == (7, 7)
    assert np.allclose(d, d.T)
    assert np.all(np.diag(d) == 0)
    for i in range(7):
        for j in range(i + 1, 7):
            assert d[i, j] == pytest.approx(_dtw_reference(xs[i], xs[j]), rel=1e-9)
    cond = dtw_distances(xs, condensed=True)
    assert np.allclose(cond, d[np.triu_indices(7, 1)])


def test_dtw_warps_time() -> None:
    base = np.sin(np.linspace(0, 3, 20))[:, None]
    slow = np.repeat(base, 2, axis=0)  # same path, half speed
    other = np.cos(np.linspace(0, 3, 20))[:, None]
    d = dtw_distances([base, slow, other])
    assert d[0, 1] == pytest.approx(0.0, abs=1e-12)
    assert d[0, 2] > 0.5


def test_window_constrains() -> None:
    rng = np.random.default_rng(3)
    xs = [rng.normal(size=(30, 2)) for _ in range(5)]
    free = dtw_distances(xs)
    tight = dtw_distances(xs, window=2)
    assert np.all(tight >= free - 1e-12)
    assert np.any(tight > free + 1e-9)
    with pytest.raises(ConfigError, match="window"):
        FeatureConfig(window=0)


def test_behaviour_distances_pipeline() -> None:
    rng = np.random.default_rng(4)
    xs = [rng.normal(size=(8, 3)) for _ in range(4)]
    d = behaviour_distances(xs, FeatureConfig(parallel=False))
    assert np.allclose(d, dtw_distances(behaviour_features(xs)))


def test_bad_input() -> None:
    ok = np.zeros((5, 3))
    with pytest.raises(DataError, match="no behaviours"):
        behaviour_features([])
    with pytest.raises(DataError, match="feature dimensions"):
        behaviour_features([ok, np.zeros((5, 4))])
    bad = ok.copy()
    bad[2, 1] = np.nan
    with pytest.raises(DataError, match="NaN"):
        behaviour_features([ok, bad])
    with pytest.raises(DataError, match="T ≥ 1"):
        behaviour_features([ok, np.zeros((0, 3))])


def test_distances_do_not_log_at_info(caplog: pytest.LogCaptureFixture) -> None:
    """dtaidistance's per-matrix INFO lines stay out of a run's log (the CLI logs at INFO)."""
    series = [np.arange(5.0)[:, None], np.arange(7.0)[:, None] ** 2]
    with caplog.at_level(logging.INFO):
        dtw_distances(series, parallel=True)
    assert [r.getMessage() for r in caplog.records if r.name.startswith("be.kuleuven")] == []
