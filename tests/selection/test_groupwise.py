"""GroupwiseSelector without a model to score with: every disjoint pair of groups ties, so the
pairs are drawn at random (over group sizes too), never two overlapping groups."""

from __future__ import annotations

import numpy as np

from preflab.selection.groupwise import GroupwiseSelector, candidate_groups
from preflab.testing.factories import make_segments


def test_without_a_model_group_pairs_are_drawn_at_random() -> None:
    segs = make_segments(24, rng=np.random.default_rng(0), length=5)
    selector = GroupwiseSelector()
    sizes = {len(g) for g in candidate_groups(segs, 4, selector.config)}
    assert len(sizes) > 1  # groups of several sizes to choose from
    unequal = 0
    for seed in range(20):
        for q in selector.select(segs, None, 4, np.random.default_rng(seed)):
            assert not set(q.a) & set(q.b)  # disjoint groups only
            unequal += len(q.a) != len(q.b)
    # s_g of a constant variance is 1/r: it preferred groups of equal size, always
    assert unequal > 0
