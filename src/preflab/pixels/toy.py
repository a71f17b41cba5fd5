"""A tiny image environment for tests: an 84×84 grey frame with one bright square.

The square's column sets the reward: r = 1 when the square's centre is in the right half of the
frame, else 0 (so a reward model must read the pixel pattern to predict it, and segment
returns are whole numbers: two segments either tie or differ by at least 1). Actions move the square left,
right, or not at all; its row is random. Observations are uint8 (84, 84, 1), channels last,
like a grey Atari frame before stacking.
"""

from __future__ import annotations

from typing import Any

import gymnasium as gym
import numpy as np
from gymnasium import spaces

SIDE = 84
SQUARE = 8


def square_frame(x: int, y: int, side: int = SIDE, square: int = SQUARE) -> np.ndarray:
    """(side, side) uint8: dark background (value 20) with a bright (255) square at (x, y)."""
    f = np.full((side, side), 20, np.uint8)
    f[y : y + square, x : x + square] = 255
    return f


def square_reward(x: int | np.ndarray, side: int = SIDE, square: int = SQUARE) -> Any:
    """The reward of a square whose left edge is at column ``x``: 1 right of centre, else 0."""
    return (np.asarray(x) + square / 2 > side / 2).astype(np.float64)


class BrightSquareEnv(gym.Env):
    """Discrete(3) actions (left, stay, right by 6 px); episodes of ``max_steps`` steps."""

    # not a ClassVar: gymnasium's Env declares `metadata` as an (overridable) instance attribute
    metadata: dict[str, Any] = {"render_modes": ["rgb_array"], "render_fps": 15}  # noqa: RUF012

    def __init__(self, max_steps: int = 50, render_mode: str | None = None) -> None:
        self.observation_space = spaces.Box(0, 255, (SIDE, SIDE, 1), np.uint8)
        self.action_space = spaces.Discrete(3)
        self.max_steps = max_steps
        self.render_mode = render_mode
        self._x = self._y = self._t = 0

    def _obs(self) -> np.ndarray:
        return square_frame(self._x, self._y)[..., None]

    def reset(
        self, *, seed: int | None = None, options: dict[str, Any] | None = None
    ) -> tuple[np.ndarray, dict[str, Any]]:
        super().reset(seed=seed)
        self._x = int(self.np_random.integers(0, SIDE - SQUARE + 1))
        self._y = int(self.np_random.integers(0, SIDE - SQUARE + 1))
        self._t = 0
        return self._obs(), {}

    def step(self, action: int) -> tuple[np.ndarray, float, bool, bool, dict[str, Any]]:
        self._x = int(np.clip(self._x + (int(action) - 1) * 6, 0, SIDE - SQUARE))
        self._t += 1
        reward = float(square_reward(self._x))
        return self._obs(), reward, False, self._t >= self.max_steps, {}

    def render(self) -> np.ndarray:
        return np.repeat(self._obs(), 3, axis=-1)
