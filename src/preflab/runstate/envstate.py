"""State of gymnasium environments inside an SB3 ``DummyVecEnv``: wrappers, simulator, RNGs.

Every wrapper and the unwrapped env contribute their plain attributes (numbers, arrays,
Generators, lists of those); MuJoCo envs add their full integration state
(``mj_getState``) and the model's body and site positions (Meta-World moves its objects and
goal there at every reset), DeepMind Control envs the same of their physics plus the episode's
step count and the task's RandomState, Atari envs their emulator state with its RNG
(``ALEState.serialize``).
Vec-env wrappers around the ``DummyVecEnv`` (e.g. ``VecFrameStack``) contribute their plain
attributes and those of their plain helper objects (the frame stack's buffer). Attributes that are not plain data (spaces, specs, renderers, models) are
left as the fresh env has them. An env whose state cannot be captured (e.g. an object-valued
grid) is reported as inexact: a resumed run then continues from a reset instead.
"""

from __future__ import annotations

from typing import Any

import numpy as np
from gymnasium.spaces import Space
from stable_baselines3.common.vec_env import DummyVecEnv, VecEnv, VecEnvWrapper

from preflab.media.capture import is_dm_control
from preflab.runstate.codec import UnencodableError, decode, encode, plain_attrs, set_attrs

# Attributes never captured: structure, not state (or wall-clock times of no consequence).
_SKIP = {
    "env",
    "spec",
    "metadata",
    "render_mode",
    "observation_space",
    "action_space",
    "_action_space",
    "_observation_space",
    "_metadata",
    "_cached_spec",
    "_saved_kwargs",
    "model",
    "data",
    "screen",
    "clock",
    "viewer",
    "mujoco_renderer",
    "_viewers",
    "results_writer",
    "t_start",
    "episode_times",
    "ale",
    "_action_set",
    "_ezpickle_args",  # constructor arguments (Shimmy)
    "_ezpickle_kwargs",
    "env_type",
    "func",  # a TransformObservation wrapper's function (FlatDict)
    "layout",  # a fixed layout (FlatDict's Dict keys, a grid world's map)
}
_MODEL_FIELDS = ("body_pos", "site_pos")
"""MjModel fields some envs edit at reset (Meta-World places its objects and goal there)."""


def _layers(env: Any) -> list[Any]:
    out = [env]
    while hasattr(out[-1], "env"):
        out.append(out[-1].env)
    return out


def _mujoco(env: Any) -> tuple[Any, Any] | None:
    if is_dm_control(env):
        physics = env._env.physics
        return physics.model.ptr, physics.data.ptr
    model, data = getattr(env, "model", None), getattr(env, "data", None)
    if model is None or data is None or type(model).__name__ != "MjModel":
        return None
    return model, data


def capture_env(env: Any, arrays: dict[str, np.ndarray], key: str) -> dict[str, Any]:
    """The state of one gymnasium env (all wrapper layers); ``exact`` says if it is complete."""
    layers: list[dict[str, Any]] = []
    exact = True
    for i, layer in enumerate(_layers(env)):
        attrs: dict[str, Any] = {}
        for name, value in vars(layer).items():
            if name in _SKIP or isinstance(value, Space):  # structure, not state
                continue
            if name == "_env" and is_dm_control(layer):  # captured below (_capture_dm_control)
                continue
            try:
                attrs[name] = encode(value, arrays, f"{key}.{i}.{name}")
            except UnencodableError:
                exact = False
        layers.append({"type": type(layer).__name__, "attrs": attrs})
    out: dict[str, Any] = {"layers": layers, "exact": exact}
    mj = _mujoco(_layers(env)[-1])
    if mj is not None:
        import mujoco

        model, data = mj
        spec = mujoco.mjtState.mjSTATE_INTEGRATION
        state = np.empty(mujoco.mj_stateSize(model, spec))
        mujoco.mj_getState(model, data, state, spec)
        arrays[f"{key}.mujoco"] = state
        out["mujoco"] = f"{key}.mujoco"
        for field in _MODEL_FIELDS:
            arrays[f"{key}.model.{field}"] = np.array(getattr(model, field))
        out["model"] = [f"{key}.model.{field}" for field in _MODEL_FIELDS]
    if is_dm_control(_layers(env)[-1]):
        out["dm_control"] = _capture_dm_control(_layers(env)[-1]._env, arrays, key)
    ale = getattr(_layers(env)[-1], "ale", None)
    if ale is not None:  # the emulator, including the sticky-action RNG
        blob = ale.cloneState(include_rng=True).serialize()
        arrays[f"{key}.ale"] = np.frombuffer(blob, np.uint8).copy()
        out["ale"] = f"{key}.ale"
    return out


def restore_env(env: Any, state: dict[str, Any], arrays: dict[str, np.ndarray]) -> None:
    """Put ``state`` (from :func:`capture_env`) back into a freshly built env of the same kind."""
    layers = _layers(env)
    if [type(x).__name__ for x in layers] != [s["type"] for s in state["layers"]]:
        raise ValueError(
            "the environment's wrappers differ from the checkpoint's: "
            f"{[type(x).__name__ for x in layers]} vs {[s['type'] for s in state['layers']]}"
        )
    for layer, saved in zip(layers, state["layers"], strict=True):
        for name, value in saved["attrs"].items():
            current = getattr(layer, name, None)
            restored = decode(value, arrays)
            if isinstance(current, np.random.Generator) and isinstance(
                restored, np.random.Generator
            ):
                current.bit_generator.state = restored.bit_generator.state
            else:
                setattr(layer, name, restored)
    if "mujoco" in state:
        import mujoco

        model, data = _mujoco(layers[-1]) or (None, None)
        if model is None:
            raise ValueError("the checkpoint holds a MuJoCo state but the env is not MuJoCo")
        for field, name in zip(_MODEL_FIELDS, state.get("model", ()), strict=False):
            getattr(model, field)[:] = arrays[name]  # absent in checkpoints before issue #27
        saved = np.asarray(arrays[state["mujoco"]])
        spec = mujoco.mjtState.mjSTATE_INTEGRATION
        mujoco.mj_setState(model, data, saved, spec)
        mujoco.mj_forward(model, data)  # the derived quantities (positions, contacts, sensors)
        # forward's solver overwrote the warm start the next step begins from: put it back
        # (DeepMind Control steps with mj_step2 + mj_step1, which start from it)
        mujoco.mj_setState(model, data, saved, spec)
    if "dm_control" in state:
        if not is_dm_control(layers[-1]):
            raise ValueError("the checkpoint holds a DeepMind Control state but the env is not one")
        _restore_dm_control(layers[-1]._env, state["dm_control"], arrays)
    if "ale" in state:
        from ale_py import ALEState

        ale = getattr(layers[-1], "ale", None)
        if ale is None:
            raise ValueError("the checkpoint holds an Atari emulator state but the env is not ALE")
        ale.restoreState(ALEState(np.asarray(arrays[state["ale"]], np.uint8).tobytes()))


def _capture_dm_control(denv: Any, arrays: dict[str, np.ndarray], key: str) -> dict[str, Any]:
    """A dm_control ``Environment``'s episode position and its task's RandomState (the physics
    is captured as MuJoCo above)."""
    name, keys, pos, has_gauss, gauss = denv.task.random.get_state()
    arrays[f"{key}.dmc_random"] = np.asarray(keys, np.uint32)
    return {
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


def _restore_dm_control(denv: Any, saved: dict[str, Any], arrays: dict[str, np.ndarray]) -> None:
    denv._step_count = int(saved["step_count"])
    denv._reset_next_step = bool(saved["reset_next_step"])
    r = saved["random"]
    denv.task.random.set_state(
        (r["name"], np.asarray(arrays[r["keys"]], np.uint32), r["pos"], r["has_gauss"], r["gauss"])
    )


def _space_rng(space: Any) -> Any:
    return getattr(space, "_np_random", None)


def _vec_layers(venv: VecEnv) -> tuple[list[VecEnvWrapper], VecEnv]:
    """The vec-env wrappers around the innermost vec env, outermost first, and that env."""
    wrappers = []
    while isinstance(venv, VecEnvWrapper):
        wrappers.append(venv)
        venv = venv.venv
    return wrappers, venv


def _helpers(layer: VecEnvWrapper) -> dict[str, Any]:
    """A wrapper's plain helper objects (not envs, spaces or callables), e.g. the frame stack's
    ``StackedObservations``."""
    return {
        name: value
        for name, value in vars(layer).items()
        if hasattr(value, "__dict__")
        and not isinstance(value, VecEnv | np.random.Generator)
        and not callable(value)
        and not hasattr(value, "sample")  # spaces
    }


def _capture_wrappers(wrappers: list[VecEnvWrapper], arrays: dict[str, np.ndarray]) -> list:
    out = []
    for i, layer in enumerate(wrappers):
        key = f"vecwrap{i}"
        helpers = {
            name: plain_attrs(obj, arrays, f"{key}.{name}") for name, obj in _helpers(layer).items()
        }
        attrs = plain_attrs(layer, arrays, key)
        out.append({"type": type(layer).__name__, "attrs": attrs, "helpers": helpers})
    return out


def _restore_wrappers(
    wrappers: list[VecEnvWrapper], saved: list[dict[str, Any]], arrays: dict[str, np.ndarray]
) -> None:
    if [type(w).__name__ for w in wrappers] != [s["type"] for s in saved]:
        raise ValueError(
            "the vec-env wrappers differ from the checkpoint's: "
            f"{[type(w).__name__ for w in wrappers]} vs {[s['type'] for s in saved]}"
        )
    for layer, s in zip(wrappers, saved, strict=True):
        set_attrs(layer, s["attrs"], arrays)
        for name, attrs in s["helpers"].items():
            set_attrs(getattr(layer, name), attrs, arrays)


def capture_vec_env(venv: VecEnv, arrays: dict[str, np.ndarray]) -> dict[str, Any]:
    """State of every env of a DummyVecEnv (plus its spaces' RNGs and the vec-env wrappers
    around it); ``exact`` overall."""
    wrappers, venv = _vec_layers(venv)
    if not isinstance(venv, DummyVecEnv):
        return {"envs": [], "exact": False}
    envs = [capture_env(e, arrays, f"env{i}") for i, e in enumerate(venv.envs)]
    spaces = {}
    for name in ("action_space", "observation_space"):
        rng = _space_rng(getattr(venv, name))
        spaces[name] = None if rng is None else rng.bit_generator.state
    return {
        "envs": envs,
        "spaces": spaces,
        "vec": plain_attrs(venv, arrays, "vec"),  # pending seeds/options, step buffers
        "vec_wrappers": _capture_wrappers(wrappers, arrays),
        "exact": all(e["exact"] for e in envs),
    }


def restore_vec_env(venv: VecEnv, state: dict[str, Any], arrays: dict[str, np.ndarray]) -> None:
    """Restore :func:`capture_vec_env` output into a freshly built vec env."""
    wrappers, venv = _vec_layers(venv)
    if not isinstance(venv, DummyVecEnv) or len(venv.envs) != len(state["envs"]):
        raise ValueError(
            f"the checkpoint holds {len(state['envs'])} environments; this run has "
            f"{getattr(venv, 'num_envs', '?')}"
        )
    for env, s in zip(venv.envs, state["envs"], strict=True):
        restore_env(env, s, arrays)
    set_attrs(venv, state.get("vec", {}), arrays)
    if "vec_wrappers" in state:  # absent in checkpoints written before it was captured
        _restore_wrappers(wrappers, state["vec_wrappers"], arrays)
    for name, st in state.get("spaces", {}).items():
        if st is not None:
            space = getattr(venv, name)
            space.seed(0)  # creates the space's Generator; its state is then overwritten
            space.np_random.bit_generator.state = st
