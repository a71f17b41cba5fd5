"""Groupwise comparison (paper 000): behaviour tree, group labels, groupwise active learning
and the simulated decision makers of its simulation study.

The group label rule and the group checks belong to the group kind (:mod:`preflab.kinds.group`)
and are re-exported here. The other names load on first use (PEP 562), so that importing a light
submodule (as the studio server does) does not import torch through the selector and the
deciders."""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING, Any

from preflab.kinds.group import GROUP_LIMIT, check_groups, expand

if TYPE_CHECKING:
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
    from preflab.groupwise.scoring import group_score, group_score_matrix
    from preflab.groupwise.selector import GroupwiseConfig, GroupwiseSelector
    from preflab.groupwise.tree import BehaviourTree, SuggestionEdge, TreeNode, suggestion_edges

_WHERE = {
    "DM_KINDS": "deciders",
    "DecisionConfig": "deciders",
    "DecisionMaker": "deciders",
    "DecisionStats": "deciders",
    "InteractiveSelector": "deciders",
    "decide": "deciders",
    "decide_groups": "deciders",
    "ExplorationView": "exploration",
    "build_exploration": "exploration",
    "FeatureConfig": "features",
    "behaviour_distances": "features",
    "behaviour_features": "features",
    "dtw_distances": "features",
    "group_score": "scoring",
    "group_score_matrix": "scoring",
    "GroupwiseConfig": "selector",
    "GroupwiseSelector": "selector",
    "BehaviourTree": "tree",
    "SuggestionEdge": "tree",
    "TreeNode": "tree",
    "suggestion_edges": "tree",
}

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


def __getattr__(name: str) -> Any:
    where = _WHERE.get(name)
    if where is None:
        raise AttributeError(f"module 'preflab.groupwise' has no attribute {name!r}")
    value = getattr(importlib.import_module(f"preflab.groupwise.{where}"), name)
    globals()[name] = value
    return value


def __dir__() -> list[str]:
    return sorted([*globals(), *_WHERE])
