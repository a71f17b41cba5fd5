"""Aggregation: judgements and ratings in, training labels out, through one protocol.

Every aggregator has a ``name`` and ``labels(feedback: Feedback) -> list[Label]``:
identity, multi-query confidence, majority, SML (crowds), window (Pref-GUIDE Algorithm 1)
and voting (Algorithm 2); :func:`make_aggregator` builds them by name. Repeated answers:
the latest judgement per (annotator, query) counts (see :mod:`preflab.aggregate.protocol`).
Each query's kind (:mod:`preflab.kinds`) owns its label rule: group queries become max(m, n)
pairs, rankings all pairs of their clips.

The crowd estimators work on ``votes``: an (annotators × queries) array (dense or
scipy.sparse) of +1 (first segment preferred), −1 (second preferred) and 0 (missing, skipped
or tie).

The names below load on first use (PEP 562), so that a command that only reads or writes
labels (``preflab export``, ``preflab crowd aggregate``) does not import torch through the
Pref-GUIDE aggregators.
"""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING, Any

# names that are also the names of their modules load at once (light: NumPy and SciPy): a lazy
# name would lose to the submodule, which importing binds on the package under the same name
from preflab.aggregate.majority import majority
from preflab.aggregate.sml import SMLResult, sml

if TYPE_CHECKING:
    from preflab.aggregate.adapter import (
        CrowdAggregator,
        MajorityAggregator,
        SMLAggregator,
        VotesTable,
        votes_table,
    )
    from preflab.aggregate.combined import CombinedAggregator
    from preflab.aggregate.factory import AGGREGATORS, AggregatorName, make_aggregator
    from preflab.aggregate.identity import ConfidenceAggregator, IdentityAggregator
    from preflab.aggregate.protocol import Aggregator, Feedback, answer_key, latest
    from preflab.aggregate.scalar import ItemValues, VotingAggregator, WindowAggregator, item_values
    from preflab.aggregate.viewpoints import Viewpoints, aggregate_groups, find_viewpoints
    from preflab.aggregate.votes import as_votes, votes_from_probabilities

_WHERE = {
    "CrowdAggregator": "preflab.aggregate.adapter",
    "MajorityAggregator": "preflab.aggregate.adapter",
    "SMLAggregator": "preflab.aggregate.adapter",
    "VotesTable": "preflab.aggregate.adapter",
    "votes_table": "preflab.aggregate.adapter",
    "CombinedAggregator": "preflab.aggregate.combined",
    "AGGREGATORS": "preflab.aggregate.factory",
    "AggregatorName": "preflab.aggregate.factory",
    "make_aggregator": "preflab.aggregate.factory",
    "ConfidenceAggregator": "preflab.aggregate.identity",
    "IdentityAggregator": "preflab.aggregate.identity",
    "Aggregator": "preflab.aggregate.protocol",
    "Feedback": "preflab.aggregate.protocol",
    "answer_key": "preflab.aggregate.protocol",
    "latest": "preflab.aggregate.protocol",
    "ItemValues": "preflab.aggregate.scalar",
    "VotingAggregator": "preflab.aggregate.scalar",
    "WindowAggregator": "preflab.aggregate.scalar",
    "item_values": "preflab.aggregate.scalar",
    "Viewpoints": "preflab.aggregate.viewpoints",
    "aggregate_groups": "preflab.aggregate.viewpoints",
    "find_viewpoints": "preflab.aggregate.viewpoints",
    "as_votes": "preflab.aggregate.votes",
    "votes_from_probabilities": "preflab.aggregate.votes",
}
"""Name → the module that defines it."""

__all__ = [
    "AGGREGATORS",
    "Aggregator",
    "AggregatorName",
    "CombinedAggregator",
    "ConfidenceAggregator",
    "CrowdAggregator",
    "Feedback",
    "IdentityAggregator",
    "ItemValues",
    "MajorityAggregator",
    "SMLAggregator",
    "SMLResult",
    "Viewpoints",
    "VotesTable",
    "VotingAggregator",
    "WindowAggregator",
    "aggregate_groups",
    "answer_key",
    "as_votes",
    "find_viewpoints",
    "item_values",
    "latest",
    "majority",
    "make_aggregator",
    "sml",
    "votes_from_probabilities",
    "votes_table",
]


def __getattr__(name: str) -> Any:
    where = _WHERE.get(name)
    if where is None:
        raise AttributeError(f"module 'preflab.aggregate' has no attribute {name!r}")
    value = getattr(importlib.import_module(where), name)
    globals()[name] = value
    return value


def __dir__() -> list[str]:
    return sorted([*globals(), *_WHERE])
