"""Meta-World 3 (B-Pref's manipulation), registered here.

- ids: ``metaworld/<task>-v3``, e.g. ``metaworld/button-press-v3``, set up as B-Pref sets up
  Meta-World: one task, the goal observable, object and goal positions drawn afresh at every
  reset from the env's own seeded RNG (so a seeded reset is reproducible and a resumed run
  continues exactly), :data:`METAWORLD_EPISODE_STEPS` steps per episode. Needs the ``bpref``
  extra.
- rendering state: ``qpos ⧺ qvel ⧺ body_pos ⧺ site_pos`` (a reset moves the task's objects
  and goal by editing the model's body and site positions, which ``qpos`` does not hold), drawn
  from Meta-World's ``corner`` camera.
- exact resume: as MuJoCo (:mod:`preflab.env_families.mujoco`, body and site positions
  included).
- evaluation: ``info['success']`` is 1.0 on a step where the task is solved (the success rate).
- presets: PrefLab's defaults (and the defaults of a ``--studio`` run).
"""

from __future__ import annotations

import contextlib
from typing import Any, Literal

import gymnasium as gym
import numpy as np

from preflab.env_families.base import EnvFamily, Replayer, loaded_class
from preflab.env_families.dm_control import BPREF_EXTRA_HINT
from preflab.env_families.mujoco import MujocoFamily, headless_gl
from preflab.errors import ConfigError

METAWORLD_PREFIX = "metaworld/"
"""Id prefix of PrefLab's single-task Meta-World envs (registered here)."""
METAWORLD_EPISODE_STEPS = 500
"""Steps per Meta-World episode (its ``max_path_length``, as B-Pref's TimeLimit)."""


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
                entry_point="preflab.env_families.metaworld:make_metaworld",
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


def is_metaworld(env: Any) -> bool:
    """A Meta-World task (a MuJoCo env whose resets move objects by editing the model)."""
    cls = loaded_class("metaworld.sawyer_xyz_env", "SawyerXYZEnv")
    return cls is not None and isinstance(env, cls)


def capture_metaworld(env: Any) -> np.ndarray:
    """qpos ⧺ qvel ⧺ model.body_pos ⧺ model.site_pos (flattened)."""
    d, m = env.data, env.model
    return np.concatenate([d.qpos, d.qvel, m.body_pos.reshape(-1), m.site_pos.reshape(-1)])


class MetaWorldReplayer:
    """qpos ⧺ qvel ⧺ body_pos ⧺ site_pos → frame from Meta-World's ``corner`` camera (its
    image is stored upside down and flipped back here)."""

    CAMERA = "corner"

    def __init__(self, env: Any, size: int) -> None:
        import mujoco

        self._mj = mujoco
        u = env.unwrapped
        self.model, self.data = u.model, u.data
        m = self.model
        self.nq, self.nv = int(m.nq), int(m.nv)
        self.n = self.nq + self.nv + m.body_pos.size + m.site_pos.size
        vis = m.vis.global_
        vis.offwidth, vis.offheight = max(vis.offwidth, size), max(vis.offheight, size)
        m.vis.quality.offsamples = 0
        self.renderer = mujoco.Renderer(m, size, size)
        self.renderer.scene.flags[mujoco.mjtRndFlag.mjRND_SHADOW] = False
        self.renderer.scene.flags[mujoco.mjtRndFlag.mjRND_REFLECTION] = False
        self.camera = mujoco.mj_name2id(m, mujoco.mjtObj.mjOBJ_CAMERA, self.CAMERA)

    def frame(self, state: np.ndarray) -> np.ndarray:
        s = np.asarray(state, np.float64)
        if s.shape[0] != self.n:
            raise ValueError(
                f"a state of this Meta-World task has {self.n} numbers, got {s.shape[0]}"
            )
        m, d = self.model, self.data
        i = self.nq + self.nv
        d.qpos[:], d.qvel[:] = s[: self.nq], s[self.nq : i]
        m.body_pos[:] = s[i : i + m.body_pos.size].reshape(m.body_pos.shape)
        m.site_pos[:] = s[i + m.body_pos.size :].reshape(m.site_pos.shape)
        self._mj.mj_forward(m, d)
        self.renderer.update_scene(d, camera=self.camera)
        # Meta-World's cameras are upside down
        return np.ascontiguousarray(self.renderer.render()[::-1])

    def close(self) -> None:
        self.renderer.close()


class MetaWorldFamily(MujocoFamily):
    """Meta-World 3 single tasks (see the module docstring): a MuJoCo family with its own ids,
    rendering state and camera."""

    name = "metaworld"
    preset = "other"
    studio_labels = EnvFamily.studio_labels
    studio_run = EnvFamily.studio_run
    studio_fixed_horizon_on_falls = False

    def matches(self, env_id: str) -> bool:
        return env_id.startswith(METAWORLD_PREFIX)

    def ensure_registered(self, env_id: str) -> None:
        headless_gl()
        register_metaworld()

    def owns(self, env: Any) -> bool:
        return is_metaworld(env)

    def owns_for_resume(self, env: Any) -> bool:
        return is_metaworld(env)

    def capture(self, env: Any) -> np.ndarray | None:
        return capture_metaworld(env)

    def replayer(self, env: Any, size: int) -> Replayer | None:
        return MetaWorldReplayer(env, size)
