"""``preflab bench NAME [ARGS]``: run ``preflab.bench.NAME.main(ARGS)``."""

from __future__ import annotations

import importlib
import pkgutil

import preflab.bench
from preflab.errors import ConfigError


def available() -> list[str]:
    return sorted(
        m.name for m in pkgutil.iter_modules(preflab.bench.__path__) if not m.name.startswith("_")
    )


def main(argv: list[str]) -> int:
    names = available()
    if not argv or argv[0] in ("-h", "--help"):
        print(
            "usage: preflab bench NAME [ARGS]\n\nbenchmarks:\n" + "\n".join(f"  {n}" for n in names)
        )
        return 0
    name = argv[0]
    if name not in names:
        raise ConfigError(f"unknown benchmark {name!r}; expected one of {names}")
    module = importlib.import_module(f"preflab.bench.{name}")
    return int(module.main(argv[1:]) or 0)
