"""Observation spaces PrefLab supports: flat vectors and images.

- flat: a 1-D ``Box`` (or ``Discrete``, one-hot encoded): reward models see float32 rows (n, D);
- image: a ``uint8`` ``Box`` of shape (H, W, C), (C, H, W) or (H, W) with values 0..255: reward
  models see uint8 (n, C, H, W) (channels first; stacked frames are the channels), converted
  to float only inside the network.

Anything else (``Dict``, ``Tuple``, float images, 3-D float boxes, ...) gets a
:class:`~preflab.errors.ConfigError` saying how to flatten or wrap the environment.
"""

from __future__ import annotations

import numpy as np
from gymnasium import spaces

from preflab.errors import ConfigError, DataError

SUPPORTED = (
    "PrefLab supports flat vector observations (a 1-D Box, or Discrete) and images (a uint8 "
    "Box with values 0..255 of shape (H, W, C), (C, H, W) or (H, W), e.g. Atari frames)"
)
HOW_TO_FIX = (
    "`preflab train --env-id` takes such envs only (PrefLab's MiniGrid worlds are "
    "PrefLab/NoLock-v0, PrefLab/Lock-v0, PrefLab/MultiLock-v0); for another env, wrap it in "
    "Python before PrefLab sees it and pass it as a factory, e.g. "
    "train(config, env=lambda: gymnasium.wrappers.FlattenObservation(gymnasium.make(ID))) "
    "for a flat vector; for MiniGrid use minigrid.wrappers.FlatObsWrapper (flat) or "
    "ImgObsWrapper + RGBImgObsWrapper (an image)"
)


def is_image_space(space: spaces.Space) -> bool:
    """True for uint8 Boxes of 2 or 3 dimensions (channels first or last) with bounds 0..255."""
    return (
        isinstance(space, spaces.Box)
        and space.dtype == np.uint8
        and len(space.shape) in (2, 3)
        and bool(np.all(space.low == 0))
        and bool(np.all(space.high == 255))
    )


def channels_first(space: spaces.Box) -> bool:
    """True when the channel axis of a 3-D image space is the first (SB3's rule: the smallest)."""
    shape = space.shape
    return len(shape) == 3 and int(np.argmin(shape)) == 0


def image_shape(space: spaces.Space) -> tuple[int, int, int]:
    """(C, H, W) of an image observation space."""
    assert isinstance(space, spaces.Box) and is_image_space(space)
    s = space.shape
    if len(s) == 2:
        return (1, int(s[0]), int(s[1]))
    if channels_first(space):
        return (int(s[0]), int(s[1]), int(s[2]))
    return (int(s[2]), int(s[0]), int(s[1]))


def check_obs_space(space: spaces.Space) -> None:
    """Raise a ConfigError naming what is supported when ``space`` is neither flat nor an image."""
    if isinstance(space, spaces.Discrete) or is_image_space(space):
        return
    if isinstance(space, spaces.Box) and len(space.shape) == 1:
        return
    if isinstance(space, spaces.Box) and len(space.shape) in (2, 3):
        what = (
            f"a {len(space.shape)}-D {space.dtype} Box {space.shape}; images must be uint8 with "
            "values 0..255 (convert floats with a gymnasium ObservationWrapper: "
            "(x * 255).astype(np.uint8)), or flatten it"
        )
    else:
        text = str(space)
        what = f"{type(space).__name__} observation space {text[:77] + '...' if len(text) > 80 else text}"
    raise ConfigError(f"unsupported observation space: {what}. {SUPPORTED}. {HOW_TO_FIX}.")


def obs_shape(space: spaces.Space) -> tuple[int, ...]:
    """What a reward model sees per step: (D,) for flat spaces, (C, H, W) for images."""
    check_obs_space(space)
    if is_image_space(space):
        return image_shape(space)
    if isinstance(space, spaces.Discrete):
        return (int(space.n),)
    assert isinstance(space, spaces.Box)  # check_obs_space: a flat Box
    return (int(np.prod(space.shape)),)


def image_obs(obs: np.ndarray, space: spaces.Box) -> np.ndarray:
    """A batch of image observations (n, *space.shape) as uint8 (n, C, H, W)."""
    arr = np.asarray(obs)
    if arr.shape[1:] != tuple(space.shape):
        raise DataError(
            f"image observations must have shape (n, {', '.join(map(str, space.shape))}), "
            f"got {arr.shape}"
        )
    if arr.dtype != np.uint8:  # e.g. SB3's rollout buffer keeps observations as float32
        arr = arr.astype(np.uint8)
    if arr.ndim == 3:
        return arr[:, None]
    return arr if channels_first(space) else np.moveaxis(arr, -1, 1)
