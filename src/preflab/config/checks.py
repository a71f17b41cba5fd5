"""Checks a run must pass before it starts (the loop calls :func:`check_run` first): each failure
is a ConfigError with a one-line message saying what was expected and how to fix it.

- the environment exists and its spaces can be used (a flat observation, an action space the
  algorithm supports: SAC, TD3 and DDPG need continuous Box actions);
- the budgets can produce labels: every env gets at least one whole segment from the initial
  random steps, two segments in all, and a segment fits in an episode;
- ``agent_kwargs`` names real constructor arguments of the algorithm, with values of the
  right type;
- with ``--source llm``, the judge's server answers (one short request).
"""

from __future__ import annotations

import inspect
import json
import math
from typing import Any

from gymnasium import spaces

from preflab.config import TrainConfig
from preflab.config.constraints import check_constraints
from preflab.device import resolve_device
from preflab.env_families import episode_limit
from preflab.errors import ConfigError, PrefLabError
from preflab.policy.algos import CONTINUOUS_ONLY

_ACTION_SPACES = {
    "ppo": (spaces.Box, spaces.Discrete, spaces.MultiDiscrete, spaces.MultiBinary),
    "a2c": (spaces.Box, spaces.Discrete, spaces.MultiDiscrete, spaces.MultiBinary),
    "trpo": (spaces.Box, spaces.Discrete, spaces.MultiDiscrete, spaces.MultiBinary),
    "sac": (spaces.Box,),
    "td3": (spaces.Box,),
    "ddpg": (spaces.Box,),
    "tqc": (spaces.Box,),
    "crossq": (spaces.Box,),
    "dqn": (spaces.Discrete,),
}


def check_run(config: TrainConfig, env_spec: Any = None) -> None:
    """Refuse a run that cannot work, before anything is written. ``env_spec`` is the env id
    or factory the run will use (default ``config.env_id``)."""
    from preflab.envs import action_dim, make_env
    from preflab.pixels.spaces import is_image_space, obs_shape

    check_agent_kwargs(config)
    resolve_device(config.device)  # a GPU asked for that torch cannot use: one line, no run dir
    spec = config.env_id if env_spec is None else env_spec
    try:
        env = make_env(spec)
    except PrefLabError:
        raise
    except Exception as exc:  # a gymnasium or env constructor error
        raise ConfigError(
            f"cannot build environment {spec!r}: {type(exc).__name__}: {exc}"
        ) from exc
    try:
        obs_space, act_space = env.observation_space, env.action_space
        max_steps = episode_limit(getattr(env, "spec", None))
    finally:
        env.close()
    try:
        obs_shape(obs_space)  # flat vectors and uint8 images (Atari ids, pixel envs) pass
    except ConfigError as exc:
        raise ConfigError(f"environment {spec!r}: {exc}") from exc
    if config.backend == "sbx" and is_image_space(obs_space):
        raise ConfigError(
            f"{spec!r} has image observations and the sbx backend has no convolutional policy: "
            "use --backend sb3"
        )
    allowed = _ACTION_SPACES.get(config.algo, ())
    if not isinstance(act_space, allowed):
        need = "continuous (Box) actions" if config.algo in CONTINUOUS_ONLY else "Box/Discrete"
        alt = _discrete_alternative(config) if config.algo in CONTINUOUS_ONLY else ""
        if config.algo == "dqn":  # DQN acts in Discrete spaces only
            need, alt = "discrete (Discrete) actions", " Use --algo sac (or td3/ppo) for them."
        raise ConfigError(
            f"{config.algo.upper()} needs {need}, but {spec!r} has {_short(act_space)}.{alt}"
        )
    action_dim(act_space)  # a ConfigError for spaces rewards cannot encode
    try:
        check_budgets(config, max_steps)
        budget: list[str] = []
    except ConfigError as exc:
        budget = [str(exc)]
    # every source's constraints, the budgets' and unused flags: all reported in one error
    check_constraints(config, max_steps, also=budget)
    check_judge_server(config)  # the last check: it asks the network


def _discrete_alternative(config: TrainConfig) -> str:
    """The algorithms to use instead on discrete actions, named from the table above."""
    others = [a for a, allowed in _ACTION_SPACES.items() if spaces.Discrete in allowed]
    rest = "/".join(a for a in others if a != "ppo")
    default = TrainConfig().algo
    note = f" ({default.upper()} is the default --algo)" if config.algo == default else ""
    return f" Use --algo ppo (or {rest}) for discrete actions{note}."


def check_judge_server(config: TrainConfig) -> None:
    """With ``--source llm``, the judge's server must answer before anything is written
    (:func:`preflab.llm.preflight.check_server`: one short request)."""
    if config.source not in ("llm", "vlm"):
        return
    from preflab.llm.preflight import check_server

    judge = config.llm if config.source == "llm" else config.vlm
    check_server(judge.base_url, api_key_env=judge.api_key_env, flags=f"--{config.source}")


def check_budgets(config: TrainConfig, max_episode_steps: int | None) -> None:
    """Budgets that cannot produce a label are refused."""
    c = config
    if max_episode_steps is not None and c.segment_length > max_episode_steps:
        raise ConfigError(
            f"segment_length {c.segment_length} is longer than an episode of {c.env_id} "
            f"({max_episode_steps} steps), so no segment could ever be cut; use "
            f"--segment-length ≤ {max_episode_steps}"
        )
    per_env = c.initial_steps // c.n_envs
    if per_env < c.segment_length:
        raise ConfigError(
            f"initial_steps {c.initial_steps} over {c.n_envs} envs gives each env {per_env} "
            f"steps, fewer than one segment of {c.segment_length}; raise --initial-steps to "
            f"≥ {c.segment_length * c.n_envs} or lower --n-envs / --segment-length"
        )
    segs_per_env = per_env // c.segment_length
    if max_episode_steps is not None:
        per_episode = max_episode_steps // c.segment_length
        episodes = math.ceil(per_env / max_episode_steps)
        segs_per_env = min(segs_per_env, per_episode * episodes)
    if segs_per_env * c.n_envs < 2:
        raise ConfigError(
            f"the initial {c.initial_steps} random steps give {segs_per_env * c.n_envs} "
            f"segment(s) of {c.segment_length} steps; a label needs two. Raise --initial-steps"
        )


def check_agent_kwargs(config: TrainConfig) -> None:
    """``agent_kwargs`` must name constructor arguments of the algorithm with values of the
    type of their defaults (ints for ints, numbers for floats, true/false for bools)."""
    from preflab.policy.agents import _algo_class

    kwargs = config.agent_overrides()
    if not kwargs:
        return
    cls = _algo_class(config.algo, config.backend)
    params = inspect.signature(cls.__init__).parameters
    for name, value in kwargs.items():
        if name in ("policy", "env", "seed", "verbose", "device"):
            raise ConfigError(f"agent_kwargs may not set {name!r}; PrefLab sets it")
        if name not in params:
            hidden = ("self", "policy", "env", "seed", "verbose", "device", "_init_setup_model")
            close = sorted(p for p in params if p not in hidden)
            raise ConfigError(
                f"{config.algo.upper()} ({config.backend}) has no argument {name!r}; "
                f"agent_kwargs may set {', '.join(close)}"
            )
        default = params[name].default
        if default is inspect.Parameter.empty or default is None or callable(default):
            continue
        if not _compatible(value, default):
            raise ConfigError(
                f"agent_kwargs {name}={json.dumps(value)} has the wrong type: "
                f"{config.algo.upper()} expects {_kind(default)} (default {default!r})"
            )


def _compatible(value: Any, default: Any) -> bool:
    if isinstance(default, bool):
        return isinstance(value, bool)
    if isinstance(default, int):
        return isinstance(value, int) and not isinstance(value, bool)
    if isinstance(default, float):
        return (
            isinstance(value, int | float) and not isinstance(value, bool) and math.isfinite(value)
        )
    if isinstance(default, str):
        return isinstance(value, str)
    if isinstance(default, tuple):
        return isinstance(value, list | tuple | int)  # e.g. train_freq = (1, "step") or 1
    if isinstance(default, dict):
        return isinstance(value, dict)
    return True


def _kind(default: Any) -> str:
    for t, word in (
        (bool, "true/false"),
        (int, "an integer"),
        (float, "a number"),
        (str, "a string"),
    ):
        if isinstance(default, t):
            return word
    return type(default).__name__


def _short(space: Any) -> str:
    text = str(space)
    return text if len(text) <= 80 else text[:77] + "..."
