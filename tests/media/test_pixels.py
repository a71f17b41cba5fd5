"""Image-observation segments become clips straight from their stored frames (no replay)."""

from __future__ import annotations

import itertools
from pathlib import Path

import numpy as np

from preflab.media import MediaConfig, MediaService
from preflab.media.pixels import image_segment_clip, newest_frames, to_clip_frames
from preflab.pixels.frames import compact
from preflab.pixels.toy import square_frame
from preflab.records import Segment
from preflab.store.feedback_store import FeedbackStore
from preflab.testing.factories import make_segment

T, K = 10, 4
SIZE = 256


def frames_of(path: Path) -> np.ndarray:
    import imageio_ffmpeg

    gen = imageio_ffmpeg.read_frames(str(path))
    w, h = next(gen)["size"]
    return np.stack([np.frombuffer(b, np.uint8).reshape(h, w, 3) for b in gen])


def moving_square() -> Segment:
    """A frame-stacked image segment (like Atari's): a bright square moving right."""
    frames = np.stack([square_frame(6 * i, 30) for i in range(T + K - 1)])
    obs = compact(np.stack([frames[t : t + K] for t in range(T)]))
    # no simulator state: only the frames can show it
    return make_segment(obs=obs, act_dim=3, env_id="ALE/Pong-v5")


def test_newest_frame_per_step_upscaled(tmp_path: Path) -> None:
    store = FeedbackStore(tmp_path / "f.db")
    seg = moving_square()
    store.segments.add([seg])
    npz = store.arrays.path(seg.id)
    newest = newest_frames(npz)
    assert newest is not None and newest.shape == (T, 84, 84)
    np.testing.assert_array_equal(newest, seg.obs[:, -1])
    clip = image_segment_clip(npz, SIZE)
    assert clip is not None and clip.shape == (T, 252, 252, 3)  # 84 × 3, nearest neighbour
    np.testing.assert_array_equal(clip[:, ::3, ::3, 0], newest)
    assert to_clip_frames(np.zeros((2, 85, 85), np.uint8), 100).shape == (2, 84, 84, 3)
    store.close()


def test_media_service_renders_image_segments_from_frames(tmp_path: Path) -> None:
    store = FeedbackStore(tmp_path / "f.db")
    seg = moving_square()
    store.segments.add([seg])
    with MediaService(store, tmp_path / "cache", config=MediaConfig(size=SIZE, workers=1)) as media:
        key = media.request([seg.id], priority=0)
        assert media.wait(key, 120) == "ready", media.clip_info(key)
        path = media.path(key)
        assert path is not None and path.read_bytes()[4:8] == b"ftyp"
        fr = frames_of(path)
        assert fr.shape == (T, 252, 252, 3)
        # the square moves right by 6 px = 18 clip px per step: its brightest column follows
        cols = [int(np.argmax(f[:, :, 0].max(0) > 128)) for f in fr]
        assert all(b > a for a, b in itertools.pairwise(cols))
    store.close()
