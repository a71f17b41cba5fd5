"""A run's options as a TOML file: ``preflab train --config FILE.toml`` reads one and
``preflab train [flags] --print-config [FILE]`` writes one.

The file holds :class:`~preflab.config.TrainConfig`'s fields by their Python names, with a table
per sub-config (``[teacher]``, ``[reward]``, ...). Keys left out keep their defaults; unknown keys
and values of the wrong type are refused, all in one message, with suggestions. TOML has no
null: a field whose value is None is written as a comment and read back as its default.
"""

from __future__ import annotations

import dataclasses
import difflib
import json
import math
import tomllib
import types
from collections.abc import Mapping
from pathlib import Path
from typing import Any, Literal, TypeVar, Union, cast, get_args, get_origin, get_type_hints

from preflab.config import TrainConfig
from preflab.errors import ConfigError
from preflab.fielddocs import docs_of

T = TypeVar("T")


def read_config_file(path: str | Path) -> dict[str, Any]:
    """The TOML file at ``path`` as a dict (a PrefLab error when missing or not TOML)."""
    p = Path(path)
    if not p.is_file():
        raise ConfigError(
            f"--config {path}: no such file; write one with `preflab train --print-config {path}` "
            "and edit it"
        )
    try:
        return tomllib.loads(p.read_text(encoding="utf-8"))
    except (tomllib.TOMLDecodeError, UnicodeDecodeError) as exc:
        raise ConfigError(f"--config {path}: not a TOML file: {exc}") from exc


def apply_config_data(base: T, data: Mapping[str, Any], *, where: str) -> T:
    """``base`` (a config dataclass) with the values of ``data`` (a parsed TOML document) put in.

    Every unknown key and wrongly typed value is reported in one :class:`ConfigError`, prefixed
    with ``where`` (e.g. ``--config run.toml``)."""
    errors: list[str] = []
    out = cast(T, _apply(base, data, prefix="", errors=errors))  # a copy of base's type
    if errors:
        raise ConfigError(f"{where}: " + "; ".join(errors))
    return out


def load_config(path: str | Path, base: TrainConfig | None = None) -> TrainConfig:
    """The run configuration in the TOML file at ``path`` (on top of ``base``, else defaults)."""
    return apply_config_data(
        base or TrainConfig(), read_config_file(path), where=f"--config {path}"
    )


def config_to_toml(config: Any, *, comments: bool = True) -> str:
    """``config`` (a config dataclass) as a TOML document that :func:`load_config` reads back
    to an equal config; with ``comments``, each key has its field's one-line description."""
    lines: list[str] = []
    if comments:
        lines += [
            "# PrefLab run options (`preflab train --config THIS_FILE`; flags override them).",
            "# Leave a key out for its default; `preflab train --help-all` describes every one.",
            "",
        ]
    _write_table(config, "", lines, comments=comments)
    return "\n".join(lines).rstrip("\n") + "\n"


# ----- reading ---------------------------------------------------------------------------------


class _BadValueError(Exception):
    """A value of the wrong type (collected, then reported with the others)."""


def _apply(base: Any, data: Mapping[str, Any], *, prefix: str, errors: list[str]) -> Any:
    cls = type(base)
    hints = get_type_hints(cls)
    names = [f.name for f in dataclasses.fields(cls) if f.init]
    changes: dict[str, Any] = {}
    for key, value in data.items():
        where = f"{prefix}{key}"
        if key not in names:
            errors.append(_unknown(key, where, base, names))
            continue
        current = getattr(base, key)
        if dataclasses.is_dataclass(current):
            if not isinstance(value, Mapping):
                errors.append(
                    f"{where} must be a table ([{where}] with its own keys), got {value!r}"
                )
                continue
            changes[key] = _apply(current, value, prefix=f"{where}.", errors=errors)
            continue
        try:
            changes[key] = _convert(value, hints[key], where)
        except _BadValueError as exc:
            errors.append(str(exc))
    if errors:
        return base
    try:
        return dataclasses.replace(base, **changes)
    except ConfigError as exc:
        errors.append(f"{prefix}{exc}" if prefix else str(exc))
        return base


def _unknown(key: str, where: str, base: Any, names: list[str]) -> str:
    text = f"unknown key {where!r}"
    fixed = key.replace("-", "_")
    close = [fixed] if fixed in names else difflib.get_close_matches(key, names, n=2, cutoff=0.6)
    if close:
        return text + f" (did you mean {' or '.join(repr(c) for c in close)}?)"
    homes = [
        name
        for name in names
        if dataclasses.is_dataclass(sub := getattr(base, name))
        and key in {f.name for f in dataclasses.fields(sub)}
    ]
    if homes:
        return text + f" (it belongs in the table [{homes[0]}])"
    return text + " (`preflab train --help-all` lists the options; write them as snake_case keys)"


def _kind(value: Any) -> str:
    return {bool: "true/false", int: "an integer", float: "a number", str: "a string"}.get(
        type(value), type(value).__name__
    )


def _convert(value: Any, tp: Any, where: str) -> Any:
    origin, args = get_origin(tp), get_args(tp)
    if origin is Literal:
        if value in args and type(value) is type(args[args.index(value)]):
            return value
        raise _BadValueError(
            f"{where} must be one of {', '.join(repr(a) for a in args)}, got {value!r}"
        )
    if origin in (Union, types.UnionType):
        options = [a for a in args if a is not type(None)]
        for option in options:
            try:
                return _convert(value, option, where)
            except _BadValueError:
                pass
        raise _BadValueError(
            f"{where} must be {' or '.join(_name(o) for o in options)}, got {value!r}"
        )
    if origin is tuple:
        if not isinstance(value, list):
            raise _BadValueError(f"{where} must be an array like [64, 64], got {value!r}")
        if len(args) == 2 and args[1] is Ellipsis:
            return tuple(_convert(v, args[0], f"{where}[{i}]") for i, v in enumerate(value))
        if len(value) != len(args):
            raise _BadValueError(f"{where} must be an array of {len(args)} values, got {value!r}")
        return tuple(
            _convert(v, a, f"{where}[{i}]")
            for i, (v, a) in enumerate(zip(value, args, strict=True))
        )
    if tp is float and isinstance(value, (int, float)) and not isinstance(value, bool):
        return float(value)
    if tp in (bool, int, str):
        if type(value) is tp:
            return value
        raise _BadValueError(f"{where} must be {_name(tp)}, got {_kind(value)} {value!r}")
    if tp is float:
        raise _BadValueError(f"{where} must be a number, got {_kind(value)} {value!r}")
    return value


def _name(tp: Any) -> str:
    if get_origin(tp) is Literal:
        return "one of " + ", ".join(repr(a) for a in get_args(tp))
    return {bool: "true or false", int: "an integer", float: "a number", str: "a string"}.get(
        tp, str(tp)
    )


# ----- writing ---------------------------------------------------------------------------------


def _write_table(config: Any, prefix: str, lines: list[str], *, comments: bool) -> None:
    docs = docs_of(type(config)) if comments else {}
    tables = []
    for f in dataclasses.fields(config):
        if not f.init:
            continue
        value = getattr(config, f.name)
        if dataclasses.is_dataclass(value):
            tables.append((f.name, value))
            continue
        doc = docs.get(f.name)
        if doc is not None and doc.summary:
            lines.append(f"# {doc.summary}")
        if value is None:
            lines.append(f"# {f.name} = (unset)")
        else:
            lines.append(f"{f.name} = {_toml_value(value)}")
    for name, sub in tables:
        lines.append("")
        doc = docs.get(name)
        if doc is not None and doc.summary:
            lines.append(f"# {doc.summary}")
        lines.append(f"[{prefix}{name}]")
        _write_table(sub, f"{prefix}{name}.", lines, comments=comments)


def _toml_value(value: Any) -> str:
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, int):
        return str(value)
    if isinstance(value, float):
        if math.isnan(value):
            return "nan"
        if math.isinf(value):
            return "inf" if value > 0 else "-inf"
        return repr(value)
    if isinstance(value, str):
        return json.dumps(value, ensure_ascii=False).replace("\x7f", "\\u007f")
    if isinstance(value, (tuple, list)):
        return "[" + ", ".join(_toml_value(v) for v in value) + "]"
    raise TypeError(f"no TOML form for {type(value).__name__} {value!r}")


__all__ = ["apply_config_data", "config_to_toml", "load_config", "read_config_file"]
