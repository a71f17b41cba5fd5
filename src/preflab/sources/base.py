"""The feedback-source protocol.

A source has two verbs: ``submit(queries, segments)`` hands it queries (with the segments they
name) and ``collect()`` returns the judgements that have arrived since the last call.
Synthetic teachers and LLM judges answer at once; people answer later through the store.
The loop never blocks on a source.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Protocol, runtime_checkable

from preflab.records import Judgement, Query, Segment


@runtime_checkable
class FeedbackSource(Protocol):
    """Anything that turns queries into judgements, now or later."""

    def submit(self, queries: Sequence[Query], segments: Mapping[str, Segment]) -> None:
        """Ask ``queries``; ``segments`` maps every id they name to its segment."""
        ...

    def collect(self) -> list[Judgement]:
        """Judgements that arrived since the last call (may be empty; never blocks)."""
        ...
