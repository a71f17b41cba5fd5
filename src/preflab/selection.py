"""Query selection without groups: the Selector protocol, random and disagreement selection.

:mod:`preflab.groupwise` builds on this module (one way: nothing here imports groupwise);
:func:`preflab.assemble.make_selector` builds selectors by name.

A selector gets the candidate segments (recent rollouts), the current reward model (a
:class:`preflab.reward.RewardModel`; None before the first fit) and how many queries to ask, and returns queries. Random selection is
always available (Christiano et al.'s ablation shows it sometimes wins); disagreement asks
the pairs whose predicted preference varies most across members; entropy asks the pairs whose
mean predicted preference is closest to 0.5.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Protocol, runtime_checkable

import numpy as np

from preflab.errors import ConfigError, DataError
from preflab.kinds import PAIR
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
    ``score='entropy'``: binary entropy of the members' mean prediction.
    """

    oversample: int = 10
    """Candidate pairs sampled per query asked."""
    score: str = "variance"
    """'variance' (ensemble disagreement) or 'entropy' (mean-prediction uncertainty)."""

    def __post_init__(self) -> None:
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
        candidates = unique_segments(candidates)
        _check(candidates, n_queries)
        if ensemble is None or n_queries == 0:
            return RandomSelector().select(candidates, None, n_queries, rng, round=round)
        returns = ensemble.segment_returns(SegmentBatch.from_segments(candidates))
        if self.score == "variance" and returns.shape[0] < 2:
            return RandomSelector().select(candidates, None, n_queries, rng, round=round)
        pairs = _random_pairs(len(candidates), n_queries * self.oversample, rng)
        pairs = np.unique(np.sort(pairs, axis=1), axis=0)
        probs = preference_probs(returns, pairs[:, 0], pairs[:, 1])  # (M, P)
        if self.score == "variance":
            scores = probs.var(0)
        else:
            q = probs.mean(0).clip(1e-7, 1 - 1e-7)
            scores = -(q * np.log(q) + (1 - q) * np.log(1 - q))
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
