"""QPA's policy-aligned query selection (Hu et al., ICLR 2024, "Query-Policy Misalignment in
Preference-Based Reinforcement Learning").

QPA asks about what the current policy does: both segments of every query come from the N most
recent episodes the agent played (N = 10 on DeepMind Control: ``max_reward_buffer_size=10`` in
the authors' ``run_QPA.sh``; their reward model keeps only those N episodes as its query pool,
``reward_model.py``), drawn at random rather than by disagreement. :class:`PolicyAlignedSelector`
is that window in front of another selector: it keeps the candidates cut from the ``episodes``
most recent episodes and lets ``within`` (random by default, as in QPA) pick among them.

"Most recent" is by order in the candidate list (the loop's pool is oldest first): an episode's
recency is that of its newest segment, so with several envs side by side the episodes of all
of them count, newest first, and the episode still under way counts as one.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Sequence
from dataclasses import dataclass, field

import numpy as np

from preflab.errors import ConfigError, DataError
from preflab.records import Query, Segment
from preflab.reward.protocol import RewardModel
from preflab.selection.selectors import RandomSelector, Selector

QPA_EPISODES = 10
"""QPA's N on DeepMind Control (``max_reward_buffer_size=10`` in the authors' ``run_QPA.sh``)."""

SELECTOR_NAME = "policy-aligned"
"""The name ``--selector`` takes, and what each query's ``meta['selector']`` starts with."""


MIN_SEGMENTS = 2
"""Distinct segments a window holds at least (a pair needs two): when the N most recent
episodes hold fewer, the window takes in older episodes, one at a time, until it holds two."""


def recent_episode_segments(candidates: Sequence[Segment], episodes: int) -> list[Segment]:
    """The candidates cut from the ``episodes`` most recent episodes, in their order (more
    episodes only when those hold fewer than :data:`MIN_SEGMENTS` distinct segments).

    Candidates are oldest first; an episode is as recent as its newest segment. A DataError when
    a candidate has no episode index (``Segment.episode == -1``): the loop's recorder always
    sets it, so such segments came from elsewhere and have no recency to go by."""
    if episodes < 1:
        raise ConfigError(f"the policy-aligned window must hold ≥ 1 episode, got {episodes}")
    unknown = [s.id for s in candidates if s.episode < 0]
    if unknown:
        raise DataError(
            f"policy-aligned selection needs each segment's episode index; {len(unknown)} "
            f"candidate(s) have none (episode = -1, e.g. {unknown[0]!r}). Segments recorded by "
            "the training loop have one; use --selector random or disagreement for others"
        )
    members: dict[tuple[str, int], set[str]] = {}  # newest episode first (dicts keep order)
    for s in reversed(candidates):
        members.setdefault((s.env_id, s.episode), set()).add(s.id)
    keep: set[tuple[str, int]] = set()
    ids: set[str] = set()
    for key, seg_ids in members.items():
        if len(keep) >= episodes and len(ids) >= MIN_SEGMENTS:
            break
        keep.add(key)
        ids |= seg_ids
    return [s for s in candidates if (s.env_id, s.episode) in keep]


@dataclass(frozen=True, kw_only=True)
class PolicyAlignedSelector:
    """QPA's policy-aligned queries: ``within`` picks among the segments of the ``episodes``
    most recent episodes only (:func:`recent_episode_segments`); older candidates are never
    asked about. Each query's ``meta['selector']`` reads 'policy-aligned-<inner>'."""

    episodes: int = QPA_EPISODES
    """N: how many of the most recent episodes queries are drawn from (QPA: 10)."""
    within: Selector = field(default_factory=RandomSelector)
    """The selector that picks inside the window (QPA: uniformly random pairs)."""

    def __post_init__(self) -> None:
        if self.episodes < 1:
            raise ConfigError(
                f"the policy-aligned window must hold ≥ 1 episode, got {self.episodes}; set "
                "--aligned-episodes 1 or more (QPA uses 10)"
            )

    def select(
        self,
        candidates: Sequence[Segment],
        ensemble: RewardModel | None,
        n_queries: int,
        rng: np.random.Generator,
        *,
        round: int = 0,
    ) -> list[Query]:
        """Up to ``n_queries`` queries about segments of the most recent episodes."""
        window = recent_episode_segments(candidates, self.episodes)
        picked = self.within.select(window, ensemble, n_queries, rng, round=round)
        return [
            dataclasses.replace(
                q, meta={**q.meta, "selector": f"{SELECTOR_NAME}-{q.meta.get('selector', '')}"}
            )
            for q in picked
        ]
