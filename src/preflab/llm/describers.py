"""State descriptions: turn one observation (and the action between two) into prompt text.

A describer is registered per environment id. Built in: the three PrefLab grid worlds,
InvertedPendulum-v5, Reacher-v5 and Hopper-v5. Add your own with :func:`register_describer`::

    register_describer("MyEnv-v0", lambda obs: f"The ball is at x = {obs[0]:.2f}.")
"""

from __future__ import annotations

import math
from collections.abc import Callable
from dataclasses import dataclass

import numpy as np

from preflab.env_families.grids import (
    ACTION_NAMES,
    DIR_VEC,
    DIRECTIONS,
    ENV_IDS,
    LOCK_COLORS,
    decode_obs,
)
from preflab.errors import ConfigError, DataError

StateFn = Callable[[np.ndarray], str]
ActionFn = Callable[[np.ndarray], str]


@dataclass(frozen=True)
class Describer:
    """How one environment's states (and optionally actions) are put into words."""

    state: StateFn
    """Observation row (obs_dim,) → sentence(s)."""
    action: ActionFn | None = None
    """Action row (act_dim,) → phrase; None when actions are not described."""
    obs_dim: int | None = None
    """Expected observation length (checked before describing), None to skip the check."""


_REGISTRY: dict[str, Describer] = {}


def register_describer(
    env_id: str,
    state: StateFn,
    *,
    action: ActionFn | None = None,
    obs_dim: int | None = None,
    overwrite: bool = False,
) -> None:
    """Register how observations of ``env_id`` are described (``overwrite`` to replace one)."""
    if not callable(state) or (action is not None and not callable(action)):
        raise ConfigError(
            "a describer needs callables: state(obs) -> str and optional action(act) -> str"
        )
    if env_id in _REGISTRY and not overwrite:
        raise ConfigError(
            f"a describer for {env_id!r} is already registered; pass overwrite=True to replace it"
        )
    _REGISTRY[env_id] = Describer(state=state, action=action, obs_dim=obs_dim)


def known_describers() -> list[str]:
    """Environment ids that have a describer."""
    return sorted(_REGISTRY)


def get_describer(env_id: str) -> Describer:
    """The describer of ``env_id``; a ConfigError names the known ids when there is none."""
    try:
        return _REGISTRY[env_id]
    except KeyError:
        raise ConfigError(
            f"no state describer for environment {env_id!r}; known: {known_describers()}. "
            "Register one with preflab.llm.register_describer(env_id, fn)."
        ) from None


def describe_state(env_id: str, obs: np.ndarray) -> str:
    """Describe one observation of ``env_id``."""
    d = get_describer(env_id)
    o = np.asarray(obs, dtype=np.float64).reshape(-1)
    if d.obs_dim is not None and o.shape[0] != d.obs_dim:
        raise DataError(
            f"{env_id} observations have {d.obs_dim} numbers, got {o.shape[0]}; "
            "describe one state (a single observation row) of that environment"
        )
    if not np.all(np.isfinite(o)):
        raise DataError(f"cannot describe a {env_id} observation with NaN or infinite values")
    return d.state(o)


def describe_action(env_id: str, act: np.ndarray) -> str:
    """Describe one action of ``env_id`` ('' when its describer has no action part)."""
    d = get_describer(env_id)
    return "" if d.action is None else d.action(np.asarray(act, dtype=np.float64).reshape(-1))


# ----- grid worlds ------------------------------------------------------------------------
def _grid_state_text(env_id: str) -> StateFn:
    def describe(obs: np.ndarray) -> str:
        s = decode_obs(obs, env_id)
        ax, ay = s.agent
        parts = [f"The agent is at ({ax}, {ay}) facing {DIRECTIONS[s.direction]}."]
        fx, fy = ax + DIR_VEC[s.direction][0], ay + DIR_VEC[s.direction][1]
        ahead = None
        for i, color in enumerate(LOCK_COLORS[: len(s.doors)]):
            if s.carrying[i]:
                parts.append(f"It carries the {color} key.")
            key = s.keys[i]
            if key is not None:
                parts.append(f"The {color} key lies at ({key[0]}, {key[1]}).")
                if key == (fx, fy):
                    ahead = f"the {color} key"
            dx, dy = s.doors[i]
            state = "open" if s.door_open[i] else "locked"
            parts.append(f"The {color} door at ({dx}, {dy}) is {state}.")
            if (dx, dy) == (fx, fy):
                ahead = f"the {state} {color} door"
        gx, gy = s.goal
        if (ax, ay) == (gx, gy):
            parts.append("The agent stands on the green goal.")
        else:
            parts.append(f"The green goal is at ({gx}, {gy}).")
            if (gx, gy) == (fx, fy):
                ahead = "the green goal"
        if ahead is not None:
            parts.append(f"Directly in front of the agent is {ahead}.")
        return " ".join(parts)

    return describe


def _grid_action_text(act: np.ndarray) -> str:
    a = int(np.argmax(act)) if act.shape[0] > 1 else int(act[0])
    if not 0 <= a < len(ACTION_NAMES):
        raise DataError(f"grid action must be 0..{len(ACTION_NAMES) - 1}, got {a}")
    return f"The agent chose to {ACTION_NAMES[a]}."


# ----- MuJoCo -------------------------------------------------------------------------------
def _side(v: float, pos: str, neg: str) -> str:
    return pos if v >= 0 else neg


def _pendulum(obs: np.ndarray) -> str:
    x, theta, v, omega = obs[:4]
    if abs(theta) < 0.02:
        pole = "The pole stands vertically"
    else:
        pole = f"The pole leans to the {_side(theta, 'right', 'left')} by {abs(theta):.2f} radians"
    return (
        f"{pole} with a {_side(omega, 'rightward', 'leftward')} angular velocity of "
        f"{abs(omega):.2f} rad/s. The cart is at position {x:.2f} m moving "
        f"{_side(v, 'right', 'left')} at {abs(v):.2f} m/s."
    )


def _reacher(obs: np.ndarray) -> str:
    q1 = math.degrees(math.atan2(obs[2], obs[0]))
    q2 = math.degrees(math.atan2(obs[3], obs[1]))
    tx, ty = obs[4], obs[5]
    dx, dy = obs[8], obs[9]
    dist = math.hypot(dx, dy)
    return (
        f"The arm's shoulder joint is at {q1:.0f} degrees and its elbow joint at {q2:.0f} degrees, "
        f"turning at {obs[6]:.2f} and {obs[7]:.2f} rad/s. The target is at ({tx:.2f}, {ty:.2f}); "
        f"the fingertip is {dist:.3f} m away from it (offset {dx:+.3f}, {dy:+.3f})."
    )


def _hopper(obs: np.ndarray) -> str:
    z, angle = obs[0], obs[1]
    vx, vz = obs[5], obs[6]
    upright = "upright" if abs(angle) < 0.2 else f"tilted {_side(angle, 'backward', 'forward')}"
    return (
        f"The hopper's torso is at height {z:.2f} m, {upright} (angle {angle:+.2f} rad). "
        f"It moves {_side(vx, 'forward', 'backward')} at {abs(vx):.2f} m/s and "
        f"{_side(vz, 'upward', 'downward')} at {abs(vz):.2f} m/s. Thigh, leg and foot joint "
        f"angles are {obs[2]:+.2f}, {obs[3]:+.2f} and {obs[4]:+.2f} rad."
    )


def _continuous_action(names: tuple[str, ...]) -> ActionFn:
    def describe(act: np.ndarray) -> str:
        return (
            "Applied " + ", ".join(f"{n} {v:+.2f}" for n, v in zip(names, act, strict=False)) + "."
        )

    return describe


def _register_builtins() -> None:
    from preflab.env_families.grids import LAYOUTS

    for env_id, name in ENV_IDS.items():
        register_describer(
            env_id,
            _grid_state_text(env_id),
            action=_grid_action_text,
            obs_dim=LAYOUTS[name].obs_dim,
            overwrite=True,
        )
    register_describer(
        "InvertedPendulum-v5",
        _pendulum,
        action=_continuous_action(("cart force",)),
        obs_dim=4,
        overwrite=True,
    )
    register_describer(
        "Reacher-v5",
        _reacher,
        action=_continuous_action(("shoulder torque", "elbow torque")),
        obs_dim=10,
        overwrite=True,
    )
    register_describer(
        "Hopper-v5",
        _hopper,
        action=_continuous_action(("thigh torque", "leg torque", "foot torque")),
        obs_dim=11,
        overwrite=True,
    )


_register_builtins()
