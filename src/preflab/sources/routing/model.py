"""The reward model as an answerer: a pair the ensemble is sure about needs nobody else.

Each member m gives P_m(a ≻ b) = σ(R̂_m(a) − R̂_m(b)) (its Bradley–Terry probability from its
segment returns). The ensemble is *confident* about a pair when every member is at least
``threshold`` sure, min_m max(P_m, 1 − P_m) ≥ τ, and all members pick the same side. Its answer
is then that side, p = 1 or 0 (a hard label, as SURF's pseudo-labels are).

This is SURF's pseudo-label rule (Park et al. 2022: a member uses its own prediction where
max(P, 1 − P) ≥ τ) made stricter (every member, one side) and turned into a judgement with
provenance: SURF's pseudo-labels live inside one fit and are drawn again every step; a routed
model answer is stored, exported and counted like any other answer.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass

import numpy as np

from preflab.records import Segment
from preflab.reward.batch import SegmentBatch
from preflab.reward.protocol import RewardModel, preference_probs

ModelNow = Callable[[], RewardModel | None]
"""The run's reward model as it is now, or None before its first fit."""


@dataclass(frozen=True)
class ModelAnswer:
    """What the ensemble says about one pair."""

    p: float
    """1.0 when the members favour a, 0.0 when they favour b (by their mean)."""
    confidence: float
    """The least sure member's max(P_m, 1 − P_m)."""
    agree: bool
    """True when every member picks the same side."""


def member_probs(model: RewardModel, a: Sequence[Segment], b: Sequence[Segment]) -> np.ndarray:
    """P_m(a_i ≻ b_i) of every member and pair: (members, pairs)."""
    batch = SegmentBatch.from_segments([*a, *b])
    n = len(a)
    return preference_probs(model.segment_returns(batch), np.arange(n), np.arange(n, 2 * n))


def model_answers(
    model: RewardModel, a: Sequence[Segment], b: Sequence[Segment]
) -> list[ModelAnswer]:
    """The ensemble's answer, confidence and agreement for each pair (a_i, b_i)."""
    if not a:
        return []
    probs = member_probs(model, a, b)
    sure = np.maximum(probs, 1.0 - probs).min(axis=0)
    side = probs > 0.5
    agree = np.asarray(side.all(axis=0) | (~side).all(axis=0), bool)
    mean = probs.mean(axis=0)
    return [
        ModelAnswer(p=1.0 if m > 0.5 else 0.0, confidence=float(s), agree=bool(g))
        for m, s, g in zip(mean.tolist(), sure.tolist(), agree.tolist(), strict=True)
    ]
