"""Aggregation: judgements and ratings in, training labels out, through one protocol.

Every aggregator has a ``name`` and ``labels(feedback: Feedback) -> list[Label]``:
identity, multi-query confidence, majority, SML (crowds), window (Pref-GUIDE Algorithm 1)
and voting (Algorithm 2); :func:`make_aggregator` builds them by name. Repeated answers:
the latest judgement per (annotator, query) counts (see :mod:`preflab.aggregate.protocol`).
Group queries become max(m, n) pairs through :func:`expand_group`.

The crowd estimators work on ``votes``: an (annotators × queries) array (dense or
scipy.sparse) of +1 (first segment preferred), −1 (second preferred) and 0 (missing, skipped
or tie).
"""

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
from preflab.aggregate.majority import majority
from preflab.aggregate.protocol import Aggregator, Feedback, answer_key, latest
from preflab.aggregate.scalar import ItemValues, VotingAggregator, WindowAggregator, item_values
from preflab.aggregate.sml import SMLResult, sml
from preflab.aggregate.viewpoints import Viewpoints, aggregate_groups, find_viewpoints
from preflab.aggregate.votes import as_votes, votes_from_probabilities
from preflab.groupwise.labels import expand_group

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
    "expand_group",
    "find_viewpoints",
    "item_values",
    "latest",
    "majority",
    "make_aggregator",
    "sml",
    "votes_from_probabilities",
    "votes_table",
]
