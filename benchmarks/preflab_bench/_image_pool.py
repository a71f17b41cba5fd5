"""Image-observation pools for the groupwise studio's tests: segments of the bright-square
task (:mod:`preflab.pixels.toy`) as the Atari pipeline records them (a sliding 4-frame stack
of 84×84 grey frames, one-hot actions), in three behaviours: the square drifting left, still,
or drifting right. The studio renders them from their frames (no simulator state)."""

from __future__ import annotations

import numpy as np

from preflab.pixels.frames import compact
from preflab.pixels.toy import SIDE, SQUARE, square_frame, square_reward
from preflab.records import Segment
from preflab.sources.studio_bridge import publish_round_pool
from preflab.store import FeedbackStore
from preflab.testing.factories import make_segment

STACK = 4
ENV = "ALE/Pong-v5"
"""The env id the segments carry (an Atari id, so they are treated like Pong's)."""


def square_segment(
    direction: int, rng: np.random.Generator, length: int = 12, y: int | None = None
) -> Segment:
    """One segment: the square moves ``direction`` (−1, 0, +1) × 6 px per step from near the
    centre, in row ``y`` (random when None)."""
    x0 = int(rng.integers(SIDE // 2 - 12, SIDE // 2 + 4))
    y = int(rng.integers(0, SIDE - SQUARE + 1)) if y is None else y
    xs = np.clip(x0 + direction * 6 * (np.arange(length + STACK - 1) - STACK + 1), 0, SIDE - SQUARE)
    frames = np.stack([square_frame(int(x), y) for x in xs])
    obs = compact(np.stack([frames[t : t + STACK] for t in range(length)]))
    acts = np.zeros((length, 3), np.float32)
    acts[:, direction + 1] = 1.0
    return make_segment(obs=obs, acts=acts, true_rewards=square_reward(xs[STACK - 1 :]), env_id=ENV)


def square_segments(n: int, seed: int = 0, length: int = 12) -> list[Segment]:
    """``n`` segments, directions cycling left, still, right."""
    rng = np.random.default_rng(seed)
    return [square_segment(k % 3 - 1, rng, length) for k in range(n)]


def publish_square_round(store: FeedbackStore, n: int, round: int, seed: int = 0) -> list[Segment]:
    """Record ``n`` image segments and publish them as round ``round``'s pool with a real
    (unfitted) convolutional reward ensemble, as the loop does."""
    from preflab.reward.cnn import ConvRewardEnsemble
    from preflab.reward.ensemble import RewardConfig

    segs = square_segments(n, seed + 1000 * round)
    model = ConvRewardEnsemble(
        (STACK, SIDE, SIDE), 3, RewardConfig(kind="cnn", members=3), seed=seed
    )
    publish_round_pool(store, round, segs, model)
    return segs
