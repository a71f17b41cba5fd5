import itertools

import numpy as np
import pytest

from preflab.assemble import make_selector
from preflab.errors import DataError
from preflab.reward import RewardConfig, RewardEnsemble, SegmentBatch
from preflab.reward.protocol import pair_variance, preference_probs
from preflab.selection.selectors import DisagreementSelector, RandomSelector
from preflab.testing.factories import make_segments


def test_disagreement_asks_the_highest_variance_pairs() -> None:
    segs = make_segments(12, rng=np.random.default_rng(0), random_rewards=False, id_prefix="s")
    ens = RewardEnsemble(2, 1, RewardConfig(members=5), seed=3)
    # oversample large enough that every unordered pair is a candidate, then compare to brute force
    sel = DisagreementSelector(oversample=2000)
    qs = sel.select(segs, ens, 5, np.random.default_rng(0))
    var = pair_variance(ens.segment_returns(SegmentBatch.from_segments(segs)))
    brute = sorted(itertools.combinations(range(12), 2), key=lambda ij: -var[ij])[:5]
    got = {tuple(sorted((int(q.a[0][1:]), int(q.b[0][1:])))) for q in qs}
    assert got == {tuple(ij) for ij in brute}
    assert all(q.meta["selector"] == "variance" for q in qs)


def test_entropy_prefers_uncertain_pairs() -> None:
    segs = make_segments(12, rng=np.random.default_rng(0), random_rewards=False, id_prefix="s")
    ens = RewardEnsemble(2, 1, RewardConfig(members=3), seed=1)
    qs = make_selector("entropy", oversample=2000).select(segs, ens, 3, np.random.default_rng(0))
    batch = SegmentBatch.from_segments(segs)
    idx = batch.index()
    mean_p = [
        preference_probs(
            ens.segment_returns(batch), np.array([idx[q.a[0]]]), np.array([idx[q.b[0]]])
        ).mean()
        for q in qs
    ]
    all_p = preference_probs(ens.segment_returns(batch), *np.triu_indices(12, 1)).mean(0)
    assert max(abs(p - 0.5) for p in mean_p) <= np.sort(np.abs(all_p - 0.5))[2] + 1e-6


def test_random_and_untrained_fallback() -> None:
    segs = make_segments(12, rng=np.random.default_rng(0), random_rewards=False, id_prefix="s")
    qs = RandomSelector().select(segs, None, 50, np.random.default_rng(0))
    assert len(qs) == 50 and all(q.a != q.b for q in qs)
    assert len(DisagreementSelector().select(segs, None, 4, np.random.default_rng(0))) == 4
    with pytest.raises(DataError, match="at least 2"):
        RandomSelector().select(segs[:1], None, 1, np.random.default_rng(0))


def test_repeated_segments_are_never_paired_with_themselves() -> None:
    seg = make_segments(2, rng=np.random.default_rng(0), random_rewards=False, id_prefix="s")
    twins = [seg[0], seg[0], seg[0], seg[1]]  # identical content gives identical ids
    for sel in (RandomSelector(), DisagreementSelector()):
        qs = sel.select(twins, None, 20, np.random.default_rng(0))
        assert all({q.a[0], q.b[0]} == {"s0", "s1"} for q in qs)
    with pytest.raises(DataError, match="at least 2"):
        RandomSelector().select([seg[0], seg[0]], None, 1, np.random.default_rng(0))
