"""MuJoCo: gymnasium's ``mujoco`` envs (Hopper-v5, HalfCheetah-v5, Walker2d-v5, …).

- ids: those whose entry point is in ``gymnasium.envs.mujoco``; registered with gymnasium.
- rendering state: ``qpos ⧺ qvel``, drawn by ``mujoco.Renderer`` (headless EGL by default) with
  shadows, reflections and multisampling off. The camera is gymnasium's default for the env
  (distance, elevation, azimuth, lookat height) and follows the tracked body horizontally
  (``trackbodyid`` of the env's camera config, else the root body when it can move), so a
  hopper never leaves the picture.
- frame timing: ``1 / metadata['render_fps']`` (gymnasium sets it to ``1 / dt``).
- exact resume: the full integration state (``mj_getState``) and the model's body and site
  positions (Meta-World moves its objects and goal there at every reset). The helpers
  :func:`capture_physics` and :func:`restore_physics` serve DeepMind Control too.
- presets: rl-baselines3-zoo's MuJoCo entries; a ``--studio`` run asks 200 labels and trains
  PPO on 4 envs for 300k steps without early termination on falls.
"""

from __future__ import annotations

import os
import sys
from collections.abc import Mapping
from types import MappingProxyType
from typing import Any

import numpy as np

from preflab.env_families.base import EnvFamily, Replayer, loaded_class, spec_entry_point

MODEL_FIELDS = ("body_pos", "site_pos")
"""MjModel fields some envs edit at reset (Meta-World places its objects and goal there)."""


def headless_gl() -> None:
    """Render with EGL unless ``MUJOCO_GL`` says otherwise. MuJoCo and dm_control fix their GL
    backend when first imported; without a display dm_control would pick GLFW and fail. Linux
    only (macOS and Windows render with their own GL)."""
    if not sys.platform.startswith("linux"):
        return
    os.environ.setdefault("MUJOCO_GL", "egl")
    os.environ.setdefault("PYOPENGL_PLATFORM", os.environ["MUJOCO_GL"])


def is_mujoco(env: Any) -> bool:
    """The env is a gymnasium MuJoCo env (has ``model``/``data`` and ``set_state``)."""
    cls = loaded_class("gymnasium.envs.mujoco.mujoco_env", "MujocoEnv")
    return cls is not None and isinstance(env, cls)


def capture_mujoco(env: Any) -> np.ndarray:
    """qpos ⧺ qvel."""
    d = env.data
    return np.concatenate([d.qpos, d.qvel])


def mj_model_data(env: Any) -> tuple[Any, Any] | None:
    """The unwrapped env's ``(MjModel, MjData)`` when it has them as ``model`` and ``data``."""
    model, data = getattr(env, "model", None), getattr(env, "data", None)
    if model is None or data is None or type(model).__name__ != "MjModel":
        return None
    return model, data


def capture_physics(
    model: Any, data: Any, arrays: dict[str, np.ndarray], key: str
) -> dict[str, Any]:
    """The integration state and the model's :data:`MODEL_FIELDS`, as checkpoint entries."""
    import mujoco

    spec = mujoco.mjtState.mjSTATE_INTEGRATION
    state = np.empty(mujoco.mj_stateSize(model, spec))
    mujoco.mj_getState(model, data, state, spec)
    arrays[f"{key}.mujoco"] = state
    for field in MODEL_FIELDS:
        arrays[f"{key}.model.{field}"] = np.array(getattr(model, field))
    return {"mujoco": f"{key}.mujoco", "model": [f"{key}.model.{f}" for f in MODEL_FIELDS]}


def restore_physics(
    model: Any, data: Any, state: Mapping[str, Any], arrays: Mapping[str, np.ndarray]
) -> None:
    """Put :func:`capture_physics`'s entries back (a no-op when ``state`` holds none)."""
    if "mujoco" not in state:
        return
    import mujoco

    if model is None:
        raise ValueError("the checkpoint holds a MuJoCo state but the env is not MuJoCo")
    for field, name in zip(MODEL_FIELDS, state.get("model", ()), strict=False):
        getattr(model, field)[:] = arrays[name]  # absent in checkpoints before issue #27
    saved = np.asarray(arrays[state["mujoco"]])
    spec = mujoco.mjtState.mjSTATE_INTEGRATION
    mujoco.mj_setState(model, data, saved, spec)
    mujoco.mj_forward(model, data)  # the derived quantities (positions, contacts, sensors)
    # forward's solver overwrote the warm start the next step begins from: put it back
    # (DeepMind Control steps with mj_step2 + mj_step1, which start from it)
    mujoco.mj_setState(model, data, saved, spec)


class MujocoReplayer:
    """qpos ⧺ qvel → frame, via ``mujoco.Renderer`` with shadows and reflections off."""

    def __init__(self, env: Any, size: int) -> None:
        import mujoco

        self._mj = mujoco
        u = env.unwrapped
        self.model, self.data = u.model, u.data
        self.nq, self.nv = int(self.model.nq), int(self.model.nv)
        vis = self.model.vis.global_
        vis.offwidth, vis.offheight = max(vis.offwidth, size), max(vis.offheight, size)
        # no multisampling: on a software GL (llvmpipe, no GPU) 4× MSAA costs 2–3× per frame
        self.model.vis.quality.offsamples = 0
        self.renderer = mujoco.Renderer(self.model, size, size)
        flags = self.renderer.scene.flags
        flags[mujoco.mjtRndFlag.mjRND_SHADOW] = False
        flags[mujoco.mjtRndFlag.mjRND_REFLECTION] = False
        self.opt = mujoco.MjvOption()
        cfg = dict(getattr(getattr(u, "mujoco_renderer", None), "default_cam_config", None) or {})
        # gymnasium's default camera: a free camera looking at the median geom of the initial
        # pose from the model's extent, then the env's camera config on top
        d = self.data
        d.qpos[:], d.qvel[:] = u.init_qpos, u.init_qvel
        mujoco.mj_forward(self.model, d)
        cam = mujoco.MjvCamera()
        cam.type = mujoco.mjtCamera.mjCAMERA_FREE
        cam.fixedcamid = -1
        cam.lookat[:] = np.median(d.geom_xpos, axis=0)
        cam.distance = float(self.model.stat.extent)
        for key, value in cfg.items():
            if key == "trackbodyid":
                continue
            if isinstance(value, np.ndarray | list | tuple):
                getattr(cam, key)[:] = value
            else:
                setattr(cam, key, value)
        self.cam = cam
        self.track = int(cfg["trackbodyid"]) if "trackbodyid" in cfg else self._root_body()
        # the camera keeps its initial horizontal offset from the tracked body's centre of mass
        self._offset = cam.lookat[:2] - d.subtree_com[self.track][:2] if self.track > 0 else None

    def _root_body(self) -> int:
        """Body 1 when the model's first joint lets it travel (free or slide), else none."""
        m, jt = self.model, self._mj.mjtJoint
        if m.njnt and int(m.jnt_type[0]) in (int(jt.mjJNT_FREE), int(jt.mjJNT_SLIDE)):
            return int(m.jnt_bodyid[0])
        return 0

    def frame(self, state: np.ndarray) -> np.ndarray:
        s = np.asarray(state, np.float64)
        if s.shape[0] != self.nq + self.nv:
            raise ValueError(
                f"a state of this MuJoCo model has nq + nv = {self.nq + self.nv} numbers, "
                f"got {s.shape[0]}"
            )
        d = self.data
        d.qpos[:] = s[: self.nq]
        d.qvel[:] = s[self.nq :]
        self._mj.mj_forward(self.model, d)
        if self._offset is not None:
            self.cam.lookat[:2] = d.subtree_com[self.track][:2] + self._offset
        self.renderer.update_scene(d, camera=self.cam, scene_option=self.opt)
        return np.asarray(self.renderer.render())

    def close(self) -> None:
        self.renderer.close()


class MujocoFamily(EnvFamily):
    """gymnasium's MuJoCo envs (see the module docstring)."""

    name = "mujoco"
    preset = "mujoco"
    studio_labels = 200
    studio_run: Mapping[str, Any] = MappingProxyType(
        {"algo": "ppo", "n_envs": 4, "total_steps": 300_000, "steps_per_round": 4_096}
    )
    studio_fixed_horizon_on_falls = True

    def matches(self, env_id: str) -> bool:
        return spec_entry_point(env_id).startswith("gymnasium.envs.mujoco")

    def owns(self, env: Any) -> bool:
        return is_mujoco(env)

    def capture(self, env: Any) -> np.ndarray | None:
        return capture_mujoco(env)

    def replayer(self, env: Any, size: int) -> Replayer | None:
        return MujocoReplayer(env, size)

    def prewarm(self) -> None:
        """MuJoCo's env module and the GL driver (a tiny model rendered once)."""
        import gymnasium.envs.mujoco.mujoco_env  # noqa: F401
        import mujoco

        model = mujoco.MjModel.from_xml_string(
            "<mujoco><worldbody><geom size='1'/></worldbody></mujoco>"
        )
        with mujoco.Renderer(model, 16, 16) as r:
            r.update_scene(mujoco.MjData(model))
            r.render()

    def owns_for_resume(self, env: Any) -> bool:
        return mj_model_data(env) is not None  # any env with an MjModel, not only MujocoEnv's

    def capture_resume(self, env: Any, arrays: dict[str, np.ndarray], key: str) -> dict[str, Any]:
        mj = mj_model_data(env)
        return {} if mj is None else capture_physics(*mj, arrays, key)

    def restore_resume(
        self, env: Any, state: Mapping[str, Any], arrays: Mapping[str, np.ndarray]
    ) -> None:
        model, data = mj_model_data(env) or (None, None)
        restore_physics(model, data, state, arrays)
