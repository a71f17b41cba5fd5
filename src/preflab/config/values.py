"""Config values put into a config dataclass, checked: every unknown key and every value of the
wrong type is reported in one message, with suggestions. The TOML config file
(:mod:`preflab.config.file`), a run's ``config.json`` (:meth:`preflab.config.TrainConfig.from_json`)
and a sweep's values (:mod:`preflab.sweep.spec`) are all read through
:func:`apply_config_data`."""

from __future__ import annotations

import dataclasses
import difflib
import types
from collections.abc import Mapping
from typing import Any, Literal, TypeVar, Union, cast, get_args, get_origin, get_type_hints

from preflab.errors import ConfigError

T = TypeVar("T")

NON_FINITE = ("Infinity", "-Infinity", "NaN")
"""How a run's JSON files write non-finite floats (strict JSON has no such numbers)."""


def apply_config_data(base: T, data: Mapping[str, Any], *, where: str) -> T:
    """``base`` (a config dataclass) with the values of ``data`` (a parsed TOML or JSON document) put
    in.

    Every unknown key and wrongly typed value is reported in one :class:`ConfigError`, prefixed
    with ``where`` (e.g. ``--config run.toml``)."""
    errors: list[str] = []
    out = cast(T, _apply(base, data, prefix="", errors=errors))  # a copy of base's type
    if errors:
        raise ConfigError(f"{where}: " + "; ".join(errors))
    return out


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
        if value is None and type(None) in args:  # JSON's null (TOML has none)
            return None
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
    if tp is float and isinstance(value, str) and value in NON_FINITE:  # config.json's inf
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
