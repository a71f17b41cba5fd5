"""Simulator-state capture: what a segment keeps so that it can be rendered later.

A *capture function* maps an (unwrapped) environment to a 1-D float64 vector of constant
length: the state right now. :class:`~preflab.policy.reward_wrapper.SegmentRecorder` calls it
for every env before every step, so built-ins are cheap (a few microseconds):

- MuJoCo (``gymnasium.envs.mujoco.MujocoEnv``): ``qpos ⧺ qvel``.
- Meta-World: ``qpos ⧺ qvel ⧺ body_pos ⧺ site_pos`` (a reset moves the task's objects and goal
  by editing the model's body and site positions, which ``qpos`` does not hold).
- DeepMind Control (through Shimmy): the physics state ``qpos ⧺ qvel ⧺ act``.
- Classic control (Pendulum, CartPole, MountainCar, Acrobot, ...): ``env.unwrapped.state``.
- PrefLab grid worlds (``PrefLab/{NoLock,Lock,MultiLock}-v0``): the compact observation of
  :func:`preflab.env_families.grids.encode_state` (agent cell, direction, carried keys, open doors, key,
  door and goal cells: the rest of the layout is fixed).
- Other MiniGrid envs: agent x, y, direction, carried object (type, colour, state), then the
  whole grid's (type, colour, state) encoding.

Each is its family's :meth:`~preflab.env_families.EnvFamily.capture`
(:mod:`preflab.env_families`). Other environments register their own with
:func:`register_capture` (and a replayer with :func:`preflab.media.replay.register_replayer`), or
a whole family with :func:`preflab.env_families.register`. This module imports nothing heavy:
MuJoCo and MiniGrid classes are looked up only when those packages are already loaded.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any, cast

import numpy as np

from preflab.env_families import family_of_env

CaptureFn = Callable[[Any], np.ndarray]
"""capture(unwrapped_env) -> 1-D float64 state vector of constant length."""
Match = type | Callable[[Any], bool]
"""A class (matched with isinstance) or a predicate on the unwrapped env."""

_USER: list[tuple[Match, CaptureFn]] = []


def register_capture(match: Match, fn: CaptureFn) -> None:
    """Register ``fn`` for envs matching ``match`` (a class or a predicate on the unwrapped env).

    Later registrations win over earlier ones and over the families' own captures.
    """
    if not (isinstance(match, type) or callable(match)):
        raise TypeError(f"match must be a class or a predicate, got {match!r}")
    _USER.insert(0, (match, fn))


def _matches(match: Match, env: Any) -> bool:
    if isinstance(match, type):
        return isinstance(env, match)
    return bool(match(env))


def capture_for(env: Any) -> CaptureFn | None:
    """The capture function for ``env`` (wrappers are looked through), or None."""
    u = getattr(env, "unwrapped", env)
    for match, fn in _USER:
        if _matches(match, u):
            return fn
    family = family_of_env(u)
    if family is None or not family.has_capture():
        return None
    return cast(CaptureFn, family.capture)  # a family with a capture returns arrays


def capture_state(env: Any) -> np.ndarray | None:
    """The current state of ``env`` as a 1-D float64 vector, or None without a capture."""
    fn = capture_for(env)
    if fn is None:
        return None
    return np.asarray(fn(getattr(env, "unwrapped", env)), dtype=np.float64).reshape(-1)
