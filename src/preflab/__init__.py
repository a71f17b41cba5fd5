"""PrefLab: reinforcement learning from human and AI preference feedback."""

from preflab.errors import ConfigError, DataError, PrefLabError, SourceError, StoreError

__all__ = ["ConfigError", "DataError", "PrefLabError", "SourceError", "StoreError"]
__version__ = "0.1.0"
