"""Where things are: the checkout, and the folders that hold ``preflab`` and ``preflab_bench``
(a subprocess that must import this very code gets both on its ``PYTHONPATH``)."""

from __future__ import annotations

import os
from pathlib import Path

import preflab

SRC = Path(preflab.__file__).resolve().parents[1]
"""The folder that holds the ``preflab`` package in use (``src/`` in a checkout)."""
BENCH = Path(__file__).resolve().parents[1]
"""The folder that holds ``preflab_bench`` (``benchmarks/`` in a checkout)."""
REPO = BENCH.parent
"""The checkout."""


def pythonpath(env: dict[str, str]) -> str:
    """``env``'s PYTHONPATH with :data:`SRC` and :data:`BENCH` first (so no module in
    ``benchmarks/`` may take a standard library name: it would shadow it there)."""
    return os.pathsep.join(p for p in (str(SRC), str(BENCH), env.get("PYTHONPATH")) if p)
