"""What the trainer publishes for the studio's groupwise views (issue #10), once per round.

**A round's pool** is defined as the selection candidates of that round: the last
``pool_size`` segments the loop recorded when it asked that round's queries (the same list the
selector ranked). :func:`publish_round_pool` stores those segments (arrays + states, so the
studio can compute DTW on their observations and render them) and records the list, in
order, with ``FeedbackStore.publish_pool``. When the reward ensemble has been fitted it also
records every member's predicted return of each pool segment, (members, N): the studio server
derives the ensemble disagreement V[i, j] = Var_m P(i ≻ j) from it (suggestion edges, s_g of
group pairs, 'suggest next'). Predicted returns never leave the server; true returns are not
published at all (they stay in the segment arrays, which the studio never sends).

:func:`studio_queries` is the other half: group queries that people composed in the studio
(``meta['created_by'] == 'studio'``) are not asked by the loop, so the loop adopts them before
it fits, or their judgements would answer unknown queries.
"""

from __future__ import annotations

from collections.abc import Container, Sequence
from typing import TYPE_CHECKING

from preflab.records import Query, Segment
from preflab.store import FeedbackStore

if TYPE_CHECKING:  # the studio server imports STUDIO_CREATED from here: keep torch out of it
    from preflab.reward.protocol import RewardModel

STUDIO_CREATED = "studio"
"""``Query.meta['created_by']`` of group queries composed by a person in the studio."""


def publish_round_pool(
    store: FeedbackStore,
    round: int,
    candidates: Sequence[Segment],
    ensemble: RewardModel | None,
) -> None:
    """Store round ``round``'s pool (``candidates``) and, with a fitted ``ensemble``, each
    member's predicted return of every candidate (see the module doc)."""
    segs = list({s.id: s for s in candidates}.values())
    if not segs:
        return
    store.add_segments(segs)
    returns = None
    if ensemble is not None:
        from preflab.reward.batch import SegmentBatch

        returns = ensemble.segment_returns(SegmentBatch.from_segments(segs)).tolist()
    store.publish_pool(
        round,
        [s.id for s in segs],
        member_returns=returns,
        meta={"env_id": segs[0].env_id, "n": len(segs), "fitted": ensemble is not None},
    )


def studio_queries(store: FeedbackStore, known: Container[str]) -> list[Query]:
    """Group queries people composed in the studio that are not in ``known`` yet."""
    return [
        q
        for q in store.queries()
        if q.id not in known and q.meta.get("created_by") == STUDIO_CREATED
    ]
