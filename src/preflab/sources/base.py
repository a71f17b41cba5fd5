"""The feedback-source protocol.

A source has two verbs: ``submit(queries, segments)`` hands it queries (with the segments they
name) and ``collect()`` returns the judgements that have arrived since the last call.
Synthetic teachers and LLM judges answer at once; people answer later through the store.
The loop never blocks on a source.

Besides the verbs a source declares what the loop relies on, with no duck typing:

- ``persists``: True when the judgements ``collect`` returns are already in the store (the
  studio's, written by another process); False when the loop must store them.
- ``state()`` / ``load_state(state)``: everything needed to continue where the source was
  after a restart, as JSON-serialisable data: the cursor of what it has read (a store
  sequence number), its generator's ``bit_generator.state`` and the judgements it made but
  nobody collected yet. Loading the state into a freshly built source (same constructor
  arguments) makes it give exactly the answers the saved one would have given.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any, Protocol, runtime_checkable

import numpy as np

from preflab.errors import DataError
from preflab.records import Judgement, Query, Segment


@runtime_checkable
class FeedbackSource(Protocol):
    """Anything that turns queries into judgements, now or later."""

    persists: bool
    """True when ``collect`` returns judgements that are already stored (don't store twice)."""

    def submit(self, queries: Sequence[Query], segments: Mapping[str, Segment]) -> None:
        """Ask ``queries``; ``segments`` maps every id they name to its segment."""
        ...

    def collect(self) -> list[Judgement]:
        """Judgements that arrived since the last call (may be empty; never blocks)."""
        ...

    def state(self) -> dict[str, Any]:
        """JSON-serialisable state: cursor, RNG ``bit_generator.state``, pending judgements."""
        ...

    def load_state(self, state: Mapping[str, Any]) -> None:
        """Continue from a ``state()`` of a source built with the same arguments."""
        ...


@runtime_checkable
class ReportsUsage(Protocol):
    """A source that asks a paid or metered server (the LLM and vision-language judges): what
    it used, for summary.json's ``ai_judge`` (and a router's ``ai_usage``)."""

    def usage_report(self) -> dict[str, Any]:
        """Requests, tokens, seconds and cost so far."""
        ...


@runtime_checkable
class UndoWindow(Protocol):
    """A source whose answers stay undoable for a while before it hands them over (the studio:
    :class:`preflab.sources.human.StoreSource`). At the run's end the loop closes the window,
    so that every answer given counts (DESIGN.md, the studio's queue)."""

    def close_undo(self) -> None:
        """The run ends: every answer stored so far counts now and can no longer be undone;
        the next ``collect`` returns them without waiting for their undo windows."""
        ...


@runtime_checkable
class Screens(Protocol):
    """A source that decides, before people are offered a round's queries, which of them
    people will not answer (the router: those it sends to the reward model or the AI, or to
    nobody). The loop stores the queries with those withdrawn, in one transaction, and then
    submits them, so the studio never offers people a query that is not theirs."""

    def screen(self, queries: Sequence[Query], segments: Mapping[str, Segment]) -> list[str]:
        """Decide who answers ``queries`` (``submit`` then hands them out as decided) and
        return the ids of those people are not to be offered."""
        ...


@runtime_checkable
class WrapsSources(Protocol):
    """A source that asks other sources (the router): it closes an undo window only when one
    of them has one (:func:`undo_window_of`)."""

    @property
    def has_undo_window(self) -> bool:
        """Whether a source it asks has an undo window (its ``close_undo`` passes it on)."""
        ...


def undo_window_of(source: object) -> UndoWindow | None:
    """``source``'s undo window for the loop's end (:class:`UndoWindow`): itself when it has one,
    or when it asks a source that has one (:class:`WrapsSources`); None otherwise."""
    if not isinstance(source, UndoWindow):
        return None
    if isinstance(source, WrapsSources) and not source.has_undo_window:
        return None
    return source


def judgement_json(j: Judgement) -> dict[str, Any]:
    """A judgement as a JSON-ready dict (the inverse of :meth:`Judgement.from_row`)."""
    return j.to_row()


def pending_json(pending: Sequence[Judgement]) -> list[dict[str, Any]]:
    """Judgements not collected yet, for ``state()``."""
    return [judgement_json(j) for j in pending]


def pending_from_json(rows: Sequence[Mapping[str, Any]]) -> list[Judgement]:
    """Judgements back from :func:`pending_json`."""
    return [Judgement.from_row(r) for r in rows]


def check_state(state: Mapping[str, Any], kind: str, keys: Sequence[str]) -> None:
    """Raise a DataError unless ``state`` is a ``kind`` source's state with ``keys``."""
    got = state.get("kind")
    if got != kind:
        raise DataError(
            f"this is the state of a {got!r} source, not of a {kind!r} source; load a state "
            "into a source of the kind that saved it"
        )
    missing = [k for k in keys if k not in state]
    if missing:
        raise DataError(f"{kind} source state lacks {missing}; save it with source.state()")


def rng_json(rng: np.random.Generator) -> dict[str, Any]:
    """The generator's ``bit_generator.state`` (plain ints and strings: JSON-ready)."""
    return dict(rng.bit_generator.state)


def restore_rng(rng: np.random.Generator, state: Mapping[str, Any]) -> None:
    """Set ``rng`` to a state from :func:`rng_json` (same bit generator kind)."""
    want = rng.bit_generator.state["bit_generator"]
    if state.get("bit_generator") != want:
        raise DataError(
            f"saved generator state is for {state.get('bit_generator')!r}, the source uses "
            f"{want!r}; build the source with the same kind of np.random.Generator"
        )
    rng.bit_generator.state = dict(state)
