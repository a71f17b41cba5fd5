"""Dict observations (DeepMind Control through shimmy, goal-conditioned envs) as one flat vector,
with the layout of the keys kept: where each key's values lie in the vector."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import gymnasium as gym
import numpy as np
from gymnasium import spaces
from gymnasium.wrappers import FlattenObservation


@dataclass(frozen=True, kw_only=True)
class ObsField:
    """One key of a Dict observation inside the flat vector."""

    key: str
    """The key (nested Dicts: keys joined with '/')."""
    shape: tuple[int, ...]
    """Its shape in the Dict observation."""
    start: int
    """First index of its values in the flat vector."""
    stop: int
    """One past its last index."""


def dict_layout(space: spaces.Dict, prefix: str = "") -> tuple[ObsField, ...]:
    """Where each key of ``space`` lies in ``gymnasium.spaces.flatten(space, obs)``: the keys in
    the Dict's own order, each taking ``flatdim`` entries (nested Dicts in place)."""
    out: list[ObsField] = []
    at = 0
    for key, sub in space.spaces.items():
        name = f"{prefix}{key}"
        if isinstance(sub, spaces.Dict):
            inner = dict_layout(sub, prefix=name + "/")
            out += [
                ObsField(key=f.key, shape=f.shape, start=f.start + at, stop=f.stop + at)
                for f in inner
            ]
            at += spaces.flatdim(sub)
            continue
        n = spaces.flatdim(sub)
        shape = tuple(sub.shape) if isinstance(sub, spaces.Box) else (n,)  # one-hot otherwise
        out.append(ObsField(key=name, shape=shape, start=at, stop=at + n))
        at += n
    return tuple(out)


class FlatDict(FlattenObservation):
    """gymnasium's FlattenObservation for a Dict observation, with :attr:`layout`."""

    def __init__(self, env: gym.Env[Any, Any]) -> None:
        space = env.observation_space
        if not isinstance(space, spaces.Dict):
            raise TypeError(f"FlatDict wraps Dict observation spaces, got {space}")
        super().__init__(env)
        self.layout = dict_layout(space)
        """Where each key lies in the flat observation."""


FLAT = (spaces.Box, spaces.Discrete, spaces.MultiDiscrete, spaces.MultiBinary)
"""The spaces a Dict may hold to be flattened (a Text mission, say, cannot be)."""


def flattenable(space: spaces.Space[Any]) -> bool:
    """True for a Dict whose every leaf is a vector-like space (:data:`FLAT`)."""
    if not isinstance(space, spaces.Dict):
        return False
    return all(
        flattenable(s) if isinstance(s, spaces.Dict) else isinstance(s, FLAT)
        for s in space.spaces.values()
    )


def flat_dict(env: gym.Env[Any, Any]) -> gym.Env[Any, Any]:
    """``env`` with a Dict observation of vectors flattened (:class:`FlatDict`); any other env
    as it is (an observation PrefLab cannot take is refused later, saying why)."""
    return FlatDict(env) if flattenable(env.observation_space) else env


def unflatten(obs: np.ndarray, layout: tuple[ObsField, ...]) -> dict[str, np.ndarray]:
    """Rows of flat observations (n, D) back to one array per key (n, *shape)."""
    obs = np.asarray(obs)
    return {f.key: obs[:, f.start : f.stop].reshape(obs.shape[0], *f.shape) for f in layout}
