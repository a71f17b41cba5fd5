"""Choosing ranking queries: sets of k clips, asked where the reward ensemble disagrees most.

A set's score is the mean, over its k(k−1)/2 pairs, of the pair score the disagreement
selector uses (:class:`preflab.selection.DisagreementSelector`): the variance across members of
the predicted P(a ≻ b) ('variance', the paper's disagreement) or the binary entropy of the
members' mean prediction ('entropy'). Before the first fit (no ensemble) the sets are random.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from itertools import combinations

import numpy as np

from preflab.errors import ConfigError, DataError
from preflab.kinds.ranking import DEFAULT_RANK_SIZE, RANK_SIZES, RANKING
from preflab.records import Query, Segment
from preflab.reward.batch import SegmentBatch
from preflab.reward.protocol import RewardModel, preference_probs
from preflab.selection import unique_segments


@dataclass(frozen=True, kw_only=True)
class RankingSelector:
    """Sample ``oversample`` × n random sets of ``k`` different candidates; ask the highest
    scored (module docstring)."""

    k: int = DEFAULT_RANK_SIZE
    """Clips per ranking query (2 to 8)."""
    oversample: int = 10
    """Candidate sets sampled per query asked."""
    score: str = "variance"
    """'variance' (ensemble disagreement) or 'entropy' (mean-prediction uncertainty)."""

    def __post_init__(self) -> None:
        if self.k not in RANK_SIZES:
            raise ConfigError(
                f"a ranking holds {RANK_SIZES.start} to {RANK_SIZES.stop - 1} clips, got k = "
                f"{self.k}; set --rank-size within that range"
            )
        if self.oversample < 1:
            raise ConfigError(f"oversample must be ≥ 1, got {self.oversample}")
        if self.score not in ("variance", "entropy"):
            raise ConfigError(f"score must be 'variance' or 'entropy', got {self.score!r}")

    def select(
        self,
        candidates: Sequence[Segment],
        ensemble: RewardModel | None,
        n_queries: int,
        rng: np.random.Generator,
        *,
        round: int = 0,
    ) -> list[Query]:
        """Up to ``n_queries`` ranking queries of ``k`` different candidates each."""
        segs = unique_segments(candidates)
        if n_queries < 0:
            raise ConfigError(f"n_queries must be ≥ 0, got {n_queries}")
        if n_queries == 0:
            return []
        if len(segs) < self.k:
            raise DataError(
                f"need at least {self.k} different candidate segments to rank {self.k} clips, "
                f"got {len(segs)}; lower --rank-size or raise --pool-size"
            )
        returns = (
            None if ensemble is None else ensemble.segment_returns(SegmentBatch.from_segments(segs))
        )
        if returns is not None and self.score == "variance" and returns.shape[0] < 2:
            returns = None  # one member cannot disagree: random sets, as the pair selector
        n_sets = n_queries * max(self.oversample, 2)  # random sets too: unique ones, none twice
        sets = np.stack([rng.choice(len(segs), size=self.k, replace=False) for _ in range(n_sets)])
        sets = np.unique(np.sort(sets, axis=1), axis=0)
        if returns is None:
            scores = np.zeros(len(sets))
            pick = rng.permutation(len(sets))[:n_queries]
            how = "random"
        else:
            scores = self._scores(returns, sets)
            pick = np.argsort(-scores, kind="stable")[:n_queries]
            how = self.score
        return [
            RANKING.query(
                [segs[i].id for i in rng.permutation(sets[t])],  # shown in a random order
                round=round,
                selector=f"ranking-{how}",
                score=float(scores[t]),
            )
            for t in pick
        ]

    def _scores(self, returns: np.ndarray, sets: np.ndarray) -> np.ndarray:
        """Per set (rows of ``sets``, indices into the segments ``returns`` is about): the mean
        pair score over its pairs."""
        pairs = np.array(list(combinations(range(self.k), 2)))  # (P, 2)
        i = sets[:, pairs[:, 0]].reshape(-1)
        j = sets[:, pairs[:, 1]].reshape(-1)
        probs = preference_probs(returns, i, j)  # (M, S·P)
        if self.score == "variance":
            pair_scores = probs.var(0)
        else:
            q = probs.mean(0).clip(1e-7, 1 - 1e-7)
            pair_scores = -(q * np.log(q) + (1 - q) * np.log(1 - q))
        return np.asarray(pair_scores.reshape(len(sets), len(pairs)).mean(1), np.float64)
