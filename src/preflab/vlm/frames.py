"""A segment's frames, rendered with the studio's own renderers.

Which frames: ``count`` key frames evenly spaced from the first step to the last (both
included), each fitted into ``size × size`` pixels (aspect kept), sent as separate images
(``layout='frames'``) or side by side as one image (``layout='strip'``, fewer image tokens on
servers that charge per image).

How they are drawn is what the studio's clips show (:mod:`preflab.media`): a segment with
simulator states is replayed by the env family's replayer (:func:`preflab.media.replay.
replayer_for`: MuJoCo, Meta-World, DeepMind Control, classic control, grid worlds); a segment
whose observations are images (Atari) shows its newest frame of each step
(:func:`preflab.media.pixels.to_clip_frames`). A segment with neither cannot be shown to a
vision-language model: a :class:`~preflab.errors.DataError` says so.
"""

from __future__ import annotations

import atexit
from dataclasses import dataclass
from typing import Any, Literal

import numpy as np

from preflab.errors import ConfigError, DataError
from preflab.records import Segment

Layout = Literal["frames", "strip"]
View = Literal["frames", "states"]
ImageFormat = Literal["jpeg", "png"]
STRIP_GAP = 4
"""White pixels between the frames of a strip."""


@dataclass(frozen=True, kw_only=True)
class FrameSpec:
    """Which frames of a segment are shown, how large, and how they are encoded."""

    count: int = 4
    """Key frames per segment, evenly spaced from its first step to its last."""
    size: int = 224
    """Longer side of one frame in pixels (aspect kept)."""
    format: ImageFormat = "jpeg"
    """Image encoding: 'jpeg' (smaller) or 'png' (lossless)."""
    layout: Layout = "frames"
    """'frames': one image per key frame; 'strip': the key frames side by side in one image."""
    jpeg_quality: int = 85
    """JPEG quality, 1 to 95."""

    def __post_init__(self) -> None:
        if not 1 <= self.count <= 32:
            raise ConfigError(f"frames per segment must be 1 to 32, got {self.count}")
        if not 16 <= self.size <= 2048:
            raise ConfigError(f"image size must be 16 to 2048 pixels, got {self.size}")
        if self.format not in ("jpeg", "png"):
            raise ConfigError(f"image format must be 'jpeg' or 'png', got {self.format!r}")
        if self.layout not in ("frames", "strip"):
            raise ConfigError(f"frame layout must be 'frames' or 'strip', got {self.layout!r}")
        if not 1 <= self.jpeg_quality <= 95:
            raise ConfigError(f"jpeg_quality must be 1 to 95, got {self.jpeg_quality}")


def key_frame_steps(length: int, count: int) -> list[int]:
    """``count`` step indices evenly spaced over ``length`` steps, first and last included
    (fewer when the segment is shorter than ``count``)."""
    if length < 1:
        raise DataError("a segment to render has no steps")
    if count == 1:
        return [length - 1]
    steps = np.rint(np.linspace(0, length - 1, min(count, length))).astype(int)
    return sorted({int(s) for s in steps})


def described_states(segment: Segment, count: int) -> str:
    """The key steps of ``segment`` in words (the env's state describer, as the text judge
    uses): one line per key step, for a model that reads no images."""
    from preflab.llm.describers import describe_state

    steps = key_frame_steps(segment.length, count)
    return "\n".join(
        f"Step {t + 1} of {segment.length}: {describe_state(segment.env_id, segment.obs[t])}"
        for t in steps
    )


def strip(frames: list[np.ndarray]) -> np.ndarray:
    """The frames side by side (top-aligned, white gaps), one (H, W, 3) uint8 image."""
    h = max(f.shape[0] for f in frames)
    w = sum(f.shape[1] for f in frames) + STRIP_GAP * (len(frames) - 1)
    out = np.full((h, w, 3), 255, np.uint8)
    x = 0
    for f in frames:
        out[: f.shape[0], x : x + f.shape[1]] = f[..., :3]
        x += f.shape[1] + STRIP_GAP
    return out


class SegmentFrames:
    """Renders key frames of segments; replayers are built once per env id and reused."""

    def __init__(self, spec: FrameSpec) -> None:
        self.spec = spec
        self._replayers: dict[str, tuple[Any, Any]] = {}

    def images(self, segment: Segment) -> list[np.ndarray]:
        """The images sent for ``segment``: its key frames, or one strip of them."""
        frames = self.key_frames(segment)
        return [strip(frames)] if self.spec.layout == "strip" else frames

    def key_frames(self, segment: Segment) -> list[np.ndarray]:
        """(h, w, 3) uint8 key frames of ``segment``, each fitted into ``spec.size``."""
        from preflab.media.pixels import to_clip_frames
        from preflab.media.replay import fit_frame

        steps = key_frame_steps(segment.length, self.spec.count)
        obs = segment.obs
        if obs.dtype == np.uint8 and obs.ndim == 4:  # image observations: shown as themselves
            newest = np.moveaxis(obs[steps], 1, -1) if obs.shape[1] == 3 else obs[steps, -1]
            return list(to_clip_frames(newest, self.spec.size))
        if segment.states is None:
            raise DataError(
                f"segment {segment.id} ({segment.env_id or 'unknown env'}) has no simulator "
                "states and no image observations, so it cannot be rendered for the "
                "vision-language judge; record it with state capture on (SegmentRecorder's "
                "default) or use --source llm, which reads states as text"
            )
        replayer = self._replayer(segment.env_id)
        return [fit_frame(replayer.frame(segment.states[t]), self.spec.size) for t in steps]

    def _replayer(self, env_id: str) -> Any:
        if env_id not in self._replayers:
            from preflab.media.replay import make_replay_env, replayer_for

            if not env_id:
                raise DataError("a segment without env_id cannot be rendered (no replayer)")
            env = make_replay_env(env_id, self.spec.size)
            replayer = replayer_for(env, self.spec.size)
            if replayer is None:
                env.close()
                raise DataError(
                    f"no replayer renders {env_id!r}; register one with "
                    "preflab.media.replay.register_replayer (as the studio's clips need too)"
                )
            if not self._replayers:  # GL contexts must go before the interpreter tears down
                atexit.register(self.close)
            self._replayers[env_id] = (env, replayer)
        return self._replayers[env_id][1]

    def close(self) -> None:
        """Free the replayers and their envs."""
        for env, replayer in self._replayers.values():
            replayer.close()
            env.close()
        if self._replayers:
            atexit.unregister(self.close)
        self._replayers.clear()
