"""Behaviour features and DTW distances of image observations (Atari-like frame stacks)."""

from __future__ import annotations

import numpy as np
import pytest

from preflab.errors import DataError
from preflab.selection.exploration import build_exploration
from preflab.selection.features import (
    FeatureConfig,
    behaviour_distances,
    behaviour_features,
    image_features,
)
from preflab.testing.factories import make_segment
from preflab_bench._image_pool import square_segment, square_segments


def test_image_segments_become_small_series() -> None:
    segs = square_segments(9)
    assert segs[0].obs.shape == (12, 4, 84, 84)
    feats = behaviour_features(segs)
    assert all(f.shape[0] == 12 and 1 <= f.shape[1] <= 16 for f in feats)
    assert all(np.all(np.isfinite(f)) for f in feats)
    with_acts = behaviour_features(segs, use_actions=True)
    assert with_acts[0].shape[1] == feats[0].shape[1] + 3


def test_same_motion_is_nearer_than_opposite_motion() -> None:
    rng = np.random.default_rng(3)
    segs = [square_segment(d, rng, y=30) for d in (-1, -1, -1, 1, 1, 1)]
    d = behaviour_distances(segs, FeatureConfig(parallel=False))
    assert d.shape == (6, 6) and np.allclose(d, d.T) and np.all(np.diag(d) == 0)
    within = [d[i, j] for i in range(6) for j in range(i + 1, 6) if (i < 3) == (j < 3)]
    across = [d[i, j] for i in range(3) for j in range(3, 6)]
    assert max(within) < min(across)


def test_image_features_match_an_independent_pooling() -> None:
    """grid = side: pooling is the identity, so features are PCA scores of the raw frames."""
    rng = np.random.default_rng(0)
    ims = [rng.integers(0, 256, (5, 2, 4, 4), dtype=np.uint8) for _ in range(3)]
    feats = image_features(ims, grid=4, components=16)
    x = np.concatenate([im[:, -1].reshape(5, 16) / 255.0 for im in ims])
    xc = x - x.mean(0)
    # distances between steps are preserved by a full-rank rotation, up to the pooled scale
    scale = np.sqrt((xc**2).sum(1).mean())
    f = np.concatenate(feats)
    assert f.shape == (15, 14)  # rank ≤ 15 − 1
    dx = np.linalg.norm(xc[:, None] - xc[None], axis=-1) / scale
    df = np.linalg.norm(f[:, None] - f[None], axis=-1)
    assert np.allclose(dx, df, atol=1e-8)


def test_mixed_and_mismatched_images_are_refused() -> None:
    img = square_segments(1)[0]
    flat = make_segment(length=12, obs_dim=3, act_dim=3)
    with pytest.raises(DataError, match="image observations"):
        behaviour_features([img, flat])
    rng = np.random.default_rng(0)
    small = rng.integers(0, 256, (4, 1, 42, 42), dtype=np.uint8)
    with pytest.raises(DataError, match="frames"):
        image_features([np.asarray(img.obs), small])


def test_exploration_view_of_an_image_pool() -> None:
    segs = square_segments(30)
    rng = np.random.default_rng(0)
    view = build_exploration(segs, member_returns=rng.normal(size=(3, 30)))
    assert view.distances.shape == (30, 30)
    assert len(view.suggestions) > 0 and len(view.group_suggestions) > 0
    assert view.summary_json()["root"] is not None
