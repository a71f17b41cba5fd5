"""Frames of a policy acting in its env: what ``preflab record`` writes and what the trackers
show every few rounds (``log_clip_every``).

Frames come from the studio's renderers (:mod:`preflab.media.replay`): MuJoCo envs through a
tracking camera, grid worlds with MiniGrid's tiles; other envs with their ``rgb_array`` render.
One frame for each episode's start and one after every step.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from typing import Any

import numpy as np


def _frames(
    env: Any, size: int, env_id: str
) -> tuple[Callable[[], np.ndarray], Callable[[], None]]:
    """(frame of ``env``'s current state, close): the studio's replayer for the env when it has
    one (a tracking camera for MuJoCo), else the env's own rgb_array render."""
    from preflab.media.capture import capture_state
    from preflab.media.replay import fit_frame, make_replay_env, replayer_for

    if capture_state(env) is not None:
        shown = make_replay_env(env_id, size)
        replayer = replayer_for(shown, size)
        if replayer is not None:

            def close() -> None:
                replayer.close()
                shown.close()

            return lambda: replayer.frame(capture_state(env)), close  # type: ignore[arg-type]
        shown.close()
    return lambda: fit_frame(env.render(), size), lambda: None


def rollout_frames(
    agent: Any,
    env_id: str,
    *,
    episodes: int,
    max_steps: int,
    seed: int,
    deterministic: bool,
    size: int,
) -> Iterator[np.ndarray]:
    """The frames of ``episodes`` episodes of ``agent`` (reset with ``seed + k``)."""
    import torch

    from preflab.envs import make_env

    env = make_env(env_id, render_mode="rgb_array")
    frame, close = None, None
    try:
        with torch.random.fork_rng(devices=[]):
            torch.manual_seed(seed)
            for k in range(episodes):
                obs, _ = env.reset(seed=seed + k)
                if frame is None:  # after the first reset: classic-control states exist then
                    frame, close = _frames(env, size, env_id)
                yield frame()
                for _ in range(max_steps):
                    act, _ = agent.predict(obs, deterministic=deterministic)
                    obs, _r, term, trunc, _ = env.step(act)
                    yield frame()
                    if term or trunc:
                        break
    finally:
        if close is not None:
            close()
        env.close()
