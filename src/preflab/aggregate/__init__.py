"""Aggregating crowds: majority vote, Spectral Meta-Learner, minority viewpoints.

``votes`` everywhere is an (annotators × queries) array (dense or scipy.sparse) of +1 (first
segment preferred), −1 (second preferred) and 0 (missing, skipped or tie).
"""

from preflab.aggregate.adapter import CrowdAggregator, VotesTable, votes_table
from preflab.aggregate.majority import majority
from preflab.aggregate.sml import SMLResult, sml
from preflab.aggregate.viewpoints import Viewpoints, aggregate_groups, find_viewpoints
from preflab.aggregate.votes import as_votes, votes_from_probabilities

__all__ = [
    "CrowdAggregator",
    "SMLResult",
    "Viewpoints",
    "VotesTable",
    "aggregate_groups",
    "as_votes",
    "find_viewpoints",
    "majority",
    "sml",
    "votes_from_probabilities",
    "votes_table",
]
