"""A sweep specification: a base :class:`~preflab.config.TrainConfig` and axes to vary.

TOML form (read with :mod:`tomllib`)::

    name = "pendulum_labels"
    preset = "default"          # or "smoke": start from TrainConfig.smoke()
    x = "total_labels"          # the plots' x axis (default: the first axis)

    [base]                      # any TrainConfig field; nested tables for reward/fit/teacher/...
    env_id = "Pendulum-v1"
    algo = "ppo"

    [axes]                      # the grid: every combination is one trial
    total_labels = [50, 100, 200, 400]
    seed = [0, 1, 2]

Axis names are TrainConfig fields; a dotted name (``teacher.epsilon``) varies a nested field.
The "method" of a trial (one line in the plots) is the combination of its values on every axis
except ``x`` and ``seed``.
"""

from __future__ import annotations

import dataclasses
import itertools
import json
import re
import tomllib
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from preflab.config import TrainConfig
from preflab.config.values import apply_config_data
from preflab.errors import ConfigError

PRESETS = ("default", "smoke")
_NAME = re.compile(r"^[A-Za-z0-9_.-]{1,80}$")


@dataclass(frozen=True, kw_only=True)
class Trial:
    """One cell of the grid: an ordinary run directory under the sweep directory."""

    name: str
    """Directory name, e.g. ``total_labels=50,seed=0`` (stable across invocations)."""
    values: dict[str, Any]
    """This trial's value on every axis."""
    config: TrainConfig
    """The full run configuration."""


@dataclass(frozen=True, kw_only=True)
class SweepSpec:
    """A grid of training runs."""

    name: str = "sweep"
    """Name of the sweep (used in titles and as the default directory name)."""
    preset: str = "default"
    """Base configuration to start from: 'default' (TrainConfig()) or 'smoke'."""
    base: Mapping[str, Any] = field(default_factory=dict)
    """TrainConfig fields set in every trial (nested mappings for nested configs)."""
    axes: Mapping[str, Sequence[Any]] = field(default_factory=dict)
    """Axis name → values; the grid is their Cartesian product, in the given order."""
    x: str = ""
    """Axis on the plots' x axis (default: the first axis that is not 'seed')."""

    def __post_init__(self) -> None:
        if not _NAME.match(self.name):
            raise ConfigError(
                f"sweep name {self.name!r} must be 1–80 letters, digits, '_', '-' or '.'"
            )
        if self.preset not in PRESETS:
            raise ConfigError(f"preset must be one of {PRESETS}, got {self.preset!r}")
        if not self.axes:
            raise ConfigError("a sweep needs at least one axis, e.g. seed = [0, 1, 2]")
        for k, vals in self.axes.items():
            if not isinstance(vals, list | tuple) or not vals:
                raise ConfigError(f"axis {k!r} must be a non-empty list of values, got {vals!r}")
            if len({json.dumps(v, sort_keys=True) for v in vals}) != len(vals):
                raise ConfigError(f"axis {k!r} repeats a value: {list(vals)}")
            if k in self.base:
                raise ConfigError(f"{k!r} is both in [base] and in [axes]; keep one")
        if self.x and self.x not in self.axes:
            raise ConfigError(f"x = {self.x!r} is not an axis; axes are {list(self.axes)}")
        self.trials()  # every combination must be a valid TrainConfig

    @property
    def x_axis(self) -> str:
        """The axis plotted on x."""
        if self.x:
            return self.x
        return next((k for k in self.axes if k != "seed"), next(iter(self.axes)))

    @property
    def method_axes(self) -> list[str]:
        """Axes that tell methods apart (all but x and seed)."""
        return [k for k in self.axes if k not in (self.x_axis, "seed")]

    def base_config(self) -> TrainConfig:
        start = TrainConfig.smoke() if self.preset == "smoke" else TrainConfig()
        return _with(start, dict(self.base))

    def trials(self) -> list[Trial]:
        """Every combination of axis values, first axis slowest."""
        base = self.base_config()
        keys = list(self.axes)
        out = []
        for combo in itertools.product(*(self.axes[k] for k in keys)):
            values = dict(zip(keys, combo, strict=True))
            out.append(Trial(name=trial_name(values), values=values, config=_with(base, values)))
        return out

    def to_json(self) -> str:
        """The spec as JSON (written to sweep.json); a store URL loses its password."""
        from preflab.store import strip_password

        base = dict(self.base)
        if isinstance(base.get("store_url"), str):
            base["store_url"] = strip_password(base["store_url"])
        return json.dumps(
            {
                "name": self.name,
                "preset": self.preset,
                "base": base,
                "axes": {k: list(v) for k, v in self.axes.items()},
                "x": self.x,
            },
            indent=2,
            sort_keys=True,
        )

    @staticmethod
    def from_mapping(data: Mapping[str, Any]) -> SweepSpec:
        unknown = set(data) - {"name", "preset", "base", "axes", "x"}
        if unknown:
            raise ConfigError(
                f"unknown sweep key(s) {sorted(unknown)}; expected name, preset, x, [base], [axes]"
            )
        base, axes = data.get("base", {}), data.get("axes", {})
        if not isinstance(base, Mapping) or not isinstance(axes, Mapping):
            raise ConfigError("[base] and [axes] must be tables")
        return SweepSpec(
            name=str(data.get("name", "sweep")),
            preset=str(data.get("preset", "default")),
            base=dict(base),
            axes={str(k): list(v) if isinstance(v, list | tuple) else v for k, v in axes.items()},
            x=str(data.get("x", "")),
        )

    @staticmethod
    def load(path: str | Path) -> SweepSpec:
        """Read a TOML (or JSON) sweep file."""
        p = Path(path)
        try:
            text = p.read_text(encoding="utf-8")
        except (OSError, UnicodeDecodeError) as exc:
            raise ConfigError(f"cannot read sweep spec {p}: {exc}") from exc
        try:
            data = json.loads(text) if p.suffix == ".json" else tomllib.loads(text)
        except (tomllib.TOMLDecodeError, json.JSONDecodeError) as exc:
            raise ConfigError(f"{p} is not a valid sweep spec ({exc})") from exc
        if not isinstance(data, dict):
            raise ConfigError(f"{p} must hold a table (name, [base], [axes])")
        return SweepSpec.from_mapping(data)


def trial_name(values: Mapping[str, Any]) -> str:
    """A stable, file-system-safe directory name for one combination of axis values."""
    parts = []
    for k, v in values.items():
        text = json.dumps(v) if not isinstance(v, str) else v
        text = re.sub(r"[^A-Za-z0-9_.+-]", "_", text)
        parts.append(f"{k}={text}")
    return ",".join(parts)


def parse_axis(text: str) -> tuple[str, list[Any]]:
    """``name=v1,v2,...`` from the command line; values parsed as JSON when they are JSON."""
    if "=" not in text:
        raise ConfigError(f"--axis expects NAME=V1,V2,..., got {text!r}")
    name, _, vals = text.partition("=")
    out: list[Any] = []
    for v in vals.split(","):
        v = v.strip()
        try:
            out.append(json.loads(v))
        except json.JSONDecodeError:
            out.append(v)
    return name.strip(), out


def _with(config: TrainConfig, values: Mapping[str, Any]) -> TrainConfig:
    """``config`` with fields (dotted names for nested configs) replaced, validated."""
    data = json.loads(config.to_json())
    for key, v in values.items():
        parts = key.split(".")
        node = data
        for p in parts[:-1]:
            if not isinstance(node.get(p), dict):
                raise ConfigError(f"{key!r} is not a TrainConfig field (no section {p!r})")
            node = node[p]
        if parts[-1] not in node:
            fields = sorted(f.name for f in dataclasses.fields(TrainConfig))
            raise ConfigError(f"{key!r} is not a TrainConfig field; fields are {fields}")
        if isinstance(node[parts[-1]], dict) and isinstance(v, Mapping):
            node[parts[-1]] = {**node[parts[-1]], **v}
        elif isinstance(node[parts[-1]], str) and isinstance(v, Mapping | list):
            node[parts[-1]] = json.dumps(v)  # e.g. agent_kwargs given as a TOML table
        else:
            node[parts[-1]] = v
    return apply_config_data(
        TrainConfig(), data, where=f"sweep values {dict(values)} do not make a TrainConfig"
    )
