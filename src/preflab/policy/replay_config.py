"""The options of QPA's hybrid experience replay (:mod:`preflab.policy.hybrid_replay`), apart so
that the run's config reads them without importing the learners' libraries."""

from __future__ import annotations

import math
from dataclasses import dataclass

from preflab.errors import ConfigError

QPA_RECENT_RATIO = 0.5
"""QPA's ω: share of every batch drawn from the recent window (``her_ratio=0.5``)."""
QPA_RECENT_EPISODES = 10
"""QPA's N: the recent window holds the last N episodes' worth of transitions."""


@dataclass(frozen=True, kw_only=True)
class ReplayConfig:
    """QPA's hybrid experience replay for off-policy agents (sac, td3, ddpg, tqc, crossq, dqn;
    SB3 or SBX). Off by default."""

    hybrid: bool = False
    """Draw a share ``recent_ratio`` of every batch from the newest ``recent_episodes``
    episodes' worth of transitions, the rest uniformly from the whole buffer (QPA)."""
    recent_ratio: float = QPA_RECENT_RATIO
    """ω: share of each batch drawn from the recent window (QPA: 0.5)."""
    recent_episodes: int = QPA_RECENT_EPISODES
    """N: the window is the last N × (the env's episode limit) transitions (QPA: 10)."""
    until_labels_spent: bool = True
    """Go back to uniform batches once the whole label budget has been asked (QPA's code)."""

    def __post_init__(self) -> None:
        if not 0.0 <= self.recent_ratio <= 1.0 or not math.isfinite(self.recent_ratio):
            raise ConfigError(
                f"replay.recent_ratio must be in [0, 1] (QPA uses 0.5), got {self.recent_ratio}"
            )
        if self.recent_episodes < 1:
            raise ConfigError(
                f"replay.recent_episodes must be ≥ 1 (QPA uses 10), got {self.recent_episodes}"
            )
