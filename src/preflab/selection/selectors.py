"""Query selection without groups: the Selector protocol, random and disagreement selection.

:mod:`preflab.selection.groupwise` builds on this module (one way: nothing here imports it);
:func:`preflab.assemble.make_selector` builds selectors by name.

A selector gets the candidate segments (recent rollouts), the current reward model (a
:class:`preflab.reward.RewardModel`; None before the first fit) and how many queries to ask, and returns queries. Random selection is
always available (Christiano et al.'s ablation shows it sometimes wins); disagreement asks
the pairs whose predicted preference varies most across members; entropy asks the pairs of
highest mean, over members, of each member's binary entropy of P(a ≻ b) (B-Pref's
``entropy_sampling``); the ranking selector asks sets of k clips where the
members disagree most on average over the set's pairs.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from itertools import combinations
from typing import Protocol, runtime_checkable

import numpy as np

from preflab.errors import ConfigError, DataError
from preflab.kinds import PAIR
from preflab.kinds.ranking import DEFAULT_RANK_SIZE, RANK_SIZES, RANKING
from preflab.records import Query, Segment
from preflab.reward.batch import SegmentBatch
from preflab.reward.protocol import RewardModel, preference_probs


@runtime_checkable
class Selector(Protocol):
    """Chooses queries from candidate segments."""

    def select(
        self,
        candidates: Sequence[Segment],
        ensemble: RewardModel | None,
        n_queries: int,
        rng: np.random.Generator,
        *,
        round: int = 0,
    ) -> list[Query]:
        """Return up to ``n_queries`` queries about ``candidates``."""
        ...


def _random_pairs(n: int, k: int, rng: np.random.Generator) -> np.ndarray:
    """k distinct-member pairs (i ≠ j) drawn uniformly from n items: (k, 2)."""
    i = rng.integers(0, n, size=k)
    j = (i + rng.integers(1, n, size=k)) % n
    return np.stack([i, j], axis=1)


def unique_segments(candidates: Sequence[Segment]) -> list[Segment]:
    """Candidates with repeated ids (identical content) dropped, first occurrence kept; a pair
    of one segment with itself would be no question at all."""
    seen: set[str] = set()
    out: list[Segment] = []
    for s in candidates:
        if s.id not in seen:
            seen.add(s.id)
            out.append(s)
    return out


def _check(candidates: Sequence[Segment], n_queries: int) -> None:
    if n_queries < 0:
        raise ConfigError(f"n_queries must be ≥ 0, got {n_queries}")
    if n_queries and len(candidates) < 2:
        raise DataError(f"need at least 2 candidate segments to form a pair, got {len(candidates)}")


def check_scoring(oversample: int, score: str) -> None:
    """A ConfigError unless ``oversample`` ≥ 1 and ``score`` is 'variance' or 'entropy'."""
    if oversample < 1:
        raise ConfigError(f"oversample must be ≥ 1, got {oversample}")
    if score not in ("variance", "entropy"):
        raise ConfigError(f"score must be 'variance' or 'entropy', got {score!r}")


def pair_scores(probs: np.ndarray, score: str) -> np.ndarray:
    """Per pair, from the members' predicted P(a ≻ b) ``probs`` (members, pairs): their variance
    (``score='variance'``, the paper's disagreement) or the mean over members of each member's
    binary entropy (``'entropy'``, B-Pref's ``get_entropy``: ``p_hat_entropy`` per member, then
    the mean). Members that agree at 0.6 score higher than members split 0.01 / 0.99 / 0.5."""
    if score == "variance":
        return np.asarray(probs.var(0), np.float64)
    q = np.asarray(probs, np.float64).clip(1e-12, 1 - 1e-12)
    return np.asarray(-(q * np.log(q) + (1 - q) * np.log(1 - q)).mean(0), np.float64)


@dataclass(frozen=True, kw_only=True)
class RandomSelector:
    """Uniformly random pairs of candidate segments."""

    def select(
        self,
        candidates: Sequence[Segment],
        ensemble: RewardModel | None,
        n_queries: int,
        rng: np.random.Generator,
        *,
        round: int = 0,
    ) -> list[Query]:
        candidates = unique_segments(candidates)
        _check(candidates, n_queries)
        pairs = (
            _random_pairs(len(candidates), n_queries, rng) if n_queries else np.zeros((0, 2), int)
        )
        return [
            PAIR.query(candidates[i].id, candidates[j].id, round=round, selector="random")
            for i, j in pairs
        ]


@dataclass(frozen=True, kw_only=True)
class DisagreementSelector:
    """Sample ``oversample`` × n candidate pairs; ask those scored highest.

    ``score='variance'``: variance across members of the predicted P(a ≻ b) (the paper's);
    ``score='entropy'``: mean over members of each member's binary entropy of P(a ≻ b)
    (B-Pref's ``entropy_sampling``, whose ``large_batch`` is ``oversample``).
    """

    oversample: int = 10
    """Candidate pairs sampled per query asked."""
    score: str = "variance"
    """'variance' (ensemble disagreement) or 'entropy' (members' mean binary entropy)."""

    def __post_init__(self) -> None:
        check_scoring(self.oversample, self.score)

    def select(
        self,
        candidates: Sequence[Segment],
        ensemble: RewardModel | None,
        n_queries: int,
        rng: np.random.Generator,
        *,
        round: int = 0,
    ) -> list[Query]:
        candidates = unique_segments(candidates)
        _check(candidates, n_queries)
        if ensemble is None or n_queries == 0:
            return RandomSelector().select(candidates, None, n_queries, rng, round=round)
        returns = ensemble.segment_returns(SegmentBatch.from_segments(candidates))
        if self.score == "variance" and returns.shape[0] < 2:
            return RandomSelector().select(candidates, None, n_queries, rng, round=round)
        pairs = _random_pairs(len(candidates), n_queries * self.oversample, rng)
        pairs = np.unique(np.sort(pairs, axis=1), axis=0)
        scores = pair_scores(preference_probs(returns, pairs[:, 0], pairs[:, 1]), self.score)
        top = np.argsort(-scores, kind="stable")[:n_queries]
        return [
            PAIR.query(
                candidates[pairs[t, 0]].id,
                candidates[pairs[t, 1]].id,
                round=round,
                selector=self.score,
                score=float(scores[t]),
            )
            for t in top
        ]


@dataclass(frozen=True, kw_only=True)
class RankingSelector:
    """Ranking queries (:mod:`preflab.kinds.ranking`): sample ``oversample`` × n random sets of
    ``k`` different candidates; score each by the mean, over its k(k−1)/2 pairs, of the pair
    score :class:`DisagreementSelector` uses; ask the highest, each shown in a random order.
    Before the first fit (or with one member and 'variance') the sets are random."""

    k: int = DEFAULT_RANK_SIZE
    """Clips per ranking query (2 to 8)."""
    oversample: int = 10
    """Candidate sets sampled per query asked."""
    score: str = "variance"
    """'variance' (ensemble disagreement) or 'entropy' (members' mean binary entropy)."""

    def __post_init__(self) -> None:
        if self.k not in RANK_SIZES:
            raise ConfigError(
                f"a ranking holds {RANK_SIZES.start} to {RANK_SIZES.stop - 1} clips, got k = "
                f"{self.k}; set --rank-size within that range"
            )
        check_scoring(self.oversample, self.score)

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
        scores = pair_scores(preference_probs(returns, i, j), self.score)  # (S·P,)
        return np.asarray(scores.reshape(len(sets), len(pairs)).mean(1), np.float64)
