"""Ground-truth progress of grid states: minus the optimal number of actions left to succeed.

Progress goes through keys and doors: fetch key 1, unlock door 1, fetch key 2, ..., reach the
goal. The cost-to-go is exact for the dynamics of :class:`preflab.env_families.grids.LockGridEnv`
(turns, forward moves blocked by walls, locked doors and keys on the floor, ``interact``),
computed by Dijkstra over (x, y, direction) per phase, from the last phase back to the first.
It drives the synthetic ranker and measures the ranking accuracy of judges and score models.
"""

from __future__ import annotations

import heapq
from functools import lru_cache

import numpy as np

from preflab.env_families.grids import DIR_VEC, LAYOUTS, GridState, decode_obs

UNREACHABLE = 10_000
"""Cost given to states from which the goal cannot be reached (never happens in valid layouts)."""

Cell = tuple[int, int]


def _blocked(
    layout: str, doors: tuple[Cell, ...], keys: tuple[Cell | None, ...], phase: int
) -> set[Cell]:
    lay = LAYOUTS[layout]
    out: set[Cell] = set()
    for x in range(lay.width):
        out.add((x, 0))
        out.add((x, lay.height - 1))
    for y in range(lay.height):
        out.add((0, y))
        out.add((lay.width - 1, y))
        for wx in lay.walls:
            out.add((wx, y))
    for i, door in enumerate(doors):
        if phase >= 2 * i + 2:
            out.discard(door)  # open
        else:
            out.add(door)
    for i, key in enumerate(keys):
        if key is not None and phase <= 2 * i:
            out.add(key)
    return out


@lru_cache(maxsize=4096)
def _cost_tables(
    layout: str,
    doors: tuple[Cell, ...],
    keys: tuple[Cell | None, ...],
    goal: Cell,
    start_phase: int,
) -> dict[tuple[int, int, int, int], int]:
    lay = LAYOUTS[layout]
    final = 2 * lay.n_locks
    table: dict[tuple[int, int, int, int], int] = {}
    for phase in range(final, start_phase - 1, -1):
        blocked = _blocked(layout, doors, keys, phase)
        free = [
            (x, y) for x in range(lay.width) for y in range(lay.height) if (x, y) not in blocked
        ]
        dist: dict[tuple[int, int, int], int] = {}
        heap: list[tuple[int, int, int, int]] = []
        for x, y in free:
            for d in range(4):
                fx, fy = x + DIR_VEC[d][0], y + DIR_VEC[d][1]
                init = None
                if phase == final:
                    if (x, y) == goal:
                        init = 0
                    elif (fx, fy) == goal:
                        init = 1
                elif (fx, fy) == (keys if phase % 2 == 0 else doors)[phase // 2]:
                    init = 1 + table.get((x, y, d, phase + 1), UNREACHABLE)
                if init is not None and init < UNREACHABLE:
                    heapq.heappush(heap, (init, x, y, d))
        while heap:
            c, x, y, d = heapq.heappop(heap)
            if (x, y, d) in dist:
                continue
            dist[(x, y, d)] = c
            if phase == final and (x, y) == goal:
                continue  # terminal: nothing leads on from here
            # predecessors: turned into d, or moved forward into (x, y) facing d
            for pd in ((d + 1) % 4, (d - 1) % 4):
                if (x, y, pd) not in dist:
                    heapq.heappush(heap, (c + 1, x, y, pd))
            px, py = x - DIR_VEC[d][0], y - DIR_VEC[d][1]
            if (px, py) not in blocked and (px, py, d) not in dist:
                heapq.heappush(heap, (c + 1, px, py, d))
        for (x, y, d), c in dist.items():
            table[(x, y, d, phase)] = c
    return table


def cost_to_go(state: GridState) -> int:
    """Optimal number of actions from ``state`` to success (0 on the goal)."""
    keys = state.keys
    table = _cost_tables(state.layout, state.doors, keys, state.goal, state.phase)
    return table.get((state.agent[0], state.agent[1], state.direction, state.phase), UNREACHABLE)


def progress(obs: np.ndarray, env_id: str) -> np.ndarray:
    """Ground-truth progress (−cost-to-go) of each observation row of ``env_id``: (batch,)."""
    arr = np.asarray(obs, dtype=np.float32)
    if arr.ndim == 1:
        arr = arr[None]
    return np.array([-float(cost_to_go(decode_obs(o, env_id))) for o in arr], dtype=np.float64)


def true_preference(obs_a: np.ndarray, obs_b: np.ndarray, env_id: str) -> np.ndarray:
    """Ground-truth P(a ≻ b) per row: 1 if a has more progress, 0 if less, 0.5 on a tie."""
    pa, pb = progress(obs_a, env_id), progress(obs_b, env_id)
    return np.where(pa > pb, 1.0, np.where(pa < pb, 0.0, 0.5))
