"""One round's exploration view as data: tree, suggestions, group suggestions, history."""

from __future__ import annotations

import time
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from preflab.groupwise.features import behaviour_distances
from preflab.groupwise.scoring import group_score_matrix
from preflab.groupwise.selector import GroupwiseConfig, pick_pairs
from preflab.groupwise.tree import BehaviourTree, SuggestionEdge, suggestion_edges
from preflab.records import Label, Segment
from preflab.reward.batch import SegmentBatch
from preflab.reward.protocol import RewardModel, pair_variance


@dataclass
class ExplorationView:
    """Everything the studio's exploration view draws for one round."""

    tree: BehaviourTree
    pair_variance: np.ndarray | None
    """(N, N) ensemble disagreement, None without an ensemble."""
    suggestions: list[SuggestionEdge]
    group_suggestions: list[dict[str, Any]]
    history: list[Label]
    timings: dict[str, float] = field(default_factory=dict)
    """Seconds spent in 'dtw', 'tree', 'variance', 'suggestions'."""

    def to_json(self) -> dict[str, Any]:
        """The D3-ready dict of :meth:`BehaviourTree.to_json` with this view's edges."""
        return self.tree.to_json(
            suggestions=self.suggestions,
            history=self.history,
            group_suggestions=self.group_suggestions,
        )


def build_exploration(
    segments: Sequence[Segment],
    ensemble: RewardModel | None = None,
    *,
    config: GroupwiseConfig | None = None,
    levels: int = 3,
    n_suggestions: int = 20,
    n_group_suggestions: int = 5,
    history: Sequence[Label] = (),
    rng: np.random.Generator | None = None,
) -> ExplorationView:
    """DTW distances → tree → ensemble disagreement → pair and group suggestions."""
    cfg = config or GroupwiseConfig()
    rng = rng if rng is not None else np.random.default_rng(0)
    t = {}
    t0 = time.perf_counter()
    d = behaviour_distances(segments, cfg.features, condensed=True)
    t["dtw"] = time.perf_counter() - t0
    t0 = time.perf_counter()
    ids = [s.id for s in segments]
    tree = BehaviourTree.build(d, ids, method=cfg.method, levels=levels)
    t["tree"] = time.perf_counter() - t0
    v = None
    sugg: list[SuggestionEdge] = []
    gsugg: list[dict[str, Any]] = []
    if ensemble is not None and len(segments) >= 2:
        t0 = time.perf_counter()
        returns = ensemble.segment_returns(SegmentBatch.from_segments(segments))
        if returns.shape[0] >= 2:
            v = pair_variance(returns)
        t["variance"] = time.perf_counter() - t0
    if v is not None:
        t0 = time.perf_counter()
        sugg = suggestion_edges(v, ids, n_suggestions)
        groups = tree.binary_groups(min_size=cfg.min_size, max_size=cfg.max_size)
        if len(groups) >= 2 and n_group_suggestions > 0:
            scores = group_score_matrix(v, groups, cfg.eps)
            for i, j in pick_pairs(scores, n_group_suggestions, cfg.max_node_uses, rng):
                gsugg.append(
                    {
                        "a": [ids[r] for r in groups[i]],
                        "b": [ids[r] for r in groups[j]],
                        "score": float(scores[i, j]),
                    }
                )
        t["suggestions"] = time.perf_counter() - t0
    return ExplorationView(
        tree=tree,
        pair_variance=v,
        suggestions=sugg,
        group_suggestions=gsugg,
        history=list(history),
        timings=t,
    )
