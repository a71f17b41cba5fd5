"""Query selection: which pairs (or groups) to ask about.

The Selector protocol, random and disagreement selection live in :mod:`preflab.selection_base`
(re-exported here); groupwise selection in :mod:`preflab.groupwise`. This module only adds
:func:`make_selector`, so the imports go one way: selection → groupwise → selection_base.
"""

from __future__ import annotations

from preflab.errors import ConfigError
from preflab.groupwise import GroupwiseSelector
from preflab.selection_base import (
    DisagreementSelector,
    RandomSelector,
    Selector,
    unique_segments,
)

__all__ = [
    "DisagreementSelector",
    "RandomSelector",
    "Selector",
    "make_selector",
    "unique_segments",
]


def make_selector(name: str, **kwargs: object) -> Selector:
    """Selector by name: 'random', 'disagreement' (variance), 'entropy' or 'groupwise' (paper 000)."""
    if name == "random":
        return RandomSelector()
    if name == "disagreement":
        return DisagreementSelector(score="variance", **kwargs)  # type: ignore[arg-type]
    if name == "entropy":
        return DisagreementSelector(score="entropy", **kwargs)  # type: ignore[arg-type]
    if name == "groupwise":
        return GroupwiseSelector()
    raise ConfigError(
        f"unknown selector {name!r}; expected 'random', 'disagreement', 'entropy' or 'groupwise'"
    )
