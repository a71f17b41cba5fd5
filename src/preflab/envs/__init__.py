"""Environments: validated construction, flattening, and PrefLab's own grid worlds.

What is special about a suite (MuJoCo, DeepMind Control, Meta-World, Atari, grid worlds,
classic control) lives in its family module, :mod:`preflab.env_families`.

``preflab.env_families.grids`` (the Lock grid worlds of paper 004, on MiniGrid) is imported only when a
``PrefLab/`` id is asked for; nothing here needs the LLM client.
"""

from preflab.env_families import is_atari_id
from preflab.envs.core import (
    EnvFactory,
    EnvSpec,
    action_dim,
    check_env_id,
    flatten_actions,
    flatten_obs,
    make_env,
    make_vec_env,
    model_obs,
    obs_dim,
)
from preflab.envs.dict_obs import FlatDict, ObsField, dict_layout, flat_dict, unflatten
from preflab.pixels.spaces import obs_shape

__all__ = [
    "EnvFactory",
    "EnvSpec",
    "FlatDict",
    "ObsField",
    "action_dim",
    "check_env_id",
    "dict_layout",
    "flat_dict",
    "flatten_actions",
    "flatten_obs",
    "is_atari_id",
    "make_env",
    "make_vec_env",
    "model_obs",
    "obs_dim",
    "obs_shape",
    "unflatten",
]
