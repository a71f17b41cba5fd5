"""The one list of environment families, and the look-ups everyone else uses.

Adding a suite: write its module (an :class:`~preflab.env_families.base.EnvFamily` subclass)
and list it in :data:`BUILTIN` here, or call :func:`register` from your own code.
"""

from __future__ import annotations

from typing import Any

import gymnasium as gym

from preflab.env_families.atari import AtariFamily
from preflab.env_families.base import EnvFamily
from preflab.env_families.classic import ClassicFamily
from preflab.env_families.dm_control import DmControlFamily
from preflab.env_families.metaworld import MetaWorldFamily
from preflab.env_families.minigrid import MiniGridFamily, PrefLabGridFamily
from preflab.env_families.mujoco import MujocoFamily

OTHER = EnvFamily()
"""The family of ids and envs no family claims: plain gymnasium behaviour."""

BUILTIN: tuple[EnvFamily, ...] = (
    AtariFamily(),
    DmControlFamily(),
    MetaWorldFamily(),  # before MuJoCo: a Meta-World env is a MujocoEnv
    MujocoFamily(),
    ClassicFamily(),
    PrefLabGridFamily(),  # before MiniGrid: a PrefLab grid world is a MiniGridEnv
    MiniGridFamily(),
)
"""PrefLab's families, in the order they are asked."""

_USER: list[EnvFamily] = []


def register(family: EnvFamily) -> None:
    """Add ``family``; later registrations are asked before earlier ones and the built-ins."""
    if not isinstance(family, EnvFamily):
        raise TypeError(f"expected an EnvFamily, got {family!r}")
    _USER.insert(0, family)


def families() -> tuple[EnvFamily, ...]:
    """Every family, in the order they are asked (registered ones first)."""
    return (*_USER, *BUILTIN)


def family_of(env_id: str) -> EnvFamily:
    """The family whose id patterns ``env_id`` matches (:data:`OTHER` when none does)."""
    for fam in families():
        if fam.matches(env_id):
            return fam
    return OTHER


def family_of_env(env: Any) -> EnvFamily | None:
    """The family that owns the env (wrappers looked through), or None."""
    u = getattr(env, "unwrapped", env)
    for fam in families():
        if fam.owns(u):
            return fam
    return None


def resume_family_of(env: Any) -> EnvFamily:
    """The family whose resume capture applies to the unwrapped ``env`` (:data:`OTHER`: none)."""
    for fam in families():
        if fam.owns_for_resume(env):
            return fam
    return OTHER


def register_family(env_id: str) -> None:
    """Make ``env_id``'s family known to gymnasium (a no-op for ids gymnasium already has).

    Raises :class:`~preflab.errors.ConfigError` with the install command when a family's
    package is missing (DeepMind Control and Meta-World: the ``bpref`` extra; Atari: ale-py).
    An id no family claims and gymnasium lacks loads the families that register cheaply, so
    that suggestions include their ids.
    """
    fam = family_of(env_id)
    fam.ensure_registered(env_id)
    if fam is OTHER and env_id not in gym.registry:
        for f in families():
            f.register_for_suggestions()


def episode_limit(spec: Any) -> int | None:
    """Steps per episode of an env with gymnasium ``spec``: its ``max_episode_steps``, or its
    family's own count (DeepMind Control: 1,000); None for an env without a limit (or without a
    spec, e.g. one built by a factory)."""
    return family_of(str(getattr(spec, "id", "") or "")).episode_limit(spec)
