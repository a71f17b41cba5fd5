"""Real pools for the groupwise studio's tests and benchmark: Pendulum-v1 segments recorded
through the loop's own SegmentRecorder (with simulator states, so the media service renders
them), published with the trainer's hook :func:`preflab.sources.studio_bridge.publish_round_pool`
and a real (unfitted or fitted) reward ensemble."""

from __future__ import annotations

import numpy as np

from preflab.envs import make_vec_env
from preflab.policy.reward_wrapper import SegmentRecorder
from preflab.records import Segment
from preflab.reward.ensemble import RewardConfig, RewardEnsemble
from preflab.sources.studio_bridge import publish_round_pool
from preflab.store import FeedbackStore

ENV = "Pendulum-v1"


def pendulum_segments(n: int, length: int, seed: int, *, round: int = 0) -> list[Segment]:
    """``n`` Pendulum-v1 segments of ``length`` steps, random smooth actions (varied
    behaviours: each env holds a torque level for a while), with states."""
    n_envs = 8
    venv = make_vec_env(ENV, n_envs, seed=seed)
    rec = SegmentRecorder(venv, length, env_id=ENV, round_fn=lambda: round)
    rec.reset()
    rng = np.random.default_rng(seed)
    level = rng.uniform(-2, 2, (n_envs, 1))
    out: list[Segment] = []
    while len(out) < n:
        flip = rng.random((n_envs, 1)) < 0.05
        level = np.where(flip, rng.uniform(-2, 2, (n_envs, 1)), level)
        acts = np.clip(level + rng.normal(0, 0.3, (n_envs, 1)), -2, 2).astype(np.float32)
        rec.step(acts)
        out += rec.pop_segments()
    venv.close()
    return out[:n]


def ensemble_for(segments: list[Segment], seed: int = 0) -> RewardEnsemble:
    """A real 3-member ensemble (unfitted: its members disagree as at the start of a run)."""
    s = segments[0]
    return RewardEnsemble(
        s.obs.shape[1], s.acts.shape[1], RewardConfig(members=3, hidden=(32, 32)), seed=seed
    )


def publish_pendulum_round(
    store: FeedbackStore, n: int, round: int, *, seed: int = 0, length: int = 25
) -> list[Segment]:
    """Record ``n`` segments and publish them as round ``round``'s pool, as the loop does."""
    segs = pendulum_segments(n, length, seed + 1000 * round, round=round)
    publish_round_pool(store, round, segs, ensemble_for(segs, seed))
    return segs
