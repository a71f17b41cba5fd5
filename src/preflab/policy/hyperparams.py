"""The effective SB3 hyperparameters of an agent, as strict JSON (``RUN_DIR/hyperparams.json``)."""

from __future__ import annotations

import inspect
import json
import math
from enum import Enum
from pathlib import Path
from typing import Any

from stable_baselines3.common.base_class import BaseAlgorithm

HYPERPARAMS_FILE = "hyperparams.json"
"""File name of the effective hyperparameters in a run directory."""

_NOT_HYPER = frozenset(
    {"self", "policy", "env", "seed", "verbose", "device", "_init_setup_model", "tensorboard_log"}
)


def jsonable(value: Any) -> Any:
    """``value`` as strict JSON: classes and functions by dotted name, non-finite floats as
    strings ("inf", "nan"), tuples as lists, other objects by their repr."""
    if isinstance(value, Enum):
        return jsonable(value.value)
    if value is None or isinstance(value, bool | int | str):
        return value
    if isinstance(value, float):
        return value if math.isfinite(value) else str(value)
    if isinstance(value, dict):
        return {str(k): jsonable(v) for k, v in value.items()}
    if isinstance(value, list | tuple):
        return [jsonable(v) for v in value]
    if inspect.isclass(value) or inspect.isfunction(value):
        return f"{value.__module__}.{value.__qualname__}"
    if hasattr(value, "item") and callable(value.item):  # numpy / torch scalars
        try:
            return jsonable(value.item())
        except (TypeError, ValueError):
            pass
    return repr(value)


def effective_hyperparams(agent: BaseAlgorithm, given: dict[str, Any]) -> dict[str, Any]:
    """Every constructor argument of ``agent``'s algorithm with the value the agent uses: its
    attribute when it keeps one (a schedule falls back to the value given), else the value
    ``given`` to the constructor, else SB3's default."""
    out: dict[str, Any] = {}
    params = inspect.signature(type(agent).__init__).parameters
    for name, param in params.items():
        if name in _NOT_HYPER or param.kind in (param.VAR_KEYWORD, param.VAR_POSITIONAL):
            continue
        fallback = given.get(name, None if param.default is param.empty else param.default)
        value = getattr(agent, name, fallback)
        if callable(value) and not inspect.isclass(value):  # SB3 turns constants into schedules
            value = fallback
        out[name] = jsonable(value)
    return out


def write_hyperparams(run_dir: str | Path, record: dict[str, Any]) -> Path:
    """Write ``record`` to ``run_dir/hyperparams.json`` as strict JSON; returns the path."""
    path = Path(run_dir) / HYPERPARAMS_FILE
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(json.dumps(jsonable(record), indent=2, allow_nan=False) + "\n")
    return path
