"""A clip of the current policy, for the trackers (``--log-clip-every``): one episode of up to
:data:`CLIP_MAX_STEPS` steps in its own env and seeds (the run's RNGs are not touched), saved as
RUN_DIR/clips/round-N.mp4 and handed to every tracker."""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path

import numpy as np
from stable_baselines3.common.base_class import BaseAlgorithm

from preflab.config import TrainConfig
from preflab.loop.results import RunParts
from preflab.policy.evaluate import EVAL_SEED_OFFSET
from preflab.rundir.tracking import Tracker

CLIP_MAX_STEPS = 1000
"""Steps of a tracker clip of the policy at most (``log_clip_every``)."""
CLIP_SIZE = 160
"""Longer side of a tracker clip, pixels."""


def log_policy_clip(
    agent: BaseAlgorithm,
    env_id: str,
    seed: int,
    trackers: Sequence[Tracker],
    run_dir: Path,
    round_: int,
    step: int,
) -> None:
    """Render, save and hand to ``trackers`` a clip of ``agent`` (module docstring)."""
    from preflab.media.encode import ClipWriter
    from preflab.media.policy_frames import rollout_frames
    from preflab.media.timing import clip_timing

    frames = np.stack(
        list(
            rollout_frames(
                agent,
                env_id,
                episodes=1,
                max_steps=CLIP_MAX_STEPS,
                seed=EVAL_SEED_OFFSET + seed,
                deterministic=True,
                size=CLIP_SIZE,
            )
        )
    )
    fps = clip_timing(env_id).fps
    path = run_dir / "clips" / f"round-{round_:04d}.mp4"
    path.parent.mkdir(exist_ok=True)
    with ClipWriter(path, fps=fps) as writer:
        for f in frames:
            writer.write(f)
    for tracker in trackers:
        tracker.clip(step, frames, path, fps)


def log_round_clip(
    parts: RunParts, config: TrainConfig, run_dir: Path, round_: int, step: int
) -> None:
    """A round's clip of the policy, every ``config.log_clip_every`` rounds when the run has
    trackers; a clip that cannot be rendered is a warning (``parts.warnings``), never the run's
    end."""
    every = config.log_clip_every
    if not (parts.trackers and every and round_ % every == 0):
        return
    try:
        log_policy_clip(
            parts.agent, config.env_id, config.seed, parts.trackers, run_dir, round_, int(step)
        )
    except Exception as exc:  # a clip must never end the run
        parts.warnings.warn(
            "clip_failed",
            f"round {round_}: the clip of the policy could not be rendered "
            f"({type(exc).__name__}: {str(exc)[:200]}); the run goes on without it",
        )
