"""A simulated crowd as a feedback source: every query goes to every user (or a random share).

``CrowdSource`` implements the FeedbackSource protocol (``submit`` / ``collect``). Each pair
query is answered by each user with probability ``answer_rate`` (sparse crowds), by the
stochastic preference model of :mod:`preflab.crowd.users`, under the reward of the user's
group: group 0 judges by the segments' true rewards (or ``reward_fns[0]``), group 1 by
``reward_fns[1]`` (e.g. :func:`preflab.crowd.objectives.hopper_height`). Answers are
judgements with source ``"crowd"`` and p = 1 (first preferred) or 0; aggregate them with
:class:`preflab.aggregate.SMLAggregator` or :class:`preflab.aggregate.MajorityAggregator`.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable, Mapping, Sequence
from typing import Any

import numpy as np

from preflab.crowd.users import CrowdConfig, User, answer_pairs, sample_users
from preflab.errors import DataError
from preflab.kinds.registry import pair_of
from preflab.records import Annotator, Judgement, Query, Segment, new_id, now
from preflab.sources.immediate import PendingJudgements

SegmentReward = Callable[[Segment], np.ndarray]


class CrowdSource:
    """Simulated crowd answering pair queries at once (see module docstring)."""

    def __init__(
        self,
        config: CrowdConfig,
        rng: np.random.Generator,
        *,
        users: Sequence[User] | None = None,
        reward_fns: Mapping[int, SegmentReward] | None = None,
    ) -> None:
        self.config = config
        self.rng = rng
        self.users: list[User] = list(users) if users is not None else sample_users(config, rng)
        if not self.users:
            raise DataError("a crowd needs at least one user")
        self.reward_fns = dict(reward_fns or {})
        if any(u.group == 1 for u in self.users) and 1 not in self.reward_fns:
            raise DataError(
                "the crowd has minority users (group 1) but no reward_fns[1] to judge by"
            )
        self._pending = PendingJudgements("crowd")

    def _rewards(self, seg: Segment, group: int) -> np.ndarray:
        fn = self.reward_fns.get(group)
        r = np.asarray(fn(seg) if fn is not None else seg.true_rewards, dtype=np.float64)
        if r.shape != (seg.length,):
            raise DataError(
                f"reward for group {group} must have shape ({seg.length},), got {r.shape}"
            )
        return r

    def answers(self, a: Segment, b: Segment) -> np.ndarray:
        """Every user's vote (+1 / −1) on one pair: (users,)."""
        if a.length != b.length:
            raise DataError(
                f"crowd pairs need segments of equal length, got {a.length} and {b.length}"
            )
        groups = sorted({u.group for u in self.users})
        ra = {g: self._rewards(a, g)[None, :] for g in groups}
        rb = {g: self._rewards(b, g)[None, :] for g in groups}
        return answer_pairs(self.users, ra, rb, self.rng, return_scale=self.config.return_scale)[
            :, 0
        ]

    def submit(self, queries: Sequence[Query], segments: Mapping[str, Segment]) -> None:
        for q in queries:
            a, b = pair_of(q, "CrowdSource")
            missing = [s for s in (a, b) if s not in segments]
            if missing:
                raise DataError(
                    f"query {q.id} names segment(s) {missing} that were not passed to submit"
                )
            votes = self.answers(segments[a], segments[b])
            asked = self.rng.random(len(self.users)) < self.config.answer_rate
            t0 = now()
            for u, v, ok in zip(self.users, votes, asked, strict=True):
                if ok:
                    self._pending.add(
                        Judgement(
                            id=new_id("j"),
                            query_id=q.id,
                            annotator_id=u.id,
                            source="crowd",
                            p=1.0 if v > 0 else 0.0,
                            created_at=t0,
                            response_time_s=0.0,
                        )
                    )

    def collect(self) -> list[Judgement]:
        return self._pending.collect()

    def annotators(self) -> list[Annotator]:
        """The simulated users as annotators (see :func:`user_annotators`)."""
        return user_annotators(self.users)

    # ----- FeedbackSource state ------------------------------------------------------------
    persists = False
    """Judgements are only in memory until the loop stores them."""

    def state(self) -> dict[str, Any]:
        """Generator state, the users and uncollected judgements (JSON-serialisable)."""
        return self._pending.state(self.rng, users=[dataclasses.asdict(u) for u in self.users])

    def load_state(self, state: Mapping[str, Any]) -> None:
        """Continue from :meth:`state`: same generator state, same users, same pending."""
        self._pending.load_state(state, self.rng, ("users",))
        self.users = [User(**u) for u in state["users"]]


def user_annotators(users: Sequence[User]) -> list[Annotator]:
    """Simulated crowd users as annotator records: source 'crowd', their β, γ, ε and group in
    ``meta`` (what an export lists for a crowd run)."""
    return [
        Annotator(
            id=u.id,
            source="crowd",
            name=f"simulated user {u.id}",
            meta={"simulated": True} | dataclasses.asdict(u),
        )
        for u in users
    ]


def annotators_from_state(state: Mapping[str, Any]) -> list[Annotator]:
    """The users of a saved :meth:`CrowdSource.state` (a run's checkpoint) as annotators; none
    when the state holds no users (another source's state)."""
    raw = state.get("users")
    if not isinstance(raw, list):
        return []
    try:
        return user_annotators([User(**u) for u in raw])
    except TypeError as exc:
        raise DataError(f"the saved crowd state has malformed users: {exc}") from exc
