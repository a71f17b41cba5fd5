"""Stacked frames stored once: a (T, k, H, W) stack of the k newest frames per step is kept as
the k − 1 frames before the segment plus the newest frame of every step, (T + k − 1, H, W),
and rebuilt as a zero-copy strided view.

Compaction is exact, never lossy: :func:`compact_frames` only compacts a stack whose channel c
at step t equals channel c + 1 at step t − 1 for every t and c (what gymnasium's and SB3's
frame stacking produce, zero-filled starts of episodes included); any other image sequence is
kept as it is.
"""

from __future__ import annotations

import numpy as np


def compact_frames(obs: np.ndarray) -> np.ndarray | None:
    """(T + k − 1, H, W) frames that rebuild ``obs`` (T, k, H, W) exactly, or None when
    ``obs`` is not a sliding stack of frames."""
    obs = np.asarray(obs)
    if obs.ndim != 4:
        return None
    k = obs.shape[1]
    if k > 1 and obs.shape[0] > 1 and not np.array_equal(obs[1:, :-1], obs[:-1, 1:]):
        return None
    return np.ascontiguousarray(np.concatenate([obs[0, :-1], obs[:, -1]], axis=0))


def stacked_view(frames: np.ndarray, k: int) -> np.ndarray:
    """The read-only (T, k, H, W) view of ``frames`` (T + k − 1, H, W): step t is frames t..t+k−1."""
    frames = np.asarray(frames)
    if frames.ndim != 3 or frames.shape[0] < k:
        raise ValueError(f"need frames (≥ {k}, H, W) to stack {k} deep, got {frames.shape}")
    view = np.lib.stride_tricks.sliding_window_view(frames, k, axis=0)  # (T, H, W, k)
    return np.moveaxis(view, -1, 1)


def compact(obs: np.ndarray) -> np.ndarray:
    """``obs`` as a strided view over its compacted frames when it is a sliding stack (so it
    costs T + k − 1 frames of memory, not T·k), else ``obs`` unchanged."""
    frames = compact_frames(obs)
    return obs if frames is None else stacked_view(frames, obs.shape[1])
