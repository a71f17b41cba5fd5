"""Behaviour features and DTW distances (paper 000, §3.1 and §3.3).

A behaviour is a multivariate time series of varying length: its observations, optionally
with its actions, per step. Every feature dimension is standardised with the mean and std of
all steps of all behaviours being compared (pooled, not per behaviour: per-behaviour scaling
would erase the level differences that tell behaviours apart). Distances are dynamic time
warping on those features, by dtaidistance's C implementation, in parallel.

Image observations (T, C, H, W) uint8 (Atari, the toy image env) become small vectors first
(:func:`image_features`): the newest frame of each step's stack, area-averaged to a coarse
grid, then projected on the pooled principal components of all steps of all behaviours, so
DTW sees a few dimensions that carry the frames' motion instead of tens of thousands of pixels.
"""

from __future__ import annotations

import logging
from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np
from dtaidistance import dtw_ndim

from preflab.errors import ConfigError, DataError
from preflab.records import Segment

# dtaidistance logs two INFO lines for every distance matrix (every round, every tree)
logging.getLogger("be.kuleuven.dtai.distance").setLevel(logging.WARNING)


@dataclass(frozen=True, kw_only=True)
class FeatureConfig:
    """How behaviours become comparable time series and how far apart they are."""

    use_actions: bool = False
    """Append the actions to the observations of every step."""
    normalise: bool = True
    """Standardise every dimension with the pooled mean/std over all steps of all behaviours."""
    window: int | None = None
    """DTW Sakoe–Chiba window in steps (None = unconstrained); ~10 halves the time at 1,000."""
    parallel: bool = True
    """Compute the DTW matrix with dtaidistance's OpenMP threads."""
    image_grid: int = 12
    """Image observations: each frame is area-averaged to an image_grid × image_grid grid."""
    image_components: int = 16
    """Image observations: pooled principal components kept per step (≤ image_grid²)."""

    def __post_init__(self) -> None:
        if self.window is not None and self.window < 1:
            raise ConfigError(f"window must be ≥ 1 step or None, got {self.window}")
        if self.image_grid < 1 or self.image_components < 1:
            raise ConfigError(
                f"image_grid and image_components must be ≥ 1, got {self.image_grid} and "
                f"{self.image_components}"
            )


def _pool_frames(frames: np.ndarray, grid: int) -> np.ndarray:
    """(T, H, W) → (T, g_h · g_w) float64 area means over a grid of at most grid × grid cells."""
    t, h, w = frames.shape
    gh, gw = min(grid, h), min(grid, w)
    rows = np.linspace(0, h, gh + 1).astype(int)[:-1]
    cols = np.linspace(0, w, gw + 1).astype(int)[:-1]
    x = np.add.reduceat(frames.astype(np.float64), rows, axis=1)
    x = np.add.reduceat(x, cols, axis=2)
    counts = np.outer(np.diff(np.append(rows, h)), np.diff(np.append(cols, w)))
    return (x / counts).reshape(t, gh * gw) / 255.0


def image_features(
    images: Sequence[np.ndarray], *, grid: int = 12, components: int = 16
) -> list[np.ndarray]:
    """Per-behaviour (T_i, k) float64 features of image observations (T_i, C, H, W).

    The newest frame of every step's stack (channel C − 1; stacked frames are the channels)
    is area-averaged to a ``grid`` × ``grid`` grid; all steps of all behaviours are pooled,
    centred and projected on their first ``components`` principal components (k =
    min(components, pooled rank)), scaled by one pooled std so the components keep their
    relative weight. Raises DataError when frame sizes differ between behaviours.
    """
    pooled: list[np.ndarray] = []
    for k, x in enumerate(images):
        if x.ndim != 4 or x.shape[0] == 0:
            raise DataError(
                f"behaviour {k}: image observations must be (T, C, H, W) with T ≥ 1, "
                f"got shape {x.shape}"
            )
        if pooled and x.shape[2:] != images[0].shape[2:]:
            raise DataError(
                f"behaviour {k} has {x.shape[2]}×{x.shape[3]} frames, behaviour 0 has "
                f"{images[0].shape[2]}×{images[0].shape[3]}; only behaviours of one "
                "environment can be compared"
            )
        pooled.append(_pool_frames(np.asarray(x[:, -1]), grid))
    stacked = np.concatenate(pooled, axis=0)
    mean = stacked.mean(0)
    centred = stacked - mean
    k = min(components, centred.shape[1], max(1, centred.shape[0] - 1))
    _u, _s, vt = np.linalg.svd(centred, full_matrices=False)
    basis = vt[:k].T
    scale = float(np.sqrt((centred**2).sum(1).mean())) or 1.0
    return [np.ascontiguousarray((p - mean) @ basis / scale) for p in pooled]


def behaviour_features(
    behaviours: Sequence[Segment | np.ndarray],
    *,
    use_actions: bool = False,
    normalise: bool = True,
    grid: int = 12,
    components: int = 16,
) -> list[np.ndarray]:
    """Per-behaviour float64 C-contiguous arrays (T_i, D), standardised per dimension.

    ``behaviours`` are segments or raw (T, D) arrays. Segments with image observations
    (T, C, H, W) go through :func:`image_features` (``grid``, ``components``) first, their
    actions appended after. Raises DataError when the list is empty, a behaviour has no steps,
    has NaN/inf values, or the dimensions differ between behaviours.
    """
    if len(behaviours) == 0:
        raise DataError("no behaviours given; need at least one segment to compute features")
    images = [b for b in behaviours if isinstance(b, Segment) and b.obs.ndim == 4]
    if images:
        if len(images) != len(behaviours):
            raise DataError(
                f"{len(images)} of {len(behaviours)} behaviours have image observations; "
                "only behaviours of one environment can be compared"
            )
        feats = image_features([b.obs for b in images], grid=grid, components=components)
        behaviours = [
            np.concatenate([f, np.asarray(b.acts, np.float64)], axis=1) if use_actions else f
            for f, b in zip(feats, images, strict=True)
        ]
        if not use_actions:
            normalise = False  # the components are already on one pooled scale
    series: list[np.ndarray] = []
    for k, beh in enumerate(behaviours):
        if isinstance(beh, Segment):
            x = np.concatenate([beh.obs, beh.acts], axis=1) if use_actions else beh.obs
            name = f"behaviour {beh.id}"
        else:
            x = np.asarray(beh, dtype=np.float64)
            if x.ndim == 1:
                x = x[:, None]
            name = f"behaviour {k}"
        if x.ndim != 2 or x.shape[0] == 0:
            raise DataError(f"{name} must be a (T, D) series with T ≥ 1, got shape {x.shape}")
        if not np.all(np.isfinite(x)):
            raise DataError(
                f"{name} has NaN or infinite features; drop or repair those steps before comparing"
            )
        if series and x.shape[1] != series[0].shape[1]:
            raise DataError(
                f"{name} has {x.shape[1]} feature dimensions, behaviour 0 has "
                f"{series[0].shape[1]}; "
                "only behaviours of one environment (same observation/action size) can be compared"
            )
        series.append(np.asarray(x, dtype=np.float64))
    if normalise:
        stacked = np.concatenate(series, axis=0)
        mean = stacked.mean(0)
        std = stacked.std(0)
        std[std < 1e-12] = 1.0  # constant dimensions carry no information; leave them at 0
        series = [(s - mean) / std for s in series]
    return [np.ascontiguousarray(s, dtype=np.float64) for s in series]


def dtw_distances(
    features: Sequence[np.ndarray],
    *,
    window: int | None = None,
    parallel: bool = True,
    condensed: bool = False,
) -> np.ndarray:
    """DTW distance between every two behaviours: (N, N) symmetric with zero diagonal.

    With ``condensed`` returns scipy's condensed vector (upper triangle, row-major), which
    :func:`scipy.cluster.hierarchy.linkage` takes directly. N = 1 gives [[0.]] (or []).
    """
    n = len(features)
    if n == 0:
        raise DataError("no behaviours to compare")
    if n == 1:
        return np.zeros(0) if condensed else np.zeros((1, 1))
    kw: dict[str, bool | int] = {"parallel": parallel}
    if window is not None:
        kw["window"] = int(window)
    series = [np.ascontiguousarray(f, dtype=np.float64) for f in features]
    if condensed:
        return np.asarray(
            dtw_ndim.distance_matrix_fast(series, compact=True, **kw), dtype=np.float64
        )
    d = np.asarray(dtw_ndim.distance_matrix_fast(series, **kw), dtype=np.float64)
    np.fill_diagonal(d, 0.0)
    return d


def behaviour_distances(
    behaviours: Sequence[Segment | np.ndarray],
    config: FeatureConfig | None = None,
    *,
    condensed: bool = False,
) -> np.ndarray:
    """Features then DTW distances in one call (see :func:`behaviour_features`)."""
    cfg = config or FeatureConfig()
    feats = behaviour_features(
        behaviours,
        use_actions=cfg.use_actions,
        normalise=cfg.normalise,
        grid=cfg.image_grid,
        components=cfg.image_components,
    )
    return dtw_distances(feats, window=cfg.window, parallel=cfg.parallel, condensed=condensed)
