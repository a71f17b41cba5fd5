"""NoLock, Lock and MultiLock grid worlds (paper 004, §5.1) on MiniGrid, with a compact observation.

The agent must reach the green goal. Lock adds one locked door (yellow) between two rooms and
the key that opens it; MultiLock adds a second room and door (blue) with its own key. Agent,
keys, door rows and goal are random every episode. A door is opened by facing it while
carrying its key and using ``interact``; the key is used up. Actions (Discrete(4)):
0 turn left, 1 turn right, 2 forward, 3 interact (pick up the key in front / unlock the door
in front). Reward is the paper's default: ``1 − 0.99·n/n_max`` on success, 0 otherwise.

The observation is a small float vector (MLP policies and state scores), positions divided by
``POS_SCALE``; :func:`decode_obs` turns it back into a :class:`GridState` exactly.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, cast

import gymnasium as gym
import numpy as np
from gymnasium import spaces
from minigrid.core.grid import Grid
from minigrid.core.mission import MissionSpace
from minigrid.core.world_object import Door, Goal, Key, WorldObj
from minigrid.minigrid_env import MiniGridEnv

from preflab.errors import ConfigError, DataError

POS_SCALE = 10.0
"""Positions in the observation are grid coordinates divided by this."""
DIRECTIONS = ("east", "south", "west", "north")
"""MiniGrid direction index → compass name (0 = +x, 1 = +y, ...)."""
DIR_VEC = ((1, 0), (0, 1), (-1, 0), (0, -1))
LOCK_COLORS = ("yellow", "blue")
ACTION_NAMES = ("turn left", "turn right", "move forward", "interact")
_LEFT, _RIGHT, _FORWARD, _INTERACT = 0, 1, 2, 3


@dataclass(frozen=True, kw_only=True)
class Layout:
    """Static geometry of one grid variant: size and the x of each wall with a door."""

    name: str
    """'NoLock', 'Lock' or 'MultiLock'."""
    width: int
    """Grid width including the outer walls."""
    height: int
    """Grid height including the outer walls."""
    walls: tuple[int, ...]
    """x coordinate of each inner wall (one per lock), left to right."""
    max_steps: int
    """Episode length limit n_max."""

    @property
    def n_locks(self) -> int:
        return len(self.walls)

    def room_x(self, room: int) -> tuple[int, int]:
        """Inclusive x range of room ``room`` (0 = where the agent starts)."""
        bounds = (0, *self.walls, self.width - 1)
        return bounds[room] + 1, bounds[room + 1] - 1

    @property
    def obs_dim(self) -> int:
        return 6 + 10 * self.n_locks + 4


LAYOUTS: dict[str, Layout] = {
    "NoLock": Layout(name="NoLock", width=7, height=7, walls=(), max_steps=60),
    "Lock": Layout(name="Lock", width=8, height=6, walls=(3,), max_steps=80),
    "MultiLock": Layout(name="MultiLock", width=11, height=6, walls=(3, 7), max_steps=120),
}
ENV_IDS: dict[str, str] = {f"PrefLab/{k}-v0": k for k in LAYOUTS}
"""Registered gymnasium ids → layout names."""


@dataclass(frozen=True, kw_only=True)
class GridState:
    """Everything the ranking heuristic and the describers need, decoded from one observation."""

    layout: str
    """Layout name."""
    agent: tuple[int, int]
    """Agent cell (x, y)."""
    direction: int
    """Facing direction index into ``DIRECTIONS``."""
    carrying: tuple[bool, ...]
    """Per lock: the agent carries that lock's key."""
    door_open: tuple[bool, ...]
    """Per lock: the door is open."""
    keys: tuple[tuple[int, int] | None, ...]
    """Per lock: key cell while it lies on the floor, else None."""
    doors: tuple[tuple[int, int], ...]
    """Per lock: door cell."""
    goal: tuple[int, int]
    """Goal cell."""

    @property
    def phase(self) -> int:
        """Progress through keys and doors: 2·(doors opened) + (1 if carrying the next key)."""
        opened = sum(self.door_open)
        return 2 * opened + int(any(self.carrying))


def layout_for(env_id: str) -> Layout:
    """The layout of a registered grid id (or a bare layout name)."""
    name = ENV_IDS.get(env_id, env_id)
    if name not in LAYOUTS:
        raise ConfigError(
            f"unknown grid world {env_id!r}; expected one of {sorted(ENV_IDS)} "
            f"(or {sorted(LAYOUTS)})"
        )
    return LAYOUTS[name]


def encode_state(state: GridState) -> np.ndarray:
    """The compact observation of a :class:`GridState` (inverse of :func:`decode_obs`)."""
    lay = LAYOUTS[state.layout]
    ax, ay = state.agent
    v: list[float] = [ax, ay]
    d = [0.0] * 4
    d[state.direction] = 1.0
    for i in range(lay.n_locks):
        key = state.keys[i]
        kx, ky = key if key is not None else (0, 0)
        kdx, kdy = (kx - ax, ky - ay) if key is not None else (0, 0)
        dx, dy = state.doors[i]
        v_lock = [kx, ky, kdx, kdy, dx, dy, dx - ax, dy - ay]
        d += [float(state.carrying[i]), float(state.door_open[i])]
        v += v_lock
    gx, gy = state.goal
    v += [gx, gy, gx - ax, gy - ay]
    # order: agent xy, direction one-hot + flags, then positions
    out = np.array(v[:2] + d + v[2:], dtype=np.float32)
    out[:2] /= POS_SCALE
    out[2 + len(d) :] /= POS_SCALE
    return out


def decode_obs(obs: np.ndarray, env_id: str) -> GridState:
    """Decode one compact observation of ``env_id`` back into a :class:`GridState`."""
    lay = layout_for(env_id)
    o = np.asarray(obs, dtype=np.float64).reshape(-1)
    if o.shape[0] != lay.obs_dim:
        raise DataError(
            f"a {lay.name} observation has {lay.obs_dim} numbers, got {o.shape[0]}; "
            f"pass observations of {env_id} (one state per row)"
        )
    k = lay.n_locks
    n_flags = 4 + 2 * k
    pos = np.rint(o * POS_SCALE).astype(int)
    agent = (int(pos[0]), int(pos[1]))
    flags = o[2 : 2 + n_flags]
    direction = int(np.argmax(flags[:4]))
    carrying = tuple(bool(flags[4 + 2 * i] > 0.5) for i in range(k))
    door_open = tuple(bool(flags[5 + 2 * i] > 0.5) for i in range(k))
    rest = pos[2 + n_flags :]
    keys: list[tuple[int, int] | None] = []
    doors: list[tuple[int, int]] = []
    for i in range(k):
        blk = rest[8 * i : 8 * i + 8]
        on_floor = not carrying[i] and not door_open[i]
        keys.append((int(blk[0]), int(blk[1])) if on_floor else None)
        doors.append((int(blk[4]), int(blk[5])))
    goal = (int(rest[8 * k]), int(rest[8 * k + 1]))
    return GridState(
        layout=lay.name,
        agent=agent,
        direction=direction,
        carrying=carrying,
        door_open=door_open,
        keys=tuple(keys),
        doors=tuple(doors),
        goal=goal,
    )


class LockGridEnv(MiniGridEnv):
    """NoLock / Lock / MultiLock on MiniGrid with the compact observation and 4 actions."""

    def __init__(
        self,
        layout: str = "Lock",
        *,
        max_steps: int | None = None,
        render_mode: str | None = None,
        **kwargs: Any,
    ) -> None:
        if layout not in LAYOUTS:
            raise ConfigError(f"layout must be one of {sorted(LAYOUTS)}, got {layout!r}")
        self.layout = LAYOUTS[layout]
        steps = int(max_steps if max_steps is not None else self.layout.max_steps)
        if steps < 1:
            raise ConfigError(f"max_steps must be ≥ 1, got {steps}")
        super().__init__(
            mission_space=MissionSpace(mission_func=lambda: "reach the green goal"),
            width=self.layout.width,
            height=self.layout.height,
            max_steps=steps,
            see_through_walls=True,
            render_mode=render_mode,
            **kwargs,
        )
        self.action_space = spaces.Discrete(4)
        self.observation_space = spaces.Box(
            -2.0, 2.0, shape=(self.layout.obs_dim,), dtype=np.float32
        )
        self._doors: list[Door] = []
        self._keys: list[Key] = []
        self._goal = (0, 0)

    # ----- generation ---------------------------------------------------------------------
    def _gen_grid(self, width: int, height: int) -> None:
        lay = self.layout
        self.grid = Grid(width, height)
        self.grid.wall_rect(0, 0, width, height)
        self._doors, self._keys = [], []
        for i, wx in enumerate(lay.walls):
            self.grid.vert_wall(wx, 0)
            door = Door(LOCK_COLORS[i], is_locked=True)
            self.put_obj(door, wx, int(self._rand_int(1, height - 1)))
            self._doors.append(door)
        last = lay.n_locks
        x0, x1 = lay.room_x(last)
        self._goal = self.place_obj(Goal(), top=(x0, 1), size=(x1 - x0 + 1, height - 2))
        for i in range(lay.n_locks):
            x0, x1 = lay.room_x(i)
            key = Key(LOCK_COLORS[i])
            # never block the cell right behind a door (keeps every layout solvable in one pass)
            self.place_obj(
                key, top=(x0, 1), size=(x1 - x0 + 1, height - 2), reject_fn=_next_to_door
            )
            self._keys.append(key)
        x0, x1 = lay.room_x(0)
        cast(Any, self).place_agent(top=(x0, 1), size=(x1 - x0 + 1, height - 2))  # untyped

    # ----- dynamics -----------------------------------------------------------------------
    # MiniGridEnv.step returns its unbound ObsType; this one returns the encoded grid state
    def step(  # type: ignore[override]
        self, action: Any
    ) -> tuple[np.ndarray, float, bool, bool, dict[str, Any]]:
        a = int(action)
        if not 0 <= a < 4:
            raise DataError(f"action must be 0..3 ({', '.join(ACTION_NAMES)}), got {action!r}")
        if a == _INTERACT:
            fwd = self.grid.get(*self.front_pos)
            if isinstance(fwd, Key):
                a_mg = self.actions.pickup
            elif isinstance(fwd, Door) and fwd.is_locked:
                a_mg = self.actions.toggle
            else:
                a_mg = self.actions.done  # nothing to interact with: a no-op
        else:
            a_mg = (self.actions.left, self.actions.right, self.actions.forward)[a]
        obs, _, terminated, truncated, info = super().step(a_mg)
        if a == _INTERACT and isinstance(self.carrying, Key):
            color = self.carrying.color
            if any(d.color == color and d.is_open for d in self._doors):
                self.carrying = None  # the key is used up by its door
                obs = self.gen_obs()
        reward = 0.0
        if terminated:
            reward = 1.0 - 0.99 * self.step_count / self.max_steps
        info["success"] = bool(terminated)
        return obs, reward, terminated, truncated, info

    # ----- observation --------------------------------------------------------------------
    def grid_state(self) -> GridState:
        """The current state as a :class:`GridState`."""
        lay = self.layout
        carrying = tuple(
            isinstance(self.carrying, Key) and self.carrying.color == LOCK_COLORS[i]
            for i in range(lay.n_locks)
        )
        keys: list[tuple[int, int] | None] = []
        for i, key in enumerate(self._keys):
            on_floor = not carrying[i] and not self._doors[i].is_open
            keys.append(placed_cell(key) if on_floor else None)
        return GridState(
            layout=lay.name,
            agent=(int(self.agent_pos[0]), int(self.agent_pos[1])),
            direction=int(self.agent_dir),
            carrying=carrying,
            door_open=tuple(bool(d.is_open) for d in self._doors),
            keys=tuple(keys),
            doors=tuple(placed_cell(d) for d in self._doors),
            goal=(int(self._goal[0]), int(self._goal[1])),
        )

    def gen_obs(self) -> np.ndarray:
        return encode_state(self.grid_state())


def placed_cell(obj: WorldObj) -> tuple[int, int]:
    """The (x, y) of a placed object (MiniGrid sets ``cur_pos`` when it places one)."""
    pos = obj.cur_pos
    assert pos is not None, "an object the layout placed has a position"
    return (int(pos[0]), int(pos[1]))


def _next_to_door(env: MiniGridEnv, pos: tuple[int, int]) -> bool:
    x, y = int(pos[0]), int(pos[1])
    for dx in (-1, 1):
        cell = env.grid.get(x + dx, y)
        if isinstance(cell, Door):
            return True
    return False


def register_grids() -> None:
    """Register the grid worlds ``PrefLab/{NoLock,Lock,MultiLock}-v0`` (idempotent)."""
    for env_id, name in ENV_IDS.items():
        if env_id not in gym.registry:
            gym.register(
                id=env_id,
                entry_point="preflab.env_families.grids:LockGridEnv",
                kwargs={"layout": name},
            )


register_grids()
