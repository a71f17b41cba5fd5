"""One round's exploration view as data: tree, suggestions, group suggestions, history.

:func:`build_exploration` is the one implementation of the view: the studio's round cache
(:mod:`preflab.studio.groupwise_cache`) calls it with the members' returns the trainer
published, and ``preflab bench groupwise_speed`` times it with a live ensemble.
"""

from __future__ import annotations

import time
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from preflab.records import Label, Segment
from preflab.reward.protocol import RewardModel, pair_variance
from preflab.selection.features import behaviour_distances
from preflab.selection.groupwise import GroupwiseConfig, pick_pairs
from preflab.selection.scoring import group_score_matrix
from preflab.selection.tree import BehaviourTree, SuggestionEdge, suggestion_edges


@dataclass(frozen=True, kw_only=True)
class ExplorationView:
    """Everything the studio's exploration view draws for one round."""

    ids: list[str]
    """The behaviours' segment ids, in row order."""
    distances: np.ndarray
    """(N, N) DTW distances between the behaviours."""
    tree: BehaviourTree
    """The n-ary behaviour tree over ``distances``."""
    pair_variance: np.ndarray | None
    """(N, N) ensemble disagreement, None without an ensemble (or member returns)."""
    suggestions: list[SuggestionEdge]
    """Behaviour pairs with the highest disagreement, best first."""
    groups: list[tuple[int, ...]]
    """Candidate groups: rows of the dendrogram subtrees of min_size..max_size behaviours."""
    ranked: list[tuple[int, int, float]]
    """(group i, group j, s_g) of the suggested group pairs, best first."""
    history: list[Label]
    """The annotator's earlier labels drawn as history edges."""
    timings: dict[str, float] = field(default_factory=dict)
    """Seconds spent in 'dtw', 'tree', 'variance', 'suggestions'."""

    @property
    def group_suggestions(self) -> list[dict[str, Any]]:
        """The ranked group pairs as {'a': ids, 'b': ids, 'score': s_g}, best first."""
        return [
            {
                "a": [self.ids[r] for r in self.groups[i]],
                "b": [self.ids[r] for r in self.groups[j]],
                "score": s,
            }
            for i, j, s in self.ranked
        ]

    @property
    def mean_distance(self) -> float:
        """Mean DTW distance over all pairs of behaviours (1.0 with fewer than two)."""
        n = len(self.ids)
        if n < 2:
            return 1.0
        return float(self.distances[np.triu_indices(n, k=1)].mean())

    def to_json(self) -> dict[str, Any]:
        """The D3-ready dict of :meth:`BehaviourTree.to_json` with this view's edges."""
        return self.tree.to_json(
            suggestions=self.suggestions,
            history=self.history,
            group_suggestions=self.group_suggestions,
        )

    def summary_json(self) -> dict[str, Any]:
        """:meth:`BehaviourTree.to_json` without heights, every parent with its representative
        members (``reps``) and the mean distance between its members relative to the pool's
        mean pair (``spread``): what a person can read off the tree."""
        view = self.tree.to_json()
        by_id = {nd.id: nd for nd in self.tree.nodes}
        pool_mean = self.mean_distance or 1.0

        def annotate(node: dict[str, Any]) -> None:
            node.pop("height", None)  # a raw DTW height means nothing to a person
            if "children" in node:
                rows = list(by_id[node["id"]].rows)
                sub = self.distances[np.ix_(rows, rows)]
                node["reps"] = [self.ids[rows[k]] for k in representatives(sub)]
                if len(rows) >= 2:
                    node["spread"] = round(
                        float(sub[np.triu_indices(len(rows), 1)].mean()) / pool_mean, 3
                    )
                for ch in node["children"]:
                    annotate(ch)

        if view["root"] is not None:
            annotate(view["root"])
        return view


def representatives(d: np.ndarray) -> list[int]:
    """Rows of the medoid of the (n, n) distances ``d``, then of the member farthest from it,
    then of the one farthest from both."""
    n = d.shape[0]
    med = int(np.argmin(d.sum(1)))
    if n == 1:
        return [med]
    far1 = int(np.argmax(d[med]))
    if n == 2:
        return [med, far1]
    both = np.minimum(d[med], d[far1])
    both[[med, far1]] = -1
    return [med, far1, int(np.argmax(both))]


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
    member_returns: np.ndarray | None = None,
) -> ExplorationView:
    """DTW distances → tree → ensemble disagreement → pair and group suggestions.

    The disagreement comes from ``member_returns`` ((members, N) returns of the segments,
    e.g. published with a round's pool) when given, else from ``ensemble``; with neither
    (or fewer than two members) there are no suggestions.
    """
    cfg = config or GroupwiseConfig()
    rng = rng if rng is not None else np.random.default_rng(0)
    t: dict[str, float] = {}
    ids = [s.id for s in segments]
    t0 = time.perf_counter()
    d = (
        behaviour_distances(segments, cfg.features)
        if len(segments) >= 2
        else np.zeros((len(segments), len(segments)))
    )
    t["dtw"] = time.perf_counter() - t0
    t0 = time.perf_counter()
    tree = BehaviourTree.build(d, ids, method=cfg.method, levels=levels)
    groups = tree.binary_groups(min_size=cfg.min_size, max_size=cfg.max_size)
    t["tree"] = time.perf_counter() - t0
    v = None
    returns = member_returns
    if returns is None and ensemble is not None and len(segments) >= 2:
        t0 = time.perf_counter()
        from preflab.reward.batch import SegmentBatch  # torch only when an ensemble is used

        returns = ensemble.segment_returns(SegmentBatch.from_segments(segments))
        t["variance"] = time.perf_counter() - t0
    if returns is not None:
        t0 = time.perf_counter()
        r = np.asarray(returns, dtype=np.float64)
        if r.ndim == 2 and r.shape[1] == len(ids) and r.shape[0] >= 2:
            v = pair_variance(r)
        t["variance"] = t.get("variance", 0.0) + time.perf_counter() - t0
    sugg: list[SuggestionEdge] = []
    ranked: list[tuple[int, int, float]] = []
    if v is not None:
        t0 = time.perf_counter()
        sugg = suggestion_edges(v, ids, n_suggestions)
        if len(groups) >= 2 and n_group_suggestions > 0:
            scores = group_score_matrix(v, groups, cfg.eps)
            for i, j in pick_pairs(scores, n_group_suggestions, cfg.max_node_uses, rng):
                ranked.append((i, j, float(scores[i, j])))
        t["suggestions"] = time.perf_counter() - t0
    return ExplorationView(
        ids=ids,
        distances=d,
        tree=tree,
        pair_variance=v,
        suggestions=sugg,
        groups=groups,
        ranked=ranked,
        history=list(history),
        timings=t,
    )
