"""JSON + arrays codec for run state: nested Python values with numpy arrays, no pickle."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

import numpy as np


class UnencodableError(TypeError):
    """A value the run-state codec cannot write (not plain data, an array or a Generator)."""


def encode(obj: Any, arrays: dict[str, np.ndarray], key: str) -> Any:
    """``obj`` as JSON-able data; arrays go into ``arrays`` under keys derived from ``key``."""
    if obj is None or isinstance(obj, bool | int | float | str):
        return obj
    if isinstance(obj, np.generic):
        return obj.item()
    if isinstance(obj, np.ndarray):
        if obj.dtype == object:
            raise UnencodableError(f"{key}: object array")
        arrays[key] = obj
        return {"__nd__": key}
    if isinstance(obj, np.random.Generator):
        return {"__rng__": obj.bit_generator.state}
    if isinstance(obj, tuple):
        return {"__tuple__": [encode(v, arrays, f"{key}.{i}") for i, v in enumerate(obj)]}
    if isinstance(obj, list):
        return [encode(v, arrays, f"{key}.{i}") for i, v in enumerate(obj)]
    if isinstance(obj, Mapping) and all(isinstance(k, str) for k in obj):
        return {k: encode(v, arrays, f"{key}.{k}") for k, v in obj.items()}
    raise UnencodableError(f"{key}: {type(obj).__name__}")


def decode(obj: Any, arrays: Mapping[str, np.ndarray]) -> Any:
    """Inverse of :func:`encode` (Generators come back as new ``np.random.Generator``s)."""
    if isinstance(obj, list):
        return [decode(v, arrays) for v in obj]
    if isinstance(obj, dict):
        if set(obj) == {"__nd__"}:
            return np.array(arrays[obj["__nd__"]])
        if set(obj) == {"__tuple__"}:
            return tuple(decode(v, arrays) for v in obj["__tuple__"])
        if set(obj) == {"__rng__"}:
            return rng_from_state(obj["__rng__"])
        return {k: decode(v, arrays) for k, v in obj.items()}
    return obj


def rng_from_state(state: Mapping[str, Any]) -> np.random.Generator:
    """A Generator whose bit generator has ``state`` (as from ``bit_generator.state``)."""
    bitgen = getattr(np.random, state["bit_generator"])()
    bitgen.state = dict(state)
    return np.random.Generator(bitgen)


def plain_attrs(obj: Any, arrays: dict[str, np.ndarray], key: str) -> dict[str, Any]:
    """The attributes of ``obj`` that :func:`encode` can write (buffers, counters, arrays);
    structure such as wrapped envs, callables and spaces is left out."""
    out = {}
    for name, value in vars(obj).items():
        try:
            out[name] = encode(value, arrays, f"{key}.{name}")
        except UnencodableError:
            continue
    return out


def set_attrs(obj: Any, state: Mapping[str, Any], arrays: Mapping[str, np.ndarray]) -> None:
    """Restore what :func:`plain_attrs` wrote."""
    for name, value in state.items():
        setattr(obj, name, decode(value, arrays))
