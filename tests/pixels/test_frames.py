"""Stacked frames are stored once: compact in memory, in batches and on disk."""

from __future__ import annotations

import numpy as np
import pytest
import torch
from numpy.lib.array_utils import byte_bounds

from preflab.pixels.frames import compact, compact_frames
from preflab.records import Segment
from preflab.reward.batch import SegmentBatch
from preflab.store.arrays import ArrayStore
from preflab.store.feedback_store import FeedbackStore
from preflab.testing.factories import make_segment

T, K, H, W = 25, 4, 84, 84


def stack_of(frames: np.ndarray) -> np.ndarray:
    """What a frame stacker produces: step t holds frames t..t+K-1 (a full copy)."""
    return np.stack([frames[t : t + K] for t in range(frames.shape[0] - K + 1)])


def noise_frames(n: int, seed: int = 0) -> np.ndarray:
    # incompressible frames, so file sizes measure what is stored, not how well it compresses
    return np.random.default_rng(seed).integers(0, 256, (n, H, W), dtype=np.uint8)


def test_compaction_is_exact_and_zero_copy() -> None:
    frames = noise_frames(T + K - 1)
    full = stack_of(frames)
    assert full.shape == (T, K, H, W)
    np.testing.assert_array_equal(compact_frames(full), frames)
    view = compact(full)
    np.testing.assert_array_equal(view, full)
    assert view.base is not None and np.shares_memory(view, view.base)
    # memory behind the view: T + K − 1 frames, not T·K
    lo, hi = byte_bounds(view)
    assert hi - lo == (T + K - 1) * H * W
    # episode starts are zero-filled stacks: still a sliding stack
    start = stack_of(np.concatenate([np.zeros((K - 1, H, W), np.uint8), frames[:T]]))
    np.testing.assert_array_equal(compact(start), start)
    # not a sliding stack (e.g. RGB channels): left as it is, nothing lost
    rgb = np.random.default_rng(1).integers(0, 256, (T, 3, H, W), dtype=np.uint8)
    assert compact_frames(rgb) is None and compact(rgb) is rgb


def test_store_keeps_one_frame_per_step(tmp_path) -> None:
    frames = noise_frames(T + K - 1)
    seg = make_segment(obs=compact(stack_of(frames)), act_dim=6)
    store = ArrayStore(tmp_path)
    store.write(seg)
    size = store.path(seg.id).stat().st_size
    frame_bytes = H * W
    assert size < 1.05 * (T + K - 1) * frame_bytes  # 28 frames (+ small arrays)
    assert size < 0.3 * T * K * frame_bytes  # not 100 stacked frames
    with np.load(store.path(seg.id)) as z:
        assert "obs" not in z.files and z["frames"].shape == (T + K - 1, H, W)
    back = store.read(seg.id)
    assert back["obs"].shape == (T, K, H, W) and back["obs"].dtype == np.uint8
    np.testing.assert_array_equal(back["obs"], seg.obs)
    # a non-stacked image sequence is stored as it is and read back exactly
    rgb = make_segment(
        obs=np.random.default_rng(2).integers(0, 256, (T, 3, H, W), dtype=np.uint8), act_dim=6
    )
    store.write(rgb)
    np.testing.assert_array_equal(store.read(rgb.id)["obs"], rgb.obs)


def test_feedback_store_round_trip_keeps_ids(tmp_path) -> None:
    seg = make_segment(obs=compact(stack_of(noise_frames(T + K - 1, seed=3))), act_dim=6)
    store = FeedbackStore(tmp_path / "f.db")
    store.segments.add([seg])
    (back,) = store.segments.get([seg.id])
    np.testing.assert_array_equal(back.obs, seg.obs)
    assert Segment.content_id(back.obs, back.acts) == seg.id


def test_segment_batch_holds_frames_once() -> None:
    segs = [
        make_segment(obs=compact(stack_of(noise_frames(T + K - 1, seed=s))), act_dim=6)
        for s in range(3)
    ]
    batch = SegmentBatch.from_segments(segs)
    assert batch.obs.shape == (3, T, K, H, W) and batch.obs.dtype == torch.uint8
    assert batch.is_image and batch.obs_shape == (K, H, W)
    assert batch.obs.untyped_storage().nbytes() == 3 * (T + K - 1) * H * W
    for i, s in enumerate(segs):
        assert torch.equal(batch.obs[i], torch.from_numpy(np.ascontiguousarray(s.obs)))
    # a shorter segment is zero-padded and masked
    short = make_segment(obs=compact(stack_of(noise_frames(10 + K - 1, seed=9))), act_dim=6)
    b2 = SegmentBatch.from_segments([segs[0], short])
    assert b2.mask[1].sum() == 10 and torch.equal(
        b2.obs[1, :10], torch.from_numpy(np.ascontiguousarray(short.obs))
    )


@pytest.mark.parametrize("bad", [np.zeros((T, K, H), np.uint8), np.zeros((0, K, H, W), np.uint8)])
def test_bad_image_shapes_are_refused(bad: np.ndarray) -> None:
    from preflab.errors import DataError

    with pytest.raises(DataError):
        Segment(id="x", obs=bad, acts=np.zeros((len(bad), 1)), true_rewards=np.zeros(len(bad)))
