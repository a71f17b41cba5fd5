"""PrefLab: reinforcement learning from human and AI preference feedback.

``preflab.train``, ``preflab.resume``, ``preflab.load_run`` and ``preflab.RunResult`` come from
:mod:`preflab.loop` (imported on first use, so ``import preflab`` stays light).
"""

from typing import Any

from preflab.errors import ConfigError, DataError, PrefLabError, SourceError, StoreError

__all__ = [
    "ConfigError",
    "DataError",
    "PrefLabError",
    "RunResult",
    "SourceError",
    "StoreError",
    "load_run",
    "resume",
    "train",
]
__version__ = "0.1.0"

_LOOP = ("RunResult", "load_run", "resume", "train")


def __getattr__(name: str) -> Any:
    if name in _LOOP:
        from preflab import loop

        return getattr(loop, name)
    raise AttributeError(f"module 'preflab' has no attribute {name!r}")
