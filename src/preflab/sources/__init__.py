"""Feedback sources: everything that answers queries, through ``submit`` and ``collect``."""

from preflab.sources.base import FeedbackSource
from preflab.sources.human import StoreSource

__all__ = ["FeedbackSource", "StoreSource"]
