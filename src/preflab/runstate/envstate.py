"""State of gymnasium environments inside an SB3 ``DummyVecEnv``: wrappers, simulator, RNGs.

Every wrapper and the unwrapped env contribute their plain attributes (numbers, arrays,
Generators, lists of those); the env's family adds what else an exact resume needs
(:meth:`preflab.env_families.EnvFamily.capture_resume`): MuJoCo envs their full integration
state (``mj_getState``) and the model's body and site positions (Meta-World moves its objects
and goal there at every reset), DeepMind Control envs the same of their physics plus the
episode's step count and the task's RandomState, Atari envs their emulator state with its RNG
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

from preflab.env_families import resume_family_of
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


def _layers(env: Any) -> list[Any]:
    out = [env]
    while hasattr(out[-1], "env"):
        out.append(out[-1].env)
    return out


def capture_env(env: Any, arrays: dict[str, np.ndarray], key: str) -> dict[str, Any]:
    """The state of one gymnasium env (all wrapper layers); ``exact`` says if it is complete."""
    layers: list[dict[str, Any]] = []
    exact = True
    inner = _layers(env)[-1]
    family = resume_family_of(inner)
    for i, layer in enumerate(_layers(env)):
        attrs: dict[str, Any] = {}
        own = family.skip_attrs(layer)  # captured by the family below
        for name, value in vars(layer).items():
            if name in _SKIP or name in own or isinstance(value, Space):  # structure, not state
                continue
            try:
                attrs[name] = encode(value, arrays, f"{key}.{i}.{name}")
            except UnencodableError:
                exact = False
        layers.append({"type": type(layer).__name__, "attrs": attrs})
    out: dict[str, Any] = {"layers": layers, "exact": exact, "family": family.name}
    out.update(family.capture_resume(inner, arrays, key))
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
    family = resume_family_of(layers[-1])
    saved_family = state.get("family", family.name)  # absent in checkpoints before families
    if saved_family != family.name:
        raise ValueError(
            f"the checkpoint holds the state of a {saved_family} env; this env is {family.name}"
        )
    family.restore_resume(layers[-1], state, arrays)


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
