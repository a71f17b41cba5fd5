"""Clips of image-observation segments straight from their stored frames (no simulator replay).

A segment whose observations are images (Atari: 4 stacked 84×84 grey frames) is shown as the
newest frame of every step, upscaled (nearest neighbour, an integer factor, so pixels stay
sharp) to fit the clip size, grey repeated into RGB. This is the frames source the render
worker uses when a segment has no pre-rendered ``<id>.frames.npz`` and no simulator states.
"""

from __future__ import annotations

import zipfile
from pathlib import Path

import numpy as np

FPS = 15
"""Atari with frame skip 4: 60 Hz / 4 = 15 agent steps per second."""


def newest_frames(npz: str | Path) -> np.ndarray | None:
    """(T, H, W) or (T, H, W, 3) uint8: the newest frame of each step of an image segment
    stored by :class:`~preflab.store.arrays.ArrayStore`, or None when it is not an image
    segment (or the file is unreadable: the caller then reports its own error)."""
    try:
        with np.load(npz, allow_pickle=False) as z:
            if "frames" in z.files:  # a compacted stack: T + k − 1 frames
                k = int(z["frame_stack"])
                return np.asarray(z["frames"][k - 1 :])
            if "obs" in z.files:
                obs = z["obs"]
                if obs.ndim == 4 and obs.dtype == np.uint8:  # (T, C, H, W)
                    if obs.shape[1] == 3:  # one RGB image per step
                        return np.ascontiguousarray(np.moveaxis(obs, 1, -1))
                    return np.asarray(obs[:, -1])
    except (OSError, KeyError, ValueError, zipfile.BadZipFile, EOFError):
        return None
    return None


def to_clip_frames(frames: np.ndarray, size: int) -> np.ndarray:
    """(T, H, W[, 3]) uint8 → (T, h, w, 3) uint8 upscaled by the largest integer factor that
    keeps the longer side ≤ ``size`` (≥ 1), both sides even (H.264 yuv420p)."""
    f = np.asarray(frames, np.uint8)
    if f.ndim == 3:
        f = np.repeat(f[..., None], 3, axis=-1)
    h, w = f.shape[1:3]
    k = max(1, size // max(h, w))
    if k > 1:
        f = np.repeat(np.repeat(f, k, axis=1), k, axis=2)
    h2, w2 = f.shape[1] // 2 * 2, f.shape[2] // 2 * 2
    return np.ascontiguousarray(f[:, :h2, :w2])


def image_segment_clip(npz: str | Path, size: int) -> np.ndarray | None:
    """Clip frames (T, h, w, 3) for an image segment's arrays file, or None."""
    frames = newest_frames(npz)
    return None if frames is None else to_clip_frames(frames, size)
