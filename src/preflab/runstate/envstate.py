"""State of gymnasium environments inside an SB3 ``DummyVecEnv``: wrappers, simulator, RNGs.

Every wrapper and the unwrapped env contribute their plain attributes (numbers, arrays,
Generators, lists of those); MuJoCo envs add their full integration state
(``mj_getState``). Attributes that are not plain data (spaces, specs, renderers, models) are
left as the fresh env has them. An env whose state cannot be captured (e.g. an object-valued
grid) is reported as inexact: a resumed run then continues from a reset instead.
"""

from __future__ import annotations

from typing import Any

import numpy as np
from stable_baselines3.common.vec_env import DummyVecEnv, VecEnv

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
}


def _layers(env: Any) -> list[Any]:
    out = [env]
    while hasattr(out[-1], "env"):
        out.append(out[-1].env)
    return out


def _mujoco(env: Any) -> tuple[Any, Any] | None:
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
            if name in _SKIP:
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
        mujoco.mj_setState(
            model, data, np.asarray(arrays[state["mujoco"]]), mujoco.mjtState.mjSTATE_INTEGRATION
        )
        mujoco.mj_forward(model, data)


def _space_rng(space: Any) -> Any:
    return getattr(space, "_np_random", None)


def capture_vec_env(venv: VecEnv, arrays: dict[str, np.ndarray]) -> dict[str, Any]:
    """State of every env of a DummyVecEnv (plus its spaces' RNGs); ``exact`` overall."""
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
        "exact": all(e["exact"] for e in envs),
    }


def restore_vec_env(venv: VecEnv, state: dict[str, Any], arrays: dict[str, np.ndarray]) -> None:
    """Restore :func:`capture_vec_env` output into a freshly built vec env."""
    if not isinstance(venv, DummyVecEnv) or len(venv.envs) != len(state["envs"]):
        raise ValueError(
            f"the checkpoint holds {len(state['envs'])} environments; this run has "
            f"{getattr(venv, 'num_envs', '?')}"
        )
    for env, s in zip(venv.envs, state["envs"], strict=True):
        restore_env(env, s, arrays)
    set_attrs(venv, state.get("vec", {}), arrays)
    for name, st in state.get("spaces", {}).items():
        if st is not None:
            space = getattr(venv, name)
            space.seed(0)  # creates the space's Generator; its state is then overwritten
            space.np_random.bit_generator.state = st
