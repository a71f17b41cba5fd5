"""``preflab bench NAME [ARGS]``: run ``preflab_bench.NAME.main(ARGS)``.

The benchmarks and paper reproductions are their own package, ``preflab_bench`` in the
checkout's ``benchmarks/`` (not in the preflab wheel): ``bash scripts/setup.sh --dev`` installs
it, or ``pip install -e benchmarks`` beside an installed ``preflab[bench]``.
"""

from __future__ import annotations

import difflib
import importlib
import pkgutil
from types import ModuleType

from preflab.errors import ConfigError

NOT_INSTALLED = (
    "the benchmarks are not installed: they live in the checkout's benchmarks/ (package "
    "preflab_bench), outside the preflab wheel; install them with `bash scripts/setup.sh --dev`, "
    "or `pip install -e benchmarks` in a checkout with preflab[bench] installed"
)


def _package() -> ModuleType:
    try:
        return importlib.import_module("preflab_bench")
    except ModuleNotFoundError as exc:
        if exc.name != "preflab_bench":
            raise
        raise ConfigError(NOT_INSTALLED) from None


def available() -> list[str]:
    return sorted(
        m.name for m in pkgutil.iter_modules(_package().__path__) if not m.name.startswith("_")
    )


def listing() -> str:
    """The text of ``preflab bench --help``: each benchmark, what it does, roughly how long."""
    names = available()
    benchmarks: dict[str, tuple[str, str]] = _package().BENCHMARKS
    width = max(len(n) for n in names) + 2
    rows = []
    for n in names:
        runtime, text = benchmarks.get(n, ("", ""))
        rows.append(f"  {n:<{width}}{runtime:<14}{text}")
    return (
        "usage: preflab bench NAME [ARGS]  (preflab bench NAME --help for its options)\n\n"
        "Benchmarks and paper reproductions; tables go to benchmarks/results/. Run times are\n"
        "rough, for the default arguments on a 2-core machine.\n\n"
        f"  {'benchmark':<{width}}{'run time':<14}what it measures\n" + "\n".join(rows)
    )


def main(argv: list[str]) -> int:
    names = available()
    if not argv or argv[0] in ("-h", "--help"):
        print(listing())
        return 0
    name = argv[0]
    if name not in names:
        close = difflib.get_close_matches(name, names, n=3, cutoff=0.6)
        hint = f" (did you mean {' or '.join(close)}?)" if close else ""
        raise ConfigError(
            f"unknown benchmark {name!r}{hint}; `preflab bench --help` lists them all"
        )
    module = importlib.import_module(f"preflab_bench.{name}")
    return int(module.main(argv[1:]) or 0)
