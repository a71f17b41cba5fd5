"""Selectors that ask about segments they made themselves (not recorded rollouts).

Paper 004 ranks a fixed set of random consecutive state pairs, sampled from every stage of the
task rather than from the agent's rollouts (:class:`preflab.llm.TransitionSelector`). Such a
selector also implements :class:`SegmentMaker`; the loop then takes the segments its queries
name from :meth:`SegmentMaker.made_segments` as well as from the recorded candidates, and
stores them like any segment.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Protocol, runtime_checkable

from preflab.records import Segment


@runtime_checkable
class SegmentMaker(Protocol):
    """A selector whose queries may name segments it made (e.g. sampled states)."""

    def made_segments(self) -> Mapping[str, Segment]:
        """Every segment the selector made so far, by id."""
        ...
