"""Replayers: put an environment into a stored state and render one RGB frame.

A replayer is built once per (env id, size) in a render worker and then called once per step:
``frame(state) -> (H, W, 3) uint8``. Built-ins:

- MuJoCo: ``qpos, qvel`` into ``env.data`` + ``mj_forward``, drawn by ``mujoco.Renderer``
  (headless EGL by default) with shadows, reflections and multisampling off. The camera is gymnasium's
  default for the env (distance, elevation, azimuth, lookat height) and follows the tracked
  body horizontally (``trackbodyid`` of the env's camera config, else the root body when it
  can move), so a hopper never leaves the picture.
- Meta-World: as MuJoCo, with the task's body and site positions put back first, seen from
  Meta-World's ``corner`` camera.
- DeepMind Control: ``physics.set_state`` then ``physics.render`` from the domain's first
  camera (the suite's tracking camera: walker, cheetah and quadruped stay in the picture).
- Classic control: ``env.unwrapped.state = state`` then ``env.render()`` (rgb_array).
- PrefLab grid worlds and MiniGrid: the grid, agent and carried object are rebuilt from the
  state and drawn with MiniGrid's tile renderer (no field-of-view highlight).

Register others with :func:`register_replayer`. Frames are fitted into ``size × size``
(aspect kept, even sides, as H.264 in yuv420p needs).
"""

from __future__ import annotations

import os
from collections.abc import Callable
from typing import Any, Protocol

import numpy as np

from preflab.media.capture import (
    Match,
    _matches,
    is_classic_control,
    is_dm_control,
    is_metaworld,
    is_minigrid,
    is_mujoco,
    is_preflab_grid,
)

RENDERER_VERSION = "2"
"""Bumped whenever frames of the same state would look different (part of every media key).
2: clips play at the env's real time (:mod:`preflab.media.timing`), no longer capped at 60 fps."""
DEFAULT_FPS = 30
MAX_FPS = 60


class Replayer(Protocol):
    """Renders stored states of one environment."""

    def frame(self, state: np.ndarray) -> np.ndarray:
        """The (H, W, 3) uint8 frame of ``state`` (one row of ``Segment.states``)."""
        ...

    def close(self) -> None:
        """Free rendering resources."""
        ...


ReplayerFactory = Callable[[Any, int], Replayer]
"""factory(env made with render_mode='rgb_array', size in pixels) -> Replayer."""

_USER: list[tuple[Match, ReplayerFactory]] = []


def register_replayer(match: Match, factory: ReplayerFactory) -> None:
    """Register ``factory`` for envs matching ``match`` (a class or a predicate on the unwrapped
    env). Later registrations win over earlier ones and over the built-ins. Register in a module
    that the render workers import too (e.g. the module that registers the env id)."""
    if not (isinstance(match, type) or callable(match)):
        raise TypeError(f"match must be a class or a predicate, got {match!r}")
    _USER.insert(0, (match, factory))


def fit_frame(img: np.ndarray, size: int) -> np.ndarray:
    """``img`` scaled so that its longer side is ``size`` (aspect kept), both sides even."""
    h, w = img.shape[:2]
    scale = size / max(h, w)
    nh, nw = max(2, round(h * scale) // 2 * 2), max(2, round(w * scale) // 2 * 2)
    if (nh, nw) == (h, w):
        return np.ascontiguousarray(img[..., :3], dtype=np.uint8)
    from PIL import Image

    out = Image.fromarray(np.ascontiguousarray(img[..., :3], dtype=np.uint8)).resize(
        (nw, nh), Image.Resampling.BILINEAR
    )
    return np.asarray(out)


# ----- MuJoCo ---------------------------------------------------------------------------------
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
        return self.renderer.render()

    def close(self) -> None:
        self.renderer.close()


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
        return np.ascontiguousarray(
            self.renderer.render()[::-1]
        )  # Meta-World's cameras are upside down

    def close(self) -> None:
        self.renderer.close()


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


# ----- classic control --------------------------------------------------------------------------
class ClassicControlReplayer:
    """``env.unwrapped.state = state`` then ``env.render()`` in rgb_array mode."""

    def __init__(self, env: Any, size: int) -> None:
        self.env, self.u, self.size = env, env.unwrapped, size
        self._as_tuple = isinstance(getattr(self.u, "state", None), tuple)

    def frame(self, state: np.ndarray) -> np.ndarray:
        s = np.asarray(state, np.float64).copy()
        self.u.state = tuple(s) if self._as_tuple else s
        if hasattr(self.u, "last_u"):
            self.u.last_u = None  # Pendulum's torque arrow: the applied torque is not a state
        return fit_frame(self.env.render(), self.size)

    def close(self) -> None:
        self.env.close()


# ----- grid worlds ----------------------------------------------------------------------------
def _tile_size(width: int, height: int, size: int) -> int:
    return max(4, size // max(width, height))


class MiniGridReplayer:
    """[agent x, y, dir, carried (type, colour, state), grid encoding] → MiniGrid tiles."""

    def __init__(self, env: Any, size: int) -> None:
        self.u, self.size = env.unwrapped, size
        self.w, self.h = int(self.u.width), int(self.u.height)
        self.tile = _tile_size(self.w, self.h, size)

    def frame(self, state: np.ndarray) -> np.ndarray:
        from minigrid.core.grid import Grid

        s = np.rint(np.asarray(state, np.float64)).astype(np.int64)
        if s.shape[0] != 6 + self.w * self.h * 3:
            raise ValueError(
                f"a {self.w}×{self.h} MiniGrid state has {6 + self.w * self.h * 3} numbers, "
                f"got {s.shape[0]}"
            )
        grid, _ = Grid.decode(s[6:].reshape(self.w, self.h, 3).astype(np.uint8))
        # s[3:6], the carried object, is kept for completeness: MiniGrid's full view omits it
        grid_img = grid.render(self.tile, (int(s[0]), int(s[1])), int(s[2]))
        return fit_frame(grid_img, self.size)

    def close(self) -> None:
        pass


class PrefLabGridReplayer:
    """Compact grid-world observation → grid rebuilt for the fixed layout → MiniGrid tiles."""

    def __init__(self, env: Any, size: int) -> None:
        from preflab.envs.grids import LAYOUTS

        self.u, self.size = env.unwrapped, size
        self.layout = LAYOUTS[self.u.layout.name]
        self.tile = _tile_size(self.layout.width, self.layout.height, size)

    def frame(self, state: np.ndarray) -> np.ndarray:
        from minigrid.core.grid import Grid
        from minigrid.core.world_object import Door, Goal, Key

        from preflab.envs.grids import LOCK_COLORS, decode_obs

        st = decode_obs(np.asarray(state, np.float32), self.layout.name)
        lay = self.layout
        grid = Grid(lay.width, lay.height)
        grid.wall_rect(0, 0, lay.width, lay.height)
        for i, wx in enumerate(lay.walls):
            grid.vert_wall(wx, 0)
            open_ = st.door_open[i]
            grid.set(*st.doors[i], Door(LOCK_COLORS[i], is_open=open_, is_locked=not open_))
            key = st.keys[i]
            if key is not None:
                grid.set(*key, Key(LOCK_COLORS[i]))
        grid.set(*st.goal, Goal())
        return fit_frame(grid.render(self.tile, st.agent, st.direction), self.size)

    def close(self) -> None:
        pass


_BUILTIN: tuple[tuple[Match, ReplayerFactory], ...] = (
    (is_metaworld, MetaWorldReplayer),  # before is_mujoco: a Meta-World env is a MujocoEnv
    (is_mujoco, MujocoReplayer),
    (is_dm_control, DmControlReplayer),
    (is_classic_control, ClassicControlReplayer),
    (is_preflab_grid, PrefLabGridReplayer),
    (is_minigrid, MiniGridReplayer),
)


def replayer_for(env: Any, size: int) -> Replayer | None:
    """A replayer for ``env`` at ``size`` pixels, or None when no replayer matches."""
    u = getattr(env, "unwrapped", env)
    for match, factory in (*_USER, *_BUILTIN):
        if _matches(match, u):
            return factory(env, size)
    return None


def make_replay_env(env_id: str, size: int) -> Any:
    """The env for replaying ``env_id`` in rgb_array render mode, reset once.

    Built with gymnasium directly (not :func:`preflab.envs.make_env`, which loads
    stable-baselines3 and torch: seconds of start-up a render worker does not need).
    """
    del size  # replayers size their own output (MuJoCo's offscreen buffer is enlarged to fit)
    os.environ.setdefault("MUJOCO_GL", "egl")
    os.environ.setdefault("PYOPENGL_PLATFORM", os.environ["MUJOCO_GL"])
    os.environ.setdefault("SDL_VIDEODRIVER", "dummy")
    import gymnasium as gym

    if env_id.startswith("PrefLab/"):
        import preflab.envs.grids  # noqa: F401  (registers the PrefLab grid worlds)
    else:
        from preflab.env_families import register_family

        register_family(env_id)
    env = gym.make(env_id, render_mode="rgb_array")
    env.reset(seed=0)
    return env


def env_fps(env: Any) -> int:
    """The env's ``metadata['render_fps']`` (default 30), capped at 60. Clips no longer use it:
    their frame rate is the env's real time, :func:`preflab.media.timing.clip_timing`."""
    meta = getattr(getattr(env, "unwrapped", env), "metadata", None) or {}
    try:
        fps = round(float(meta.get("render_fps") or DEFAULT_FPS))
    except (TypeError, ValueError):
        fps = DEFAULT_FPS
    return max(1, min(MAX_FPS, fps))
