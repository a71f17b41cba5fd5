"""Environment families as plug-ins: one module per family, one registry listing them.

Each family (an :class:`EnvFamily`) declares its id patterns, the lazy import that registers its
ids, how it is built and flattened, its rendering state, replayer and camera, its frame timing,
its state capture for an exact resume, its presets and its evaluation extras:

- :mod:`~preflab.env_families.mujoco`: gymnasium's MuJoCo envs.
- :mod:`~preflab.env_families.dm_control`: DeepMind Control Suite through Shimmy
  (``dm_control/<domain>-<task>-v0``; the ``bpref`` extra).
- :mod:`~preflab.env_families.metaworld`: Meta-World 3 single tasks (``metaworld/<task>-v3``;
  the ``bpref`` extra).
- :mod:`~preflab.env_families.atari`: ALE games (``ALE/*``, ``*NoFrameskip*``; ale-py).
- :mod:`~preflab.env_families.minigrid`: MiniGrid, BabyAI and PrefLab's ``PrefLab/*`` grids.
- :mod:`~preflab.env_families.classic`: gymnasium's classic control (and box2d, for presets).

Callers ask ``family_of(env_id).<hook>(...)`` or :func:`family_of_env` (a built env), never an
id's prefix; :mod:`~preflab.env_families.registry` is the one place that lists the families.
Adding a suite touches its module and the registry (or calls :func:`register`).

This package imports gymnasium and numpy only (the studio calls it; no torch, no SB3).
"""

from preflab.env_families.atari import is_atari_id
from preflab.env_families.base import EnvFamily, Replayer, fit_frame
from preflab.env_families.dm_control import BPREF_EXTRA_HINT, DMC_EPISODE_STEPS, DMC_PREFIX
from preflab.env_families.metaworld import (
    METAWORLD_EPISODE_STEPS,
    METAWORLD_PREFIX,
    MetaWorldSeeding,
    make_metaworld,
    metaworld_tasks,
    register_metaworld,
)
from preflab.env_families.mujoco import headless_gl
from preflab.env_families.registry import (
    OTHER,
    episode_limit,
    families,
    family_of,
    family_of_env,
    register,
    register_family,
    resume_family_of,
)

__all__ = [
    "BPREF_EXTRA_HINT",
    "DMC_EPISODE_STEPS",
    "DMC_PREFIX",
    "METAWORLD_EPISODE_STEPS",
    "METAWORLD_PREFIX",
    "OTHER",
    "EnvFamily",
    "MetaWorldSeeding",
    "Replayer",
    "episode_limit",
    "families",
    "family_of",
    "family_of_env",
    "fit_frame",
    "headless_gl",
    "is_atari_id",
    "make_metaworld",
    "metaworld_tasks",
    "register",
    "register_family",
    "register_metaworld",
    "resume_family_of",
]
