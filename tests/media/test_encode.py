"""Encoded clips decode back to the same number of frames at the same size."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest

from preflab.errors import ConfigError
from preflab.media.encode import ClipWriter


def frames(n: int, h: int, w: int) -> list[np.ndarray]:
    out = []
    for k in range(n):
        f = np.zeros((h, w, 3), np.uint8)
        f[:, : (k * 7) % w + 1, 0] = 255
        f[..., 1] = 10 * k
        out.append(f)
    return out


@pytest.mark.parametrize("fmt", ["mp4", "webm"])
def test_clip_decodes_to_all_frames(tmp_path: Path, fmt: str) -> None:
    path = tmp_path / f"clip.{fmt}"
    with ClipWriter(path, fps=25, fmt=fmt) as w:  # type: ignore[arg-type]
        for f in frames(23, 64, 96):
            w.write(f)
    assert w.n_frames == 23 and w.size == (96, 64)
    back = _ffmpeg_frames(path)
    assert back.shape == (23, 64, 96, 3)
    # lossy, but the moving red bar is where it was
    assert abs(int(back[10, 32, 60, 0]) - 255) < 60 and back[10, 32, 90, 0] < 60


def test_odd_sizes_are_padded_and_mismatched_frames_letterboxed(tmp_path: Path) -> None:
    path = tmp_path / "odd.mp4"
    with ClipWriter(path, fps=10) as w:
        for f in frames(3, 33, 51):
            w.write(f)
        w.write(np.zeros((20, 20, 3), np.uint8))
    assert w.size == (52, 34)
    assert _ffmpeg_frames(path).shape == (4, 34, 52, 3)


def test_unknown_format() -> None:
    with pytest.raises(ConfigError, match="mp4"):
        ClipWriter("x.avi", fps=10, fmt="avi")  # type: ignore[arg-type]


def _ffmpeg_frames(path: Path) -> np.ndarray:
    """Decode every frame with imageio-ffmpeg's reader (an independent decoder run)."""
    import imageio_ffmpeg

    gen = imageio_ffmpeg.read_frames(str(path))
    meta = gen.__next__()
    w, h = meta["size"]
    return np.stack([np.frombuffer(b, np.uint8).reshape(h, w, 3) for b in gen])


def test_mp4_is_baseline_yuv420p_with_index_first(tmp_path: Path) -> None:
    import subprocess

    import imageio_ffmpeg

    path = tmp_path / "clip.mp4"
    with ClipWriter(path, fps=30) as w:
        for f in frames(10, 64, 64):
            w.write(f)
    probe = subprocess.run(
        [imageio_ffmpeg.get_ffmpeg_exe(), "-hide_banner", "-i", str(path)],
        capture_output=True,
        text=True,
    ).stderr
    assert "h264 (Constrained Baseline)" in probe and "yuv420p" in probe, probe
    data = path.read_bytes()
    assert 0 < data.index(b"moov") < data.index(b"mdat")  # +faststart
