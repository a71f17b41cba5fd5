"""Choose and build the reward model for an environment's spaces (MLP or convolutional)."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

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


def load_reward_model(directory: str | Path) -> RewardEnsemble:
    """Load a reward model written by :meth:`RewardEnsemble.save` (MLP or convolutional)."""
    d = Path(directory)
    try:
        meta = json.loads((d / "reward_config.json").read_text())
        cfg = meta["config"]
        cfg["hidden"] = tuple(cfg["hidden"])
        ens: RewardEnsemble
        if meta.get("obs_shape") is not None:  # pixels: a convolutional ensemble
            from preflab.reward.cnn import ConvRewardEnsemble

            ens = ConvRewardEnsemble(tuple(meta["obs_shape"]), meta["act_dim"], RewardConfig(**cfg))
        else:
            ens = RewardEnsemble(meta["obs_dim"], meta["act_dim"], RewardConfig(**cfg))
        # map_location: a model saved on a GPU (before its tensors were saved on the CPU) loads
        ens.load_state_dict(
            torch.load(d / "reward_state.pt", map_location="cpu", weights_only=True)
        )
    except (OSError, KeyError, ValueError, RuntimeError) as exc:
        raise StoreError(
            f"cannot load a reward model from {d}: {exc}. Expected files written by "
            "RewardEnsemble.save (reward_config.json, reward_state.pt)"
        ) from exc
    ens.eval()
    return ens
