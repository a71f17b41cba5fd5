"""Grid worlds: MiniGrid (and BabyAI) and PrefLab's own NoLock / Lock / MultiLock worlds.

- ids: ``MiniGrid-*`` and ``BabyAI-*`` (registered by importing ``minigrid``); PrefLab's
  ``PrefLab/{NoLock,Lock,MultiLock}-v0`` (registered by :mod:`preflab.env_families.grids`, imported only
  when such an id is asked for).
- rendering state: for MiniGrid, agent x, y, direction, carried object (type, colour, state),
  then the whole grid's (type, colour, state) encoding; for PrefLab's worlds, the compact
  observation of :func:`preflab.env_families.grids.encode_state` (agent cell, direction, carried keys,
  open doors, key, door and goal cells: the rest of the layout is fixed). Both are drawn with
  MiniGrid's tile renderer (no field-of-view highlight).
- frame timing: MiniGrid's ``render_fps`` (PrefLab's worlds are read off ``MiniGridEnv``
  without building one: registering them loads preflab.envs, which the studio must not).
- presets: rl-baselines3-zoo's MiniGrid entries.
"""

from __future__ import annotations

import contextlib
from typing import Any

import numpy as np

from preflab.env_families.base import EnvFamily, Replayer, fit_frame, loaded_class

PREFLAB_GRID_PREFIX = "PrefLab/"
"""Id prefix of PrefLab's grid worlds (paper 004)."""
MINIGRID_PREFIXES = ("MiniGrid-", "BabyAI-")
"""Id prefixes of the ids that the ``minigrid`` package registers."""
_EMPTY = (1, 0, 0)  # MiniGrid's OBJECT_TO_IDX["empty"], colour 0, state 0


def _tile_size(width: int, height: int, size: int) -> int:
    return max(4, size // max(width, height))


# ----- MiniGrid -------------------------------------------------------------------------------
def is_minigrid(env: Any) -> bool:
    """Any MiniGrid env."""
    cls = loaded_class("minigrid.minigrid_env", "MiniGridEnv")
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


class MiniGridReplayer:
    """[agent x, y, dir, carried (type, colour, state), grid encoding] → MiniGrid tiles."""

    def __init__(self, env: Any, size: int) -> None:
        self.u, self.size = env.unwrapped, size
        self.w, self.h = int(self.u.width), int(self.u.height)
        self.tile = _tile_size(self.w, self.h, size)

    def frame(self, state: np.ndarray) -> np.ndarray:
        from minigrid.core.grid import Grid

        s = np.rint(np.asarray(state, np.float64)).astype(np.int64)
        if s.shape[0] != 6 + self.w * self.h * 3:
            raise ValueError(
                f"a {self.w}×{self.h} MiniGrid state has {6 + self.w * self.h * 3} numbers, "
                f"got {s.shape[0]}"
            )
        grid, _ = Grid.decode(s[6:].reshape(self.w, self.h, 3).astype(np.uint8))
        # s[3:6], the carried object, is kept for completeness: MiniGrid's full view omits it
        grid_img = grid.render(self.tile, (int(s[0]), int(s[1])), int(s[2]))
        return fit_frame(grid_img, self.size)

    def close(self) -> None:
        pass


def _register_minigrid() -> None:
    with contextlib.suppress(ImportError):
        import minigrid  # noqa: F401  (registers MiniGrid-* and BabyAI-* ids)


class MiniGridFamily(EnvFamily):
    """MiniGrid and BabyAI (see the module docstring)."""

    name = "grid"
    preset = "grid"

    def matches(self, env_id: str) -> bool:
        return env_id.startswith(MINIGRID_PREFIXES)

    def ensure_registered(self, env_id: str) -> None:
        import gymnasium as gym

        if env_id not in gym.registry:
            _register_minigrid()

    def register_for_suggestions(self) -> None:
        _register_minigrid()

    def owns(self, env: Any) -> bool:
        return is_minigrid(env)

    def capture(self, env: Any) -> np.ndarray | None:
        return capture_minigrid(env)

    def replayer(self, env: Any, size: int) -> Replayer | None:
        return MiniGridReplayer(env, size)


# ----- PrefLab's grid worlds ------------------------------------------------------------------
def is_preflab_grid(env: Any) -> bool:
    """A PrefLab NoLock / Lock / MultiLock grid world."""
    cls = loaded_class("preflab.env_families.grids", "LockGridEnv")
    return cls is not None and isinstance(env, cls)


def capture_preflab_grid(env: Any) -> np.ndarray:
    """The compact observation (it decodes back to the full state for the fixed layout)."""
    from preflab.env_families.grids import encode_state

    return encode_state(env.grid_state()).astype(np.float64)


class PrefLabGridReplayer:
    """Compact grid-world observation → grid rebuilt for the fixed layout → MiniGrid tiles."""

    def __init__(self, env: Any, size: int) -> None:
        from preflab.env_families.grids import LAYOUTS

        self.u, self.size = env.unwrapped, size
        self.layout = LAYOUTS[self.u.layout.name]
        self.tile = _tile_size(self.layout.width, self.layout.height, size)

    def frame(self, state: np.ndarray) -> np.ndarray:
        from minigrid.core.grid import Grid
        from minigrid.core.world_object import Door, Goal, Key

        from preflab.env_families.grids import LOCK_COLORS, decode_obs

        st = decode_obs(np.asarray(state, np.float32), self.layout.name)
        lay = self.layout
        grid = Grid(lay.width, lay.height)
        grid.wall_rect(0, 0, lay.width, lay.height)
        for i, wx in enumerate(lay.walls):
            grid.vert_wall(wx, 0)
            open_ = st.door_open[i]
            grid.set(*st.doors[i], Door(LOCK_COLORS[i], is_open=open_, is_locked=not open_))
            key = st.keys[i]
            if key is not None:
                grid.set(*key, Key(LOCK_COLORS[i]))
        grid.set(*st.goal, Goal())
        return fit_frame(grid.render(self.tile, st.agent, st.direction), self.size)

    def close(self) -> None:
        pass


class PrefLabGridFamily(EnvFamily):
    """PrefLab's NoLock / Lock / MultiLock grid worlds on MiniGrid (see the module docstring)."""

    name = "preflab-grid"
    preset = "grid"

    def matches(self, env_id: str) -> bool:
        return env_id.startswith(PREFLAB_GRID_PREFIX)

    def ensure_registered(self, env_id: str) -> None:
        import preflab.env_families.grids  # noqa: F401  (registers PrefLab/NoLock-v0, Lock-v0, MultiLock-v0)

    def owns(self, env: Any) -> bool:
        return is_preflab_grid(env)

    def capture(self, env: Any) -> np.ndarray | None:
        return capture_preflab_grid(env)

    def replayer(self, env: Any, size: int) -> Replayer | None:
        return PrefLabGridReplayer(env, size)

    def step_timing_of_id(self, env_id: str) -> tuple[float, str] | None:
        with contextlib.suppress(ImportError):
            from minigrid.minigrid_env import MiniGridEnv

            fps = float(MiniGridEnv.metadata.get("render_fps") or 0)
            if fps > 0:
                return 1.0 / fps, "render_fps"
        return None
