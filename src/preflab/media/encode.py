"""Encode RGB frames into browser-playable clips with the ffmpeg that imageio-ffmpeg bundles.

- ``mp4``: H.264 (libx264) Constrained Baseline profile, yuv420p, ``+faststart`` (the index
  first, so playback starts before the whole file arrived). Plays in Chromium (tested with
  Debian's build) and Firefox (Baseline is what its OpenH264 fallback decodes).
- ``webm``: VP9 (libvpx-vp9) realtime, yuv420p; ~3× slower to encode than H.264.

Frames are written as they come (ffmpeg runs as a separate process and encodes while the
next frames render). Sides must be even (yuv420p); :func:`preflab.media.replay.fit_frame`
makes them so, and odd frames are padded by one pixel here.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any, Literal

import numpy as np

from preflab.errors import ConfigError

VideoFormat = Literal["mp4", "webm"]
FORMATS: tuple[str, ...] = ("mp4", "webm")
MIME: dict[str, str] = {"mp4": "video/mp4", "webm": "video/webm"}

_CODEC: dict[str, tuple[str, list[str]]] = {
    "mp4": (
        "libx264",
        [
            "-profile:v",
            "baseline",  # Constrained Baseline: also decodable by Firefox's OpenH264 plug-in
            "-preset",
            "veryfast",
            "-crf",
            "23",
            "-threads",
            "1",
            "-movflags",
            "+faststart",
        ],
    ),
    "webm": (
        "libvpx-vp9",
        ["-deadline", "realtime", "-cpu-used", "8", "-b:v", "0", "-crf", "34", "-threads", "1"],
    ),
}


def check_format(fmt: str) -> None:
    if fmt not in FORMATS:
        raise ConfigError(f"video format must be one of {FORMATS}, got {fmt!r}")


class ClipWriter:
    """Streams frames of one size into one clip file; use as a context manager."""

    def __init__(self, path: str | Path, *, fps: float, fmt: VideoFormat = "mp4") -> None:
        check_format(fmt)
        if not fps > 0:
            raise ValueError(f"fps must be > 0, got {fps}")
        self.path = Path(path)
        self.fps = float(
            fps
        )  # imageio-ffmpeg passes it to ffmpeg as a fraction (125, 15, 30000/1001)
        self.fmt = fmt
        self.size: tuple[int, int] | None = None  # (width, height)
        self.n_frames = 0
        self._gen: Any = None

    def _open(self, width: int, height: int) -> None:
        import imageio_ffmpeg

        codec, params = _CODEC[self.fmt]
        self.size = (width, height)
        self._gen = imageio_ffmpeg.write_frames(
            str(self.path),
            (width, height),
            fps=self.fps,
            codec=codec,
            pix_fmt_in="rgb24",
            pix_fmt_out="yuv420p",
            output_params=["-f", self.fmt, *params],
            macro_block_size=2,
            ffmpeg_log_level="error",
        )
        self._gen.send(None)

    def write(self, frame: np.ndarray, *, repeat: int = 1) -> None:
        """Append one (H, W, 3) uint8 frame ``repeat`` times (a still: see
        :attr:`preflab.media.timing.ClipTiming.still_frames`); every frame must have the first
        frame's size."""
        img = np.asarray(frame)
        if img.ndim != 3 or img.shape[2] < 3:
            raise ValueError(f"frames must be (H, W, 3) RGB arrays, got shape {img.shape}")
        img = img[..., :3]
        if img.dtype != np.uint8:
            img = np.clip(img, 0, 255).astype(np.uint8)
        h, w = img.shape[:2]
        if h % 2 or w % 2:
            img = np.pad(img, ((0, h % 2), (0, w % 2), (0, 0)), mode="edge")
            h, w = img.shape[:2]
        if self._gen is None:
            self._open(w, h)
        elif self.size is not None and (w, h) != self.size:  # set by _open
            from preflab.media.replay import fit_frame

            img = _letterbox(fit_frame(img, max(self.size)), self.size)
        data = np.ascontiguousarray(img).tobytes()
        for _ in range(max(0, int(repeat))):
            self._gen.send(data)
            self.n_frames += 1

    def close(self) -> None:
        if self._gen is not None:
            self._gen.close()
            self._gen = None

    def __enter__(self) -> ClipWriter:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()


def _letterbox(img: np.ndarray, size: tuple[int, int]) -> np.ndarray:
    """``img`` centred on a black canvas of ``size`` = (width, height), cropped if larger."""
    w, h = size
    out = np.zeros((h, w, 3), np.uint8)
    ih, iw = min(img.shape[0], h), min(img.shape[1], w)
    y0, x0 = (h - ih) // 2, (w - iw) // 2
    out[y0 : y0 + ih, x0 : x0 + iw] = img[:ih, :iw]
    return out
