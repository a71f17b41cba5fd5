"""Choose and build the reward model for an environment's spaces (MLP or convolutional)."""

from __future__ import annotations

import json
from dataclasses import asdict
from pathlib import Path
from typing import Any, TypeGuard

import torch
from gymnasium import spaces

from preflab.envs import action_dim
from preflab.errors import ConfigError, StoreError
from preflab.pixels.spaces import check_obs_space, image_shape, is_image_space
from preflab.reward.ensemble import RewardConfig, RewardEnsemble


def reward_kind(observation_space: spaces.Space[Any], config: RewardConfig) -> str:
    """'mlp' or 'cnn' for this observation space ('auto': cnn for images)."""
    check_obs_space(observation_space)
    image = is_image_space(observation_space)
    if config.kind == "auto":
        return "cnn" if image else "mlp"
    if config.kind == "cnn" and not image:
        raise ConfigError(
            f"reward kind 'cnn' needs image observations (uint8 (H, W, C) or (C, H, W)), got "
            f"{observation_space}; use kind 'auto' or 'mlp'"
        )
    if config.kind == "mlp" and image:
        raise ConfigError(
            f"reward kind 'mlp' cannot take image observations {observation_space.shape}; use "
            "kind 'auto' or 'cnn' (or flatten the env's observations first)"
        )
    return config.kind


def make_reward_model(
    observation_space: spaces.Space[Any],
    action_space: spaces.Space[Any],
    config: RewardConfig | None = None,
    *,
    seed: int = 0,
) -> RewardEnsemble:
    """The reward ensemble for these spaces: :class:`RewardEnsemble` (MLP) for flat
    observations, :class:`~preflab.reward.cnn.ConvRewardEnsemble` for images."""
    cfg = config or RewardConfig()
    if reward_kind(observation_space, cfg) == "cnn":
        from preflab.reward.cnn import ConvRewardEnsemble

        return ConvRewardEnsemble(
            image_shape(observation_space), action_dim(action_space), cfg, seed=seed
        )
    from preflab.envs import obs_dim

    return RewardEnsemble(obs_dim(observation_space), action_dim(action_space), cfg, seed=seed)


CONFIG_FILE = "reward_config.json"
STATE_FILE = "reward_state.pt"
"""The files :meth:`RewardEnsemble.save` writes into a reward model's folder."""


def load_reward_model(directory: str | Path) -> RewardEnsemble:
    """Load a reward model written by :meth:`RewardEnsemble.save` (MLP or convolutional). Files
    that hold none (damaged, edited, of another model) are a StoreError naming the folder."""
    d = Path(directory)
    try:
        meta = _read_meta(d / CONFIG_FILE)
        state = _read_state(d / STATE_FILE)
        _check_fits(meta, state)
        ens = _build(meta)
        ens.load_state_dict(state)
    except (OSError, KeyError, ValueError, TypeError, RuntimeError) as exc:
        raise StoreError(
            f"cannot load a reward model from {d}: {exc}. Expected files written by "
            f"RewardEnsemble.save ({CONFIG_FILE}, {STATE_FILE}): restore the folder from a copy "
            "of the run"
        ) from exc
    ens.eval()
    return ens


def _read_meta(path: Path) -> dict[str, Any]:
    """``reward_config.json``, its structure and dimensions checked (not its sizes: the state
    file decides those, :func:`_check_fits`)."""
    meta = json.loads(path.read_text())
    if not isinstance(meta, dict) or not isinstance(meta.get("config"), dict):
        raise ValueError(f'{CONFIG_FILE} must be a JSON object with a "config" object')
    shape = meta.get("obs_shape")
    dims: list[tuple[str, Any, int]] = [("act_dim", meta.get("act_dim"), 0)]
    if shape is None:
        dims.append(("obs_dim", meta.get("obs_dim"), 1))
    elif isinstance(shape, list) and len(shape) == 3:
        dims += [("obs_shape", x, 1) for x in shape]
    else:
        raise ValueError(f"obs_shape in {CONFIG_FILE} must be a list (C, H, W), got {shape!r}")
    for name, value, least in dims:
        if not _is_int(value) or value < least:
            raise ValueError(f"{name} in {CONFIG_FILE} must be an integer ≥ {least}, got {value!r}")
    return meta


def _is_int(value: object) -> TypeGuard[int]:
    """An integer, not a bool (JSON true is no dimension)."""
    return isinstance(value, int) and not isinstance(value, bool)


def _read_state(path: Path) -> dict[str, Any]:
    """``reward_state.pt``: tensors only (``weights_only``), on the CPU (a model saved on a GPU
    before its tensors were saved on the CPU loads too)."""
    try:
        state = torch.load(path, map_location="cpu", weights_only=True)
    except OSError:
        raise  # a missing or unreadable file: said as such by load_reward_model
    except Exception as exc:  # torch.load's unpickler raises its own kinds for damaged bytes
        raise ValueError(f"{STATE_FILE} is empty, truncated or not a saved state_dict") from exc
    if not isinstance(state, dict):
        raise ValueError(f"{STATE_FILE} holds a {type(state).__name__}, not a state_dict")
    return state


def _build(meta: dict[str, Any]) -> RewardEnsemble:
    """The network ``reward_config.json`` describes, freshly initialised."""
    cfg = _reward_config(meta["config"])
    if meta.get("obs_shape") is not None:  # pixels: a convolutional ensemble
        from preflab.reward.cnn import ConvRewardEnsemble

        return ConvRewardEnsemble(tuple(meta["obs_shape"]), meta["act_dim"], cfg)
    return RewardEnsemble(meta["obs_dim"], meta["act_dim"], cfg)


def _check_fits(meta: dict[str, Any], state: dict[str, Any]) -> None:
    """Refuse a config whose network does not have the saved tensors' shapes, before it is
    built: built on the meta device, it allocates nothing (obs_dim = 10**12 would ask for
    terabytes)."""
    with torch.device("meta"):
        probe = _build(meta)
    try:
        probe.load_state_dict(state, assign=True)  # assign: no copy into the meta tensors
    except RuntimeError as exc:
        first = next((x.strip() for x in str(exc).splitlines()[1:] if x.strip()), str(exc))
        raise ValueError(
            f"{CONFIG_FILE} does not describe the network in {STATE_FILE} ({first})"
        ) from exc


_KINDS = {
    bool: "true or false",
    int: "an integer",
    float: "a number",
    str: "a string",
    tuple: "a list of integers",
}
"""What a JSON value of a :class:`RewardConfig` field must be, by its default's type."""


def _reward_config(data: dict[str, Any]) -> RewardConfig:
    """The ``config`` of ``reward_config.json``: each key one of :class:`RewardConfig`'s, with
    the JSON type of its default."""
    defaults = asdict(RewardConfig())
    for key, value in data.items():
        if key not in defaults:
            raise ValueError(
                f"config in {CONFIG_FILE} has an unknown key {key!r} (known: {', '.join(defaults)})"
            )
        if not _same_kind(value, defaults[key]):
            want = _KINDS[type(defaults[key])]
            raise ValueError(f"config.{key} in {CONFIG_FILE} must be {want}, got {value!r}")
    return RewardConfig(**(data | {"hidden": tuple(data.get("hidden", defaults["hidden"]))}))


def _same_kind(value: object, default: object) -> bool:
    if isinstance(default, tuple):
        return isinstance(value, list) and all(_is_int(x) for x in value)
    if isinstance(default, float) and _is_int(value):
        return True  # 0 for 0.0
    return type(value) is type(default)
