"""Groupwise comparison (paper 000): behaviour tree, group labels, groupwise active learning
and the simulated decision makers of its simulation study."""

from preflab.groupwise._checks import GROUP_LIMIT, check_groups
from preflab.groupwise.deciders import (
    DM_KINDS,
    DecisionConfig,
    DecisionMaker,
    DecisionStats,
    InteractiveSelector,
    decide,
    decide_groups,
)
from preflab.groupwise.exploration import ExplorationView, build_exploration
from preflab.groupwise.features import (
    FeatureConfig,
    behaviour_distances,
    behaviour_features,
    dtw_distances,
)
from preflab.groupwise.labels import expand
from preflab.groupwise.scoring import group_score, group_score_matrix
from preflab.groupwise.selector import GroupwiseConfig, GroupwiseSelector
from preflab.groupwise.tree import BehaviourTree, SuggestionEdge, TreeNode, suggestion_edges

__all__ = [
    "DM_KINDS",
    "GROUP_LIMIT",
    "BehaviourTree",
    "DecisionConfig",
    "DecisionMaker",
    "DecisionStats",
    "ExplorationView",
    "FeatureConfig",
    "GroupwiseConfig",
    "GroupwiseSelector",
    "InteractiveSelector",
    "SuggestionEdge",
    "TreeNode",
    "behaviour_distances",
    "behaviour_features",
    "build_exploration",
    "check_groups",
    "decide",
    "decide_groups",
    "dtw_distances",
    "expand",
    "group_score",
    "group_score_matrix",
    "suggestion_edges",
]
