"""DeepMind Control Suite (B-Pref's locomotion), through Shimmy.

- ids: ``dm_control/<domain>-<task>-v0``, e.g. ``dm_control/walker-walk-v0``,
  ``dm_control/cheetah-run-v0``, ``dm_control/quadruped-walk-v0``, registered by importing
  ``shimmy`` (the ``bpref`` extra). Observations are Dicts (flattened by
  :func:`preflab.envs.make_env`); an episode is :data:`DMC_EPISODE_STEPS` control steps.
- rendering state: the physics state ``qpos ⧺ qvel ⧺ act``, drawn by dm_control itself from
  the domain's first camera (the suite's tracking camera: walker, cheetah and quadruped stay in
  the picture).
- frame timing: the task's control timestep (walker 25 ms, cheetah 10 ms). Shimmy's
  ``render_fps`` is that timestep × 1000, so it is not read.
- exact resume: the physics as MuJoCo's (:func:`preflab.env_families.mujoco.capture_physics`),
  the episode's step count and the task's RandomState.
- presets: the MuJoCo presets (rl-baselines3-zoo has no DeepMind Control entries).
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

import numpy as np

from preflab.env_families.base import EnvFamily, Replayer, missing_extra
from preflab.env_families.mujoco import capture_physics, headless_gl, restore_physics

DMC_PREFIX = "dm_control/"
"""Id prefix of DeepMind Control Suite envs (registered by Shimmy)."""
DMC_EPISODE_STEPS = 1000
"""Control steps per DeepMind Control episode, as dmc2gym and B-Pref count them (their
``_max_episode_steps``). The suite ends its own episodes, so Shimmy registers the ids without a
``max_episode_steps``."""
BPREF_EXTRA_HINT = (
    "install the bpref extra: pip install -e '.[bpref]' (scripts/setup.sh installs it), "
    "which pins mujoco 3.3.0, dm-control 1.0.28, shimmy 2.0 and metaworld 3.1.1"
)


def is_dm_control(env: Any) -> bool:
    """A DeepMind Control env seen through Shimmy's compatibility layer."""
    return type(env).__module__.split(".")[0] == "shimmy" and hasattr(env, "_env")


def capture_dm_control(env: Any) -> np.ndarray:
    """The physics state: qpos ⧺ qvel ⧺ act."""
    return np.asarray(env._env.physics.get_state(), np.float64)


class DmControlReplayer:
    """Physics state → frame from the domain's first camera, drawn by dm_control itself."""

    def __init__(self, env: Any, size: int) -> None:
        self.physics = env.unwrapped._env.physics
        self.size = size
        self.n = int(self.physics.get_state().shape[0])

    def frame(self, state: np.ndarray) -> np.ndarray:
        s = np.asarray(state, np.float64)
        if s.shape[0] != self.n:
            raise ValueError(
                f"a state of this DeepMind Control task has {self.n} numbers, got {s.shape[0]}"
            )
        with self.physics.reset_context():
            self.physics.set_state(s)
        return np.asarray(self.physics.render(height=self.size, width=self.size, camera_id=0))

    def close(self) -> None:
        pass


class DmControlFamily(EnvFamily):
    """DeepMind Control through Shimmy (see the module docstring)."""

    name = "dmc"
    preset = "dmc"

    def matches(self, env_id: str) -> bool:
        return env_id.startswith(DMC_PREFIX)

    def ensure_registered(self, env_id: str) -> None:
        headless_gl()
        try:
            import shimmy  # noqa: F401  (registers dm_control/* ids)
        except ImportError as e:
            raise missing_extra(env_id, "DeepMind Control", BPREF_EXTRA_HINT) from e

    def episode_limit(self, spec: Any) -> int | None:
        return super().episode_limit(spec) or DMC_EPISODE_STEPS

    def owns(self, env: Any) -> bool:
        return is_dm_control(env)

    def capture(self, env: Any) -> np.ndarray | None:
        return capture_dm_control(env)

    def replayer(self, env: Any, size: int) -> Replayer | None:
        return DmControlReplayer(env, size)

    def step_timing(self, chain: list[Any]) -> tuple[float, str] | None:
        return float(chain[-1].dt), "control_timestep"

    def skip_attrs(self, layer: Any) -> frozenset[str]:
        return frozenset({"_env"}) if is_dm_control(layer) else frozenset()

    def capture_resume(self, env: Any, arrays: dict[str, np.ndarray], key: str) -> dict[str, Any]:
        denv = env._env
        physics = denv.physics
        out = capture_physics(physics.model.ptr, physics.data.ptr, arrays, key)
        name, keys, pos, has_gauss, gauss = denv.task.random.get_state()
        arrays[f"{key}.dmc_random"] = np.asarray(keys, np.uint32)
        out["dm_control"] = {
            "step_count": int(denv._step_count),
            "reset_next_step": bool(denv._reset_next_step),
            "random": {
                "name": str(name),
                "keys": f"{key}.dmc_random",
                "pos": int(pos),
                "has_gauss": int(has_gauss),
                "gauss": float(gauss),
            },
        }
        return out

    def restore_resume(
        self, env: Any, state: Mapping[str, Any], arrays: Mapping[str, np.ndarray]
    ) -> None:
        denv = env._env
        restore_physics(denv.physics.model.ptr, denv.physics.data.ptr, state, arrays)
        if "dm_control" not in state:
            return
        saved = state["dm_control"]
        denv._step_count = int(saved["step_count"])
        denv._reset_next_step = bool(saved["reset_next_step"])
        r = saved["random"]
        denv.task.random.set_state(
            (
                r["name"],
                np.asarray(arrays[r["keys"]], np.uint32),
                r["pos"],
                r["has_gauss"],
                r["gauss"],
            )
        )
