"""Replayers: put an environment into a stored state and render one RGB frame.

A replayer is built once per (env id, size) in a render worker and then called once per step:
``frame(state) -> (H, W, 3) uint8``. Built-ins:

- MuJoCo: ``qpos, qvel`` into ``env.data`` + ``mj_forward``, drawn by ``mujoco.Renderer``
  (headless EGL by default) with shadows, reflections and multisampling off. The camera is gymnasium's
  default for the env (distance, elevation, azimuth, lookat height) and follows the tracked
  body horizontally (``trackbodyid`` of the env's camera config, else the root body when it
  can move), so a hopper never leaves the picture.
- Meta-World: as MuJoCo, with the task's body and site positions put back first, seen from
  Meta-World's ``corner`` camera.
- DeepMind Control: ``physics.set_state`` then ``physics.render`` from the domain's first
  camera (the suite's tracking camera: walker, cheetah and quadruped stay in the picture).
- Classic control: ``env.unwrapped.state = state`` then ``env.render()`` (rgb_array).
- PrefLab grid worlds and MiniGrid: the grid, agent and carried object are rebuilt from the
  state and drawn with MiniGrid's tile renderer (no field-of-view highlight).

Each is its family's :meth:`~preflab.env_families.EnvFamily.replayer` (the classes live in
:mod:`preflab.env_families` and are re-exported here). Register others with
:func:`register_replayer` (or a whole family with :func:`preflab.env_families.register`). Frames are fitted into ``size × size``
(aspect kept, even sides, as H.264 in yuv420p needs).
"""

from __future__ import annotations

import os
from collections.abc import Callable
from typing import Any

from preflab.env_families import Replayer, family_of_env, fit_frame, register_family
from preflab.env_families.classic import ClassicControlReplayer
from preflab.env_families.dm_control import DmControlReplayer
from preflab.env_families.metaworld import MetaWorldReplayer
from preflab.env_families.minigrid import MiniGridReplayer, PrefLabGridReplayer
from preflab.env_families.mujoco import MujocoReplayer
from preflab.media.capture import Match, _matches

__all__ = [
    "DEFAULT_FPS",
    "MAX_FPS",
    "RENDERER_VERSION",
    "ClassicControlReplayer",
    "DmControlReplayer",
    "MetaWorldReplayer",
    "MiniGridReplayer",
    "MujocoReplayer",
    "PrefLabGridReplayer",
    "Replayer",
    "ReplayerFactory",
    "env_fps",
    "fit_frame",
    "make_replay_env",
    "register_replayer",
    "replayer_for",
]

RENDERER_VERSION = "2"
"""Bumped whenever frames of the same state would look different (part of every media key).
2: clips play at the env's real time (:mod:`preflab.media.timing`), no longer capped at 60 fps."""
DEFAULT_FPS = 30
MAX_FPS = 60


ReplayerFactory = Callable[[Any, int], Replayer]
"""factory(env made with render_mode='rgb_array', size in pixels) -> Replayer."""

_USER: list[tuple[Match, ReplayerFactory]] = []


def register_replayer(match: Match, factory: ReplayerFactory) -> None:
    """Register ``factory`` for envs matching ``match`` (a class or a predicate on the unwrapped
    env). Later registrations win over earlier ones and over the built-ins. Register in a module
    that the render workers import too (e.g. the module that registers the env id)."""
    if not (isinstance(match, type) or callable(match)):
        raise TypeError(f"match must be a class or a predicate, got {match!r}")
    _USER.insert(0, (match, factory))


def replayer_for(env: Any, size: int) -> Replayer | None:
    """A replayer for ``env`` at ``size`` pixels, or None when no replayer matches."""
    u = getattr(env, "unwrapped", env)
    for match, factory in _USER:
        if _matches(match, u):
            return factory(env, size)
    family = family_of_env(u)
    return None if family is None else family.replayer(env, size)


def make_replay_env(env_id: str, size: int) -> Any:
    """The env for replaying ``env_id`` in rgb_array render mode, reset once.

    Built with gymnasium directly (not :func:`preflab.envs.make_env`, which loads
    stable-baselines3 and torch: seconds of start-up a render worker does not need).
    """
    del size  # replayers size their own output (MuJoCo's offscreen buffer is enlarged to fit)
    os.environ.setdefault("MUJOCO_GL", "egl")
    os.environ.setdefault("PYOPENGL_PLATFORM", os.environ["MUJOCO_GL"])
    os.environ.setdefault("SDL_VIDEODRIVER", "dummy")
    import gymnasium as gym

    register_family(
        env_id
    )  # the family's lazy import (PrefLab's grids: preflab.env_families.grids)
    env = gym.make(env_id, render_mode="rgb_array")
    env.reset(seed=0)
    return env


def env_fps(env: Any) -> int:
    """The env's ``metadata['render_fps']`` (default 30), capped at 60. Clips no longer use it:
    their frame rate is the env's real time, :func:`preflab.media.timing.clip_timing`."""
    meta = getattr(getattr(env, "unwrapped", env), "metadata", None) or {}
    try:
        fps = round(float(meta.get("render_fps") or DEFAULT_FPS))
    except (TypeError, ValueError):
        fps = DEFAULT_FPS
    return max(1, min(MAX_FPS, fps))
