"""The trainer's side of the studio: what a round publishes for people, and what they compose.

**A round's pool** is defined as the selection candidates of that round: the last
``pool_size`` segments the loop recorded when it asked that round's queries (the same list the
selector ranked). :func:`publish_round_pool` stores those segments (arrays + states, so the
studio can compute DTW on their observations and render them) and records the list, in
order, with ``FeedbackStore.publish_pool``. When the reward ensemble has been fitted it also
records every member's predicted return of each pool segment, (members, N): the studio server
derives the ensemble disagreement V[i, j] = Var_m P(i ≻ j) from it (suggestion edges, s_g of
group pairs, 'suggest next'). Predicted returns never leave the server; true returns are not
published at all (they stay in the segment arrays, which the studio never sends).

:meth:`StudioBridge.adopt_queries` is the other half: group queries that people composed in the
studio (``meta['created_by'] == STUDIO_CREATED``) are not asked by the loop, so the loop adopts
them before it fits, or their judgements would answer unknown queries.

The loop is given a :class:`StudioBridge` (by :func:`preflab.assemble.assemble`) exactly when
people answer through the studio; without one it publishes nothing for the studio.
"""

from __future__ import annotations

from collections.abc import Container, Sequence

from preflab.records import STUDIO_CREATED, Query, Segment
from preflab.reward.batch import SegmentBatch
from preflab.reward.protocol import RewardModel
from preflab.store import FeedbackStore

__all__ = ["STUDIO_CREATED", "StudioBridge", "publish_round_pool", "studio_queries"]


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
    store.add_segments(segs)
    returns = None
    if model is not None:
        returns = model.segment_returns(SegmentBatch.from_segments(segs)).tolist()
    store.publish_pool(
        round,
        [s.id for s in segs],
        member_returns=returns,
        meta={"env_id": segs[0].env_id, "n": len(segs), "fitted": model is not None},
    )


def studio_queries(store: FeedbackStore, known: Container[str]) -> list[Query]:
    """Group queries people composed in the studio that are not in ``known`` yet."""
    return [
        q
        for q in store.queries()
        if q.id not in known and q.meta.get("created_by") == STUDIO_CREATED
    ]


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
