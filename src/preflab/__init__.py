"""PrefLab: reinforcement learning from human and AI preference feedback.

``preflab.train``, ``preflab.resume`` and ``preflab.load_run`` come from :mod:`preflab.runs`,
``preflab.RunResult`` from :mod:`preflab.loop`, ``preflab.load_reward_model`` from
:mod:`preflab.reward.modelfiles` (imported on first use, so ``import preflab``
stays light).
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
    "load_reward_model",
    "load_run",
    "resume",
    "train",
]
__version__ = "0.1.0"

_RUNS = ("load_run", "resume", "train")


def __getattr__(name: str) -> Any:
    if name in _RUNS:
        from preflab import runs

        return getattr(runs, name)
    if name == "RunResult":
        from preflab.loop import RunResult

        return RunResult
    if name == "load_reward_model":
        from preflab.reward.modelfiles import load_reward_model

        return load_reward_model
    raise AttributeError(f"module 'preflab' has no attribute {name!r}")
