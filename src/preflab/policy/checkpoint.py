"""Agent checkpoints as state_dicts (policy and optimisers) plus JSON, never pickled objects."""

from __future__ import annotations

import json
from pathlib import Path

import torch
from stable_baselines3.common.base_class import BaseAlgorithm

from preflab.errors import StoreError


def save_agent_state(agent: BaseAlgorithm, directory: Path) -> None:
    """Write ``params.pt`` (dict of state_dicts from ``get_parameters``) and ``meta.json``."""
    directory.mkdir(parents=True, exist_ok=True)
    tmp = directory / "params.pt.tmp"
    torch.save(agent.get_parameters(), tmp)
    tmp.replace(directory / "params.pt")
    (directory / "meta.json").write_text(
        json.dumps({"algo": type(agent).__name__, "num_timesteps": int(agent.num_timesteps)})
    )


def load_agent_state(agent: BaseAlgorithm, directory: Path) -> None:
    """Restore parameters saved by :func:`save_agent_state` into a freshly built agent."""
    try:
        meta = json.loads((directory / "meta.json").read_text())
        if meta["algo"] != type(agent).__name__:
            raise StoreError(
                f"checkpoint in {directory} is for {meta['algo']}, not {type(agent).__name__}"
            )
        params = torch.load(directory / "params.pt", weights_only=True)
        agent.set_parameters(params, exact_match=True)
    except (OSError, KeyError, RuntimeError, json.JSONDecodeError) as exc:
        raise StoreError(f"cannot load the agent checkpoint in {directory}: {exc}") from exc
