"""The trainer's side of the studio: what a round publishes for people, and what they compose.

**A round's pool** is defined as the selection candidates of that round: the last
``pool_size`` segments the loop recorded when it asked that round's queries (the same list the
selector ranked). :func:`publish_round_pool` stores those segments (arrays + states, so the
studio can compute DTW on their observations and render them) and records the list, in
order, with ``store.rounds.publish_pool``. When the reward ensemble has been fitted it also
records every member's predicted return of each pool segment, (members, N): the studio server
derives the ensemble disagreement V[i, j] = Var_m P(i ≻ j) from it (suggestion edges, s_g of
group pairs, 'suggest next'). Predicted returns never leave the server; true returns are not
published at all (they stay in the segment arrays, which the studio never sends).

:meth:`StudioBridge.adopt_queries` is the other half: group queries that people composed in the
studio (``meta['created_by'] == STUDIO_CREATED``) are not asked by the loop, so the loop adopts
them before it fits, or their judgements would answer unknown queries.

**Episodes to rate** (Pref-GUIDE in the studio's Rate view): :func:`recent_episodes` finds the
most recent whole episodes among the recorded segments (every segment from step 0 on, without
gaps, and a later episode of the same env begun, so the episode has ended; its unfinished last
segment, which the recorder drops, is not part of it), and :meth:`StudioBridge.publish_episodes`
stores each as a query of kind 'rating' whose ``a`` lists the episode's segment ids in order.
A stream's id derives from its segment ids, so a resumed round publishes the same stream again
(and finds it stored). People's ratings come back through
:meth:`preflab.sources.human.StoreSource.ratings`.

The loop is given a :class:`StudioBridge` (by :func:`preflab.assemble.assemble`) exactly when
people answer through the studio; without one it publishes nothing for the studio.
"""

from __future__ import annotations

import hashlib
from collections import defaultdict
from collections.abc import Container, Sequence
from itertools import pairwise

from preflab.kinds import RATING
from preflab.records import STUDIO_CREATED, Query, Segment
from preflab.reward.batch import SegmentBatch
from preflab.reward.protocol import RewardModel
from preflab.store import FeedbackStore

__all__ = [
    "STUDIO_CREATED",
    "StudioBridge",
    "episode_stream",
    "publish_round_pool",
    "recent_episodes",
    "studio_queries",
]

ENV_EPISODE_BLOCK = 1_000_000
"""Episode ids of env i start at i × this (:meth:`preflab.policy.rollout.SegmentBuffers.allocate`)."""


def publish_round_pool(
    store: FeedbackStore,
    round: int,
    candidates: Sequence[Segment],
    model: RewardModel | None,
) -> None:
    """Store round ``round``'s pool (``candidates``) and, with a fitted reward ``model``, each
    member's predicted return of every candidate (see the module doc)."""
    segs = list({s.id: s for s in candidates}.values())
    if not segs:
        return
    store.segments.add(segs)
    returns = None
    if model is not None:
        returns = model.segment_returns(SegmentBatch.from_segments(segs)).tolist()
    store.rounds.publish_pool(
        round,
        [s.id for s in segs],
        member_returns=returns,
        meta={"env_id": segs[0].env_id, "n": len(segs), "fitted": model is not None},
    )


def studio_queries(store: FeedbackStore, known: Container[str]) -> list[Query]:
    """Group queries people composed in the studio that are not in ``known`` yet."""
    return [
        q
        for q in store.queries.all()
        if q.id not in known and q.meta.get("created_by") == STUDIO_CREATED
    ]


def recent_episodes(
    segments: Sequence[Segment], count: int, *, skip: Container[int] = ()
) -> list[list[Segment]]:
    """Up to ``count`` whole episodes in ``segments`` (newest first; episodes in ``skip`` left
    out), each as its segments in step order: the episode's segments start at step 0, follow one
    another without gaps, and the same env has begun a later episode (so this one has ended)."""
    by_episode: dict[int, dict[int, Segment]] = defaultdict(dict)
    last_seen: dict[int, int] = {}  # episode → position of its last segment in ``segments``
    for k, s in enumerate(segments):
        if s.episode >= 0:
            by_episode[s.episode][s.start] = s
            last_seen[s.episode] = k
    latest: dict[int, int] = {}
    for ep in by_episode:
        env = ep // ENV_EPISODE_BLOCK
        latest[env] = max(latest.get(env, ep), ep)
    out: list[list[Segment]] = []
    for ep in sorted(by_episode, key=last_seen.__getitem__, reverse=True):  # newest first
        if len(out) >= count:
            break
        if ep in skip or latest[ep // ENV_EPISODE_BLOCK] == ep:
            continue  # already published, or the env is still in it
        segs = [by_episode[ep][k] for k in sorted(by_episode[ep])]
        whole = segs[0].start == 0 and all(a.start + a.length == b.start for a, b in pairwise(segs))
        if whole:
            out.append(segs)
    return out


def episode_stream(segments: Sequence[Segment], round: int) -> Query:
    """The rating query (stream) of one episode's ``segments`` (in order); its id derives from
    their ids."""
    ids = tuple(s.id for s in segments)
    digest = hashlib.sha256("\x1f".join(ids).encode()).hexdigest()[:20]
    return Query(
        id=f"stream-{digest}",
        kind=RATING.name,
        a=ids,
        round=round,
        meta={
            "episode": segments[0].episode,
            "n_steps": sum(s.length for s in segments),
            "env_id": segments[0].env_id,
        },
    )


class StudioBridge:
    """Publishes each round's pool to the studio and adopts the queries people composed."""

    def __init__(self, store: FeedbackStore) -> None:
        self.store = store

    def publish_pool(
        self, round: int, candidates: Sequence[Segment], model: RewardModel | None
    ) -> None:
        """Round ``round``'s pool for the groupwise views (``model``: the fitted reward model)."""
        publish_round_pool(self.store, round, candidates, model)

    def adopt_queries(self, known: Container[str]) -> list[Query]:
        """Queries people composed in the studio that the run does not know yet."""
        return studio_queries(self.store, known)

    def publish_episodes(
        self,
        round: int,
        recorded: Sequence[Segment],
        count: int,
        known: Container[str] = (),
        skip_episodes: Container[int] = (),
    ) -> list[Query]:
        """Publish up to ``count`` of the most recent whole episodes in ``recorded`` for rating
        (:func:`recent_episodes`; ``skip_episodes``: episodes published before); streams in
        ``known`` or in the store already are not stored again. Returns the streams."""
        if count <= 0:
            return []
        streams = [
            episode_stream(segs, round)
            for segs in recent_episodes(recorded, count, skip=skip_episodes)
        ]
        if not streams:
            return []
        by_id = {s.id: s for s in recorded}
        self.store.segments.add(list({sid: by_id[sid] for q in streams for sid in q.a}.values()))
        self.store.queries.add(
            [q for q in streams if q.id not in known and self.store.queries.get(q.id) is None]
        )
        return streams
