"""Groupwise query selection: the best pairs of tree groups by s_g (paper 000, §3.5)."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field

import numpy as np

from preflab.errors import ConfigError, DataError
from preflab.kinds.group import GROUP, GROUP_LIMIT
from preflab.records import Query, Segment, new_id
from preflab.reward.batch import SegmentBatch
from preflab.reward.protocol import RewardModel, pair_variance
from preflab.selection.features import FeatureConfig, behaviour_distances
from preflab.selection.scoring import group_score_matrix
from preflab.selection.tree import BehaviourTree


@dataclass(frozen=True, kw_only=True)
class GroupwiseConfig:
    """How candidate groups are formed and ranked."""

    features: FeatureConfig = field(default_factory=FeatureConfig)
    """Features and DTW options of the behaviour tree."""
    method: str = "average"
    """Linkage of the agglomerative clustering."""
    min_size: int = 2
    """Smallest group (a group needs ≥ 2 members for its intra variance)."""
    max_size: int = GROUP_LIMIT
    """Largest group (the paper's 8)."""
    max_node_uses: int = 1
    """How many of the queries of one call may use the same group."""
    eps: float = 1e-8
    """ε of s_g."""

    def __post_init__(self) -> None:
        if not 2 <= self.min_size <= self.max_size:
            raise ConfigError(
                f"need 2 ≤ min_size ≤ max_size, got {self.min_size} and {self.max_size}"
            )
        if self.max_node_uses < 1:
            raise ConfigError(f"max_node_uses must be ≥ 1, got {self.max_node_uses}")


def candidate_groups(
    candidates: Sequence[Segment], n_queries: int, config: GroupwiseConfig
) -> list[tuple[int, ...]]:
    """The subtrees of min_size..max_size rows of the behaviour tree of ``candidates``, for a
    request of ``n_queries`` group queries (none when none are asked).

    Raises ConfigError for a negative request and DataError when there are fewer candidates than
    two groups of ``min_size`` need."""
    if n_queries < 0:
        raise ConfigError(f"n_queries must be ≥ 0, got {n_queries}")
    if n_queries == 0:
        return []
    if len(candidates) < 2 * config.min_size:
        raise DataError(
            f"need at least {2 * config.min_size} candidate segments for two groups of "
            f"{config.min_size}, got {len(candidates)}"
        )
    d = behaviour_distances(candidates, config.features, condensed=True)
    tree = BehaviourTree.build(d, [s.id for s in candidates], method=config.method)
    return tree.binary_groups(min_size=config.min_size, max_size=config.max_size)


def pick_pairs(
    scores: np.ndarray, n_queries: int, max_uses: int, rng: np.random.Generator
) -> list[tuple[int, int]]:
    """Greedy: highest-scoring (i < j) pairs, NaN skipped, each index used ≤ max_uses times.

    Ties are broken at random (``rng``), so an untrained ensemble gives random pairs.
    """
    k = scores.shape[0]
    iu, ju = np.triu_indices(k, k=1)
    s = scores[iu, ju]
    ok = np.isfinite(s)
    iu, ju, s = iu[ok], ju[ok], s[ok]
    order = np.lexsort((rng.random(len(s)), -s))
    uses = np.zeros(k, dtype=np.int64)
    out: list[tuple[int, int]] = []
    for t in order:
        if len(out) >= n_queries:
            break
        i, j = int(iu[t]), int(ju[t])
        if uses[i] >= max_uses or uses[j] >= max_uses:
            continue
        uses[i] += 1
        uses[j] += 1
        out.append((i, j))
    return out


@dataclass(frozen=True, kw_only=True)
class GroupwiseSelector:
    """Implements :class:`preflab.selection.selectors.Selector`: group queries between tree nodes.

    Builds the DTW behaviour tree of the candidates, takes every dendrogram subtree of
    ``min_size``..``max_size`` members as a group, scores all disjoint pairs of groups with
    s_g from the ensemble's pair variance and asks the best ones. Without an ensemble (or with
    a single member) every score ties and pairs are drawn at random. Fewer than ``n_queries``
    queries come back when there are not enough disjoint groups.
    """

    config: GroupwiseConfig = field(default_factory=GroupwiseConfig)
    """Tree and scoring options."""

    def select(
        self,
        candidates: Sequence[Segment],
        ensemble: RewardModel | None,
        n_queries: int,
        rng: np.random.Generator,
        *,
        round: int = 0,
    ) -> list[Query]:
        groups = candidate_groups(candidates, n_queries, self.config)
        if len(groups) < 2:
            return []
        returns = (
            ensemble.segment_returns(SegmentBatch.from_segments(candidates))
            if ensemble is not None
            else None
        )
        if returns is not None and returns.shape[0] >= 2:
            scores = group_score_matrix(pair_variance(returns), groups, self.config.eps)
        else:  # no model to score with: every disjoint pair ties, so pick_pairs draws at random
            overlap = np.isnan(group_score_matrix(np.ones((len(candidates),) * 2), groups, 1.0))
            scores = np.where(overlap, np.nan, 1.0)
        picks = pick_pairs(scores, n_queries, self.config.max_node_uses, rng)
        return [
            Query(
                id=new_id("q"),
                kind=GROUP.name,
                a=tuple(candidates[r].id for r in groups[i]),
                b=tuple(candidates[r].id for r in groups[j]),
                round=round,
                meta={"selector": "groupwise", "score": float(scores[i, j])},
            )
            for i, j in picks
        ]
