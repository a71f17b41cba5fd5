"""A run's options as a TOML file: ``preflab train --config FILE.toml`` reads one and
``preflab train [flags] --print-config [FILE]`` writes one.

The file holds :class:`~preflab.config.TrainConfig`'s fields by their Python names, with a table
per sub-config (``[teacher]``, ``[reward]``, ...). Keys left out keep their defaults; unknown keys
and values of the wrong type are refused, all in one message, with suggestions. TOML has no
null: a field whose value is None is written as a comment and read back as its default.
"""

from __future__ import annotations

import dataclasses
import json
import math
import tomllib
from pathlib import Path
from typing import Any, TypeVar

from preflab.config import TrainConfig
from preflab.config.values import apply_config_data
from preflab.errors import ConfigError
from preflab.fielddocs import docs_of

T = TypeVar("T")


def read_config_file(path: str | Path) -> dict[str, Any]:
    """The TOML file at ``path`` (UTF-8, a byte-order mark accepted) as a dict (a PrefLab error
    when missing, a folder or not TOML)."""
    p = Path(path)
    if p.is_dir():
        raise ConfigError(
            f"--config {path} is a folder, not a file; pass the TOML file itself (write one with "
            "`preflab train --print-config FILE.toml`)"
        )
    if not p.is_file():
        raise ConfigError(
            f"--config {path}: no such file; write one with `preflab train --print-config {path}` "
            "and edit it"
        )
    try:  # utf-8-sig: a byte-order mark (as Windows Notepad saves) is accepted
        return tomllib.loads(p.read_text(encoding="utf-8-sig"))
    except (tomllib.TOMLDecodeError, UnicodeDecodeError) as exc:
        raise ConfigError(f"--config {path}: not a TOML file: {exc}") from exc


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
