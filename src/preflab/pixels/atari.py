"""Atari through gymnasium + ale-py, with Stable-Baselines3's Atari wrappers as in paper 002.

The Atari family's module, :mod:`preflab.env_families.atari`, owns these (registration,
construction, evaluation, frame counts); they are re-exported here under their old names.
"""

from __future__ import annotations

from preflab.env_families.atari import (
    FRAME_STACK,
    agent_steps,
    evaluate_atari,
    frames,
    make_atari_vec_env,
    register_ale,
)

__all__ = [
    "FRAME_STACK",
    "agent_steps",
    "evaluate_atari",
    "frames",
    "make_atari_vec_env",
    "register_ale",
]
