"""Errors a user can cause. Each message says what was expected, what came, and how to fix it."""

from __future__ import annotations


class PrefLabError(Exception):
    """Base class of every error PrefLab raises on bad input or a broken environment."""


class ConfigError(PrefLabError, ValueError):
    """A configuration value is out of range or inconsistent with another one."""


class DataError(PrefLabError, ValueError):
    """Arrays, labels, judgements or files have the wrong shape, range or content."""


class StoreError(PrefLabError, RuntimeError):
    """The feedback store is corrupt, foreign, of another schema version, or unreachable."""


class ConflictError(StoreError):
    """A write conflicts with what is stored: e.g. undoing a judgement the trainer already
    collected, or reusing an idempotency key for a different answer."""


class QuotaReachedError(ConflictError):
    """A capped annotator (a study participant at their answer quota) sent one answer more:
    :class:`preflab.store.answers.Quota`."""


class SourceError(PrefLabError, RuntimeError):
    """A feedback source (teacher, crowd, LLM server, studio) failed to answer."""
