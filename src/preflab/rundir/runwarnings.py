"""Warnings a run raises about itself: each kind once, loudly, and kept for the summary.

A run that trains on nothing (no labels, only ties, unparseable answers, NaN metrics) must not
end with a normal-looking table. Components that notice such a thing call
:meth:`RunWarnings.warn` with a kind and a message that says the cause and the fix in CLI terms;
the first message of each kind goes to ``logging.warning`` (the terminal) and into the list the
run writes to ``summary.json`` (``warnings``) and shows in the final table. Later warnings of the
same kind are counted, not repeated. Imports nothing of PrefLab, so any layer may use it.
"""

from __future__ import annotations

import logging
from collections.abc import Iterable, Sequence
from typing import Protocol, runtime_checkable

log = logging.getLogger("preflab")


class RunWarnings:
    """Every warning of one run: the first message of each kind, in the order they came."""

    def __init__(self, items: Iterable[Sequence[str]] = ()) -> None:
        self._messages: dict[str, str] = {}
        self._counts: dict[str, int] = {}
        self.load_state(items)

    def load_state(self, items: Iterable[Sequence[str]]) -> None:
        """Add ``[kind, message]`` pairs of :meth:`state` (a resumed run): known from now on,
        not logged again."""
        for kind, message in items:
            self._messages.setdefault(kind, message)
            self._counts[kind] = self._counts.get(kind, 0) + 1

    def warn(self, kind: str, message: str) -> bool:
        """Record a warning of ``kind``; log it when it is the first of its kind. True when it
        was new."""
        self._counts[kind] = self._counts.get(kind, 0) + 1
        if kind in self._messages:
            return False
        self._messages[kind] = message
        log.warning("%s", message)
        return True

    def restate(self, kind: str, message: str) -> None:
        """Replace the message of a known ``kind`` (in its place) with what holds now; not
        logged (the run's end says it in the summary)."""
        if kind in self._messages:
            self._messages[kind] = message

    def withdraw(self, kind: str) -> None:
        """Forget ``kind``: what it warned about no longer holds (a later warning of the kind
        is new again)."""
        self._messages.pop(kind, None)
        self._counts.pop(kind, None)

    def __contains__(self, kind: object) -> bool:
        return kind in self._messages

    def __len__(self) -> int:
        return len(self._messages)

    @property
    def messages(self) -> list[str]:
        """The messages, one per kind, in the order they first came."""
        return list(self._messages.values())

    def state(self) -> list[list[str]]:
        """JSON-able ``[kind, message]`` pairs (checkpoints)."""
        return [[k, m] for k, m in self._messages.items()]

    def count(self, kind: str) -> int:
        """How often ``kind`` was warned about (first message included)."""
        return self._counts.get(kind, 0)


@runtime_checkable
class ReportsWarnings(Protocol):
    """A part (e.g. the LLM judge) that reports warnings into the run's list: the loop hands it
    its own :class:`RunWarnings`."""

    warnings: RunWarnings
    """Where the part's warnings go."""


def short(text: str | None, limit: int = 80) -> str:
    """``text`` as one line of at most ``limit`` characters, quoted (None: 'no text')."""
    if text is None:
        return "no text"
    flat = " ".join(str(text).split())
    return repr(flat if len(flat) <= limit else flat[: limit - 1] + "…")
