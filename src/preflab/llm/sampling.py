"""Pairs of consecutive states to rank (paper 004 §4.3 step 1: random sequential state pairs).

:func:`sample_transitions` dispatches: grid worlds put the agent in a uniformly random cell,
direction and stage (key fetched, doors opened) of a random layout and take one random
action, so every stage of the task is covered; other environments run random-action
rollouts and take consecutive observations.
"""

from __future__ import annotations

import gymnasium as gym
import numpy as np
from minigrid.core.world_object import Key

from preflab.env_families.grids import DIR_VEC, ENV_IDS, LockGridEnv, placed_cell
from preflab.errors import ConfigError
from preflab.kinds import PAIR
from preflab.records import Query, Segment
from preflab.seeding import derive_seed


def sample_transitions(
    env_id: str,
    n: int,
    rng: np.random.Generator,
    *,
    layout_seed: int | None = None,
    at_target: float = 0.0,
) -> tuple[np.ndarray, np.ndarray]:
    """``n`` consecutive state pairs (obs_before (n, D), obs_after (n, D)).

    ``layout_seed`` (grid worlds only) keeps one fixed layout instead of a random one per pair.
    ``at_target`` (grid worlds only) is the share of pairs whose first state stands in front of
    its stage's target (the key to fetch, the door to open or the goal), facing it: uniform
    poses reach those few cells rarely (of 6,000 MultiLock pairs about 9 step onto the goal), yet
    a score model must rank them right for the goal to be its maximum.
    """
    if n < 1:
        raise ConfigError(f"n must be ≥ 1, got {n}")
    if not 0.0 <= at_target <= 1.0:
        raise ConfigError(f"at_target is a share of the pairs in [0, 1], got {at_target}")
    if env_id in ENV_IDS:
        return _grid_transitions(env_id, n, rng, layout_seed, at_target)
    if layout_seed is not None or at_target:
        raise ConfigError(
            f"layout_seed and at_target apply to the grid worlds {sorted(ENV_IDS)} only"
        )
    return _rollout_transitions(env_id, n, rng)


def randomize_grid_state(
    env: LockGridEnv, rng: np.random.Generator, phase: int | None = None, *, at_target: bool = False
) -> np.ndarray:
    """Move an already reset grid env into a random stage and agent pose; return its obs.

    With ``at_target`` the pose is in front of the stage's target (the next key, the next
    door, or the goal once every door is open), facing it."""
    lay = env.layout
    p = int(rng.integers(0, 2 * lay.n_locks + 1)) if phase is None else phase
    for i in range(lay.n_locks):
        door, key = env._doors[i], env._keys[i]
        if p >= 2 * i + 1 and key.cur_pos is not None and tuple(key.cur_pos) != (-1, -1):
            env.grid.set(int(key.cur_pos[0]), int(key.cur_pos[1]), None)
            key.cur_pos = np.array([-1, -1])  # type: ignore[assignment]  # as MiniGrid's pickup
        if p >= 2 * i + 2:
            door.is_locked, door.is_open = False, True
    # MiniGrid declares `carrying` as None (its own pickup assigns objects to it, untyped)
    env.carrying = env._keys[p // 2] if p % 2 == 1 else None  # type: ignore[assignment]
    cells = stage_cells(env, p)
    poses = _target_poses(env, p, cells) if at_target else []
    if poses:
        (x, y), d = poses[int(rng.integers(len(poses)))]
    else:
        x, y = cells[int(rng.integers(len(cells)))]
        d = int(rng.integers(4))
    env.agent_pos = (x, y)
    env.agent_dir = d
    return env.gen_obs()


def stage_cells(env: LockGridEnv, phase: int) -> list[tuple[int, int]]:
    """Cells the agent can stand on in stage ``phase`` of an env already in that stage: the
    rooms reached, the open doors and the goal; not a key's cell."""
    lay = env.layout
    rooms = phase // 2
    cells: list[tuple[int, int]] = []
    for room in range(rooms + 1):
        x0, x1 = lay.room_x(room)
        cells += [
            (x, y)
            for x in range(x0, x1 + 1)
            for y in range(1, lay.height - 1)
            if (cell := env.grid.get(x, y)) is None or cell.type == "goal"
        ]
    cells += [placed_cell(env._doors[i]) for i in range(rooms)]
    return [c for c in cells if not (isinstance(env.grid.get(*c), Key))]


def _target_poses(
    env: LockGridEnv, phase: int, cells: list[tuple[int, int]]
) -> list[tuple[tuple[int, int], int]]:
    """(cell, direction) poses among ``cells`` that face the target of stage ``phase``."""
    lay = env.layout
    if phase == 2 * lay.n_locks:
        target = tuple(int(v) for v in env._goal)
    else:
        obj = env._keys[phase // 2] if phase % 2 == 0 else env._doors[phase // 2]
        target = placed_cell(obj)
    goal = tuple(int(v) for v in env._goal)
    free = set(cells) - {goal}
    poses = []
    for d, (dx, dy) in enumerate(DIR_VEC):
        cell = (target[0] - dx, target[1] - dy)
        if cell in free:
            poses.append((cell, d))
    return poses


def _grid_transitions(
    env_id: str, n: int, rng: np.random.Generator, layout_seed: int | None, at_target: float
) -> tuple[np.ndarray, np.ndarray]:
    env = gym.make(env_id).unwrapped
    assert isinstance(env, LockGridEnv)
    before: list[np.ndarray] = []
    after: list[np.ndarray] = []
    while len(before) < n:
        env.reset(seed=derive_seed(rng) if layout_seed is None else layout_seed)
        # no draw without at_target: the pairs of a seed stay what they were before the option
        targeted = bool(at_target) and bool(rng.random() < at_target)
        obs = randomize_grid_state(env, rng, at_target=targeted)
        if tuple(env.agent_pos) == env._goal:
            continue  # already finished: no transition to rank
        nxt, *_ = env.step(int(rng.integers(4)))
        before.append(obs)
        after.append(nxt)
    env.close()
    return np.stack(before), np.stack(after)


def _rollout_transitions(
    env_id: str, n: int, rng: np.random.Generator
) -> tuple[np.ndarray, np.ndarray]:
    from preflab.envs import make_env
    from preflab.policy.rollout import sample_action

    env = make_env(env_id)
    act_rng = np.random.default_rng(derive_seed(rng))
    obs, _ = env.reset(seed=derive_seed(rng))
    before: list[np.ndarray] = []
    after: list[np.ndarray] = []
    while len(before) < n:
        nxt, _, term, trunc, _ = env.step(sample_action(env.action_space, act_rng))
        before.append(np.asarray(obs, np.float32).reshape(-1))
        after.append(np.asarray(nxt, np.float32).reshape(-1))
        obs = nxt
        if term or trunc:
            obs, _ = env.reset(seed=derive_seed(rng))
    env.close()
    return np.stack(before), np.stack(after)


def state_segments(obs: np.ndarray, env_id: str = "", *, round: int = 0) -> list[Segment]:
    """One-state segments (length 1, no action) of each observation row, content-addressed."""
    out = []
    zero = np.zeros((1, 1), np.float32)
    for o in np.asarray(obs, np.float32):
        row = o[None]
        out.append(
            Segment(
                id=Segment.content_id(row, zero),
                obs=row,
                acts=zero,
                true_rewards=np.zeros(1, np.float32),
                env_id=env_id,
                round=round,
            )
        )
    return out


def transition_queries(
    env_id: str, n: int, rng: np.random.Generator, *, oversample: int = 3
) -> tuple[list[Query], dict[str, Segment], np.ndarray, np.ndarray]:
    """(queries, segments by id, before, after) of up to ``n`` sampled transitions that change
    the state, each a pair query of its two one-state segments; ``oversample * n`` transitions
    are drawn to find them."""
    a, b = sample_transitions(env_id, oversample * n, rng)
    keep = np.flatnonzero(np.any(a != b, axis=1))[:n]
    sa, sb = state_segments(a[keep], env_id), state_segments(b[keep], env_id)
    segments = {s.id: s for s in sa + sb}
    queries = [PAIR.query(x.id, y.id) for x, y in zip(sa, sb, strict=True)]
    return queries, segments, a[keep], b[keep]
