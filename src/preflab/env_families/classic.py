"""Classic control: gymnasium's classic_control envs (Pendulum, CartPole, MountainCar, Acrobot,
…) and, for presets, its box2d envs.

- ids: those whose entry point is in ``gymnasium.envs.classic_control`` or
  ``gymnasium.envs.box2d``; registered with gymnasium.
- rendering state: ``env.unwrapped.state`` (the whole state of a classic-control env), drawn by
  setting it back and calling the env's own ``rgb_array`` render.
- frame timing: ``1 / metadata['render_fps']``.
- presets: PrefLab's defaults (the zoo's classic-control entries are per env and disagree).
"""

from __future__ import annotations

from typing import Any

import numpy as np

from preflab.env_families.base import EnvFamily, Replayer, fit_frame, spec_entry_point


def is_classic_control(env: Any) -> bool:
    """A gymnasium classic-control env: its whole state lives in ``env.state`` (set by reset)."""
    return type(env).__module__.startswith("gymnasium.envs.classic_control")


def capture_classic(env: Any) -> np.ndarray:
    """``env.state`` as float64."""
    return np.asarray(env.state, dtype=np.float64).reshape(-1)


class ClassicControlReplayer:
    """``env.unwrapped.state = state`` then ``env.render()`` in rgb_array mode."""

    def __init__(self, env: Any, size: int) -> None:
        self.env, self.u, self.size = env, env.unwrapped, size
        self._as_tuple = isinstance(getattr(self.u, "state", None), tuple)

    def frame(self, state: np.ndarray) -> np.ndarray:
        s = np.asarray(state, np.float64).copy()
        self.u.state = tuple(s) if self._as_tuple else s
        if hasattr(self.u, "last_u"):
            self.u.last_u = None  # Pendulum's torque arrow: the applied torque is not a state
        return fit_frame(self.env.render(), self.size)

    def close(self) -> None:
        self.env.close()


class ClassicFamily(EnvFamily):
    """gymnasium's classic control (and, for presets, box2d) envs."""

    name = "classic"
    preset = "classic"

    def matches(self, env_id: str) -> bool:
        return spec_entry_point(env_id).startswith(
            ("gymnasium.envs.classic_control", "gymnasium.envs.box2d")
        )

    def owns(self, env: Any) -> bool:
        return is_classic_control(env)

    def capture(self, env: Any) -> np.ndarray | None:
        return capture_classic(env)

    def replayer(self, env: Any, size: int) -> Replayer | None:
        return ClassicControlReplayer(env, size)
