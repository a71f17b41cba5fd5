"""Optional environment families and the packages that register their ids, loaded on demand.

One owner for "which package makes ``env_id`` known to gymnasium", so that training
(:func:`preflab.envs.make_env`), the render workers and the studio's clip timing resolve an id
the same way. This module imports gymnasium only (the studio calls it; no torch, no SB3):

- MiniGrid: ``MiniGrid-*`` ids (``import minigrid``).
- DeepMind Control Suite (B-Pref's locomotion): ``dm_control/<domain>-<task>-v0`` through
  Shimmy, e.g. ``dm_control/walker-walk-v0``, ``dm_control/cheetah-run-v0``,
  ``dm_control/quadruped-walk-v0``. Observations are Dicts (flattened by
  :func:`preflab.envs.make_env`); an episode is 1,000 control steps.
- Meta-World 3 (B-Pref's manipulation): ``metaworld/<task>-v3``, e.g.
  ``metaworld/button-press-v3``, set up as B-Pref sets up Meta-World: one task, the goal
  observable, object and goal positions drawn afresh at every reset from the env's own seeded
  RNG (so a seeded reset is reproducible and a resumed run continues exactly), 500 steps per
  episode. ``info['success']`` is 1.0 on a step where the task is solved.

Both need the ``bpref`` extra (``pip install -e '.[bpref]'``; ``scripts/setup.sh`` installs it).
"""

from __future__ import annotations

import contextlib
import os
import sys
from typing import Any, Literal

import gymnasium as gym

from preflab.errors import ConfigError

DMC_PREFIX = "dm_control/"
"""Id prefix of DeepMind Control Suite envs (registered by Shimmy)."""
METAWORLD_PREFIX = "metaworld/"
"""Id prefix of PrefLab's single-task Meta-World envs (registered here)."""
METAWORLD_EPISODE_STEPS = 500
"""Steps per Meta-World episode (its ``max_path_length``, as B-Pref's TimeLimit)."""
DMC_EPISODE_STEPS = 1000
"""Control steps per DeepMind Control episode, as dmc2gym and B-Pref count them (their
``_max_episode_steps``). The suite ends its own episodes, so Shimmy registers the ids without a
``max_episode_steps``."""
BPREF_EXTRA_HINT = (
    "install the bpref extra: pip install -e '.[bpref]' (scripts/setup.sh installs it), "
    "which pins mujoco 3.3.0, dm-control 1.0.28, shimmy 2.0 and metaworld 3.1.1"
)


def register_family(env_id: str) -> None:
    """Make ``env_id``'s family known to gymnasium (a no-op for ids gymnasium already has).

    Raises :class:`ConfigError` with the install command when a DeepMind Control or Meta-World
    id is asked for without the ``bpref`` extra.
    """
    if env_id.startswith((DMC_PREFIX, METAWORLD_PREFIX)):
        headless_gl()
    if env_id.startswith(DMC_PREFIX):
        try:
            import shimmy  # noqa: F401  (registers dm_control/* ids)
        except ImportError as e:
            raise ConfigError(f"{env_id!r} is a DeepMind Control env; {BPREF_EXTRA_HINT}") from e
        return
    if env_id.startswith(METAWORLD_PREFIX):
        register_metaworld()
        return
    if env_id not in gym.registry:
        with contextlib.suppress(ImportError):
            import minigrid  # noqa: F401  (registers MiniGrid-* ids)


def episode_limit(spec: Any) -> int | None:
    """Steps per episode of an env with gymnasium ``spec``: its ``max_episode_steps``, or
    :data:`DMC_EPISODE_STEPS` for a DeepMind Control id; None for an env without a limit (or
    without a spec, e.g. one built by a factory)."""
    limit = getattr(spec, "max_episode_steps", None)
    if limit:
        return int(limit)
    if str(getattr(spec, "id", "")).startswith(DMC_PREFIX):
        return DMC_EPISODE_STEPS
    return None


def headless_gl() -> None:
    """Render with EGL unless ``MUJOCO_GL`` says otherwise. MuJoCo and dm_control fix their GL
    backend when first imported; without a display dm_control would pick GLFW and fail. Linux
    only (macOS and Windows render with their own GL)."""
    if not sys.platform.startswith("linux"):
        return
    os.environ.setdefault("MUJOCO_GL", "egl")
    os.environ.setdefault("PYOPENGL_PLATFORM", os.environ["MUJOCO_GL"])


def metaworld_tasks() -> list[str]:
    """Names of Meta-World 3's single tasks (``button-press-v3``, ``door-open-v3``, ...)."""
    try:
        from metaworld.env_dict import ALL_V3_ENVIRONMENTS
    except ImportError as e:
        raise ConfigError(f"Meta-World envs need the metaworld package; {BPREF_EXTRA_HINT}") from e
    return list(ALL_V3_ENVIRONMENTS)


def register_metaworld() -> None:
    """Register ``metaworld/<task>`` for every Meta-World 3 task (idempotent)."""
    for task in metaworld_tasks():
        env_id = METAWORLD_PREFIX + task
        if env_id not in gym.registry:
            gym.register(
                id=env_id,
                entry_point="preflab.env_families:make_metaworld",
                kwargs={"task": task},
                max_episode_steps=METAWORLD_EPISODE_STEPS,
            )


class MetaWorldSeeding(gym.Wrapper[Any, Any, Any, Any]):
    """Passes ``reset(seed=...)`` on to Meta-World, whose own ``reset`` ignores the seed: the
    env's RNG (which draws the object and goal positions) is reseeded, as gymnasium promises."""

    def reset(
        self, *, seed: int | None = None, options: dict[str, Any] | None = None
    ) -> tuple[Any, dict[str, Any]]:
        if seed is not None:
            unwrapped: Any = self.env.unwrapped
            unwrapped.seed(seed)
        return self.env.reset(options=options)


def make_metaworld(
    task: str,
    render_mode: Literal["human", "rgb_array", "depth_array"] | None = None,
    width: int = 480,
    height: int = 480,
) -> gym.Env[Any, Any]:
    """One Meta-World 3 task as B-Pref uses it (see the module docstring)."""
    tasks = metaworld_tasks()
    if task not in tasks:
        raise ConfigError(
            f"unknown Meta-World task {task!r}; expected one of {', '.join(sorted(tasks)[:8])}, ..."
        )
    from metaworld.env_dict import ALL_V3_ENVIRONMENTS

    env: Any = ALL_V3_ENVIRONMENTS[task](render_mode=render_mode, width=width, height=height)
    env._partially_observable = False  # the goal is part of the observation
    with contextlib.suppress(AttributeError):
        del env.sawyer_observation_space  # recomputed for the observable goal
    env._freeze_rand_vec = False  # new object and goal positions at every reset ...
    env.seeded_rand_vec = True  # ... drawn from env.np_random, not numpy's global RNG
    env._set_task_called = True
    env.observation_space = env.sawyer_observation_space
    return MetaWorldSeeding(env)
