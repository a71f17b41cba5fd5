"""Environments: validated construction and action flattening."""

from __future__ import annotations

import difflib
from collections.abc import Callable
from typing import Any

import gymnasium as gym
import numpy as np
from gymnasium import spaces
from stable_baselines3.common.env_util import make_vec_env as sb3_make_vec_env
from stable_baselines3.common.vec_env import DummyVecEnv, VecEnv

from preflab.env_families import family_of, register_family
from preflab.envs.dict_obs import flat_dict
from preflab.errors import ConfigError
from preflab.pixels.spaces import check_obs_space, image_obs, is_image_space

EnvFactory = Callable[[], gym.Env]
"""A function building one environment (for wrapped or custom envs)."""
EnvSpec = str | EnvFactory
"""A registered gymnasium id or an :data:`EnvFactory`."""


def _known_ids() -> list[str]:
    return sorted(gym.registry.keys())


def check_env_id(env_id: str) -> None:
    """Raise a ConfigError naming close matches when ``env_id`` is not registered."""
    register_family(env_id)  # the family's lazy import (preflab.env_families)
    if env_id in gym.registry:
        return
    close = difflib.get_close_matches(env_id, _known_ids(), n=3, cutoff=0.6)
    hint = (
        f" Did you mean {', '.join(close)}?"
        if close
        else " List ids with gymnasium.pprint_registry()."
    )
    raise ConfigError(
        f"unknown environment id {env_id!r}; expected a registered gymnasium id.{hint}"
    )


def make_env(env_id: EnvSpec, *, seed: int | None = None, **kwargs: Any) -> gym.Env:
    """Build one environment (by id, checked first, or by factory); ``seed`` seeds its first
    reset."""
    if callable(env_id):
        env = env_id()
        if not isinstance(env, gym.Env):
            raise ConfigError(
                f"the env factory returned {type(env).__name__}, expected a gymnasium.Env"
            )
    else:
        check_env_id(env_id)
        env = gym.make(env_id, **kwargs)
    env = flat_dict(env)  # Dict observations (DeepMind Control): one vector, layout kept
    if seed is not None:
        env.reset(seed=seed)
        env.action_space.seed(seed)
    return env


def make_vec_env(env_id: EnvSpec, n_envs: int, seed: int, **kwargs: Any) -> VecEnv:
    """A DummyVecEnv of ``n_envs`` copies, by id or factory (SubprocVecEnv is slower on 2
    cores), unless the id's family builds its own (Atari: SB3's Atari wrappers and a 4-frame
    stack, :func:`preflab.env_families.atari.make_atari_vec_env`)."""
    if not callable(env_id):
        check_env_id(env_id)
    if n_envs < 1:
        raise ConfigError(f"n_envs must be ≥ 1, got {n_envs}")
    if not callable(env_id):
        own = family_of(env_id).make_vec_env(env_id, n_envs, seed, **kwargs)
        if own is not None:
            return own
    try:
        venv = sb3_make_vec_env(
            env_id,
            n_envs=n_envs,
            seed=seed,
            vec_env_cls=DummyVecEnv,
            env_kwargs=kwargs or None,
            wrapper_class=flat_dict,  # outside the Monitor, which records the true reward
        )
    except TypeError:  # SB3 cannot batch some spaces (e.g. MiniGrid's Text mission): say why
        probe = make_env(env_id, **kwargs)
        space = probe.observation_space
        probe.close()
        check_obs_space(space)
        raise
    check_obs_space(venv.observation_space)  # pixels (issue #13): flat vectors or images only
    return venv


def action_dim(space: spaces.Space) -> int:
    """Width of the flattened action fed to reward models."""
    if isinstance(space, spaces.Discrete):
        return int(space.n)
    if isinstance(space, spaces.Box):
        return int(np.prod(space.shape))
    if isinstance(space, spaces.MultiDiscrete):
        return int(np.sum(space.nvec))
    raise ConfigError(
        f"action space {space} is not supported; expected Box, Discrete or MultiDiscrete"
    )


def obs_dim(space: spaces.Space) -> int:
    """Width of the flattened observation; image and dict spaces need a wrapper first."""
    if isinstance(space, spaces.Box) and len(space.shape) == 1:
        return int(space.shape[0])
    if isinstance(space, spaces.Discrete):
        return int(space.n)
    check_obs_space(space)  # a clear error for Dict / Tuple / float images
    raise ConfigError(
        f"observation space {space} is an image; it has no flat width. Use obs_shape() and a "
        "convolutional reward model (RewardConfig kind 'auto' or 'cnn')"
    )


def flatten_actions(acts: np.ndarray, space: spaces.Space) -> np.ndarray:
    """Actions as float32 rows (n, A): one-hot for Discrete, concatenated one-hots for MultiDiscrete."""
    acts = np.asarray(acts)
    if isinstance(space, spaces.Discrete):
        idx = acts.reshape(-1).astype(np.int64) - int(space.start)
        out = np.zeros((idx.shape[0], int(space.n)), np.float32)
        out[np.arange(idx.shape[0]), idx] = 1.0
        return out
    if isinstance(space, spaces.MultiDiscrete):
        a = acts.reshape(-1, len(space.nvec)).astype(np.int64)
        parts = [np.eye(int(n), dtype=np.float32)[a[:, k]] for k, n in enumerate(space.nvec)]
        return np.concatenate(parts, axis=1)
    return acts.reshape(acts.shape[0], -1).astype(np.float32)


# ----- pixels (issue #13): image observations ------------------------------------------------
def model_obs(obs: np.ndarray, space: spaces.Space) -> np.ndarray:
    """Observations as reward models see them: float32 rows (n, D) for flat spaces, uint8
    (n, C, H, W) for image spaces (float only inside the network)."""
    if is_image_space(space):
        assert isinstance(space, spaces.Box)
        return image_obs(obs, space)
    return flatten_obs(obs, space)


def flatten_obs(obs: np.ndarray, space: spaces.Space) -> np.ndarray:
    """Observations as float32 rows (n, D)."""
    if isinstance(space, spaces.Discrete):
        return flatten_actions(obs, space)
    obs = np.asarray(obs, np.float32)
    return obs.reshape(obs.shape[0], -1)
