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
  :func:`preflab.envs.grids.encode_state` (agent cell, direction, carried keys, open doors, key,
  door and goal cells: the rest of the layout is fixed).
- Other MiniGrid envs: agent x, y, direction, carried object (type, colour, state), then the
  whole grid's (type, colour, state) encoding.

Other environments register their own with :func:`register_capture` (and a replayer with
:func:`preflab.media.replay.register_replayer`). This module imports nothing heavy: MuJoCo and
MiniGrid classes are looked up only when those packages are already loaded.
"""

from __future__ import annotations

import sys
from collections.abc import Callable
from typing import Any

import numpy as np

CaptureFn = Callable[[Any], np.ndarray]
"""capture(unwrapped_env) -> 1-D float64 state vector of constant length."""
Match = type | Callable[[Any], bool]
"""A class (matched with isinstance) or a predicate on the unwrapped env."""

_USER: list[tuple[Match, CaptureFn]] = []


def register_capture(match: Match, fn: CaptureFn) -> None:
    """Register ``fn`` for envs matching ``match`` (a class or a predicate on the unwrapped env).

    Later registrations win over earlier ones and over the built-ins.
    """
    if not (isinstance(match, type) or callable(match)):
        raise TypeError(f"match must be a class or a predicate, got {match!r}")
    _USER.insert(0, (match, fn))


def _matches(match: Match, env: Any) -> bool:
    if isinstance(match, type):
        return isinstance(env, match)
    return bool(match(env))


# ----- built-ins ------------------------------------------------------------------------------
def _loaded_class(module: str, name: str) -> type | None:
    mod = sys.modules.get(module)
    cls = getattr(mod, name, None) if mod is not None else None
    return cls if isinstance(cls, type) else None


def is_mujoco(env: Any) -> bool:
    """The env is a gymnasium MuJoCo env (has ``model``/``data`` and ``set_state``)."""
    cls = _loaded_class("gymnasium.envs.mujoco.mujoco_env", "MujocoEnv")
    return cls is not None and isinstance(env, cls)


def capture_mujoco(env: Any) -> np.ndarray:
    """qpos ⧺ qvel."""
    d = env.data
    return np.concatenate([d.qpos, d.qvel])


def is_metaworld(env: Any) -> bool:
    """A Meta-World task (a MuJoCo env whose resets move objects by editing the model)."""
    cls = _loaded_class("metaworld.sawyer_xyz_env", "SawyerXYZEnv")
    return cls is not None and isinstance(env, cls)


def capture_metaworld(env: Any) -> np.ndarray:
    """qpos ⧺ qvel ⧺ model.body_pos ⧺ model.site_pos (flattened)."""
    d, m = env.data, env.model
    return np.concatenate([d.qpos, d.qvel, m.body_pos.reshape(-1), m.site_pos.reshape(-1)])


def is_dm_control(env: Any) -> bool:
    """A DeepMind Control env seen through Shimmy's compatibility layer."""
    return type(env).__module__.split(".")[0] == "shimmy" and hasattr(env, "_env")


def capture_dm_control(env: Any) -> np.ndarray:
    """The physics state: qpos ⧺ qvel ⧺ act."""
    return np.asarray(env._env.physics.get_state(), np.float64)


def is_classic_control(env: Any) -> bool:
    """A gymnasium classic-control env: its whole state lives in ``env.state`` (set by reset)."""
    return type(env).__module__.startswith("gymnasium.envs.classic_control")


def capture_classic(env: Any) -> np.ndarray:
    """``env.state`` as float64."""
    return np.asarray(env.state, dtype=np.float64).reshape(-1)


def is_preflab_grid(env: Any) -> bool:
    """A PrefLab NoLock / Lock / MultiLock grid world."""
    cls = _loaded_class("preflab.envs.grids", "LockGridEnv")
    return cls is not None and isinstance(env, cls)


def capture_preflab_grid(env: Any) -> np.ndarray:
    """The compact observation (it decodes back to the full state for the fixed layout)."""
    from preflab.envs.grids import encode_state

    return encode_state(env.grid_state()).astype(np.float64)


def is_minigrid(env: Any) -> bool:
    """Any MiniGrid env."""
    cls = _loaded_class("minigrid.minigrid_env", "MiniGridEnv")
    return cls is not None and isinstance(env, cls)


def capture_minigrid(env: Any) -> np.ndarray:
    """[agent x, agent y, direction, carried (type, colour, state) or -1s, grid encoding...];
    the grid part equals ``env.grid.encode().reshape(-1)`` (x-major), computed ~2× faster."""
    carried = env.carrying.encode() if env.carrying is not None else (-1, -1, -1)
    g = env.grid
    codes = [_EMPTY if o is None else o.encode() for o in g.grid]  # row-major: y * width + x
    cells = np.asarray(codes, np.float64).reshape(g.height, g.width, 3).transpose(1, 0, 2)
    head = (env.agent_pos[0], env.agent_pos[1], env.agent_dir, *carried)
    return np.concatenate([np.asarray(head, np.float64), cells.reshape(-1)])


_EMPTY = (1, 0, 0)  # MiniGrid's OBJECT_TO_IDX["empty"], colour 0, state 0


_BUILTIN: tuple[tuple[Match, CaptureFn], ...] = (
    (is_metaworld, capture_metaworld),  # before is_mujoco: a Meta-World env is a MujocoEnv
    (is_mujoco, capture_mujoco),
    (is_dm_control, capture_dm_control),
    (is_classic_control, capture_classic),
    (is_preflab_grid, capture_preflab_grid),
    (is_minigrid, capture_minigrid),
)


def capture_for(env: Any) -> CaptureFn | None:
    """The capture function for ``env`` (wrappers are looked through), or None."""
    u = getattr(env, "unwrapped", env)
    for match, fn in (*_USER, *_BUILTIN):
        if _matches(match, u):
            return fn
    return None


def capture_state(env: Any) -> np.ndarray | None:
    """The current state of ``env`` as a 1-D float64 vector, or None without a capture."""
    fn = capture_for(env)
    if fn is None:
        return None
    return np.asarray(fn(getattr(env, "unwrapped", env)), dtype=np.float64).reshape(-1)
