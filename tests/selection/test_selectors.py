import itertools

import numpy as np
import pytest

from preflab.assemble import make_selector
from preflab.errors import DataError
from preflab.reward import RewardConfig, RewardEnsemble, SegmentBatch
from preflab.reward.protocol import pair_variance
from preflab.selection.selectors import DisagreementSelector, RandomSelector, pair_scores
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


def test_entropy_asks_the_highest_mean_member_entropy_pairs() -> None:
    """With every unordered pair a candidate, the entropy selector asks the pairs of highest
    mean, over members, of each member's binary entropy of P(a ≻ b), as a brute force ranks
    them."""
    segs = make_segments(12, rng=np.random.default_rng(0), random_rewards=False, id_prefix="s")
    ens = RewardEnsemble(2, 1, RewardConfig(members=3), seed=1)
    qs = make_selector("entropy", oversample=2000).select(segs, ens, 3, np.random.default_rng(0))
    r = ens.segment_returns(SegmentBatch.from_segments(segs)).astype(np.float64)  # (3, 12)
    p = 1 / (1 + np.exp(-(r[:, :, None] - r[:, None, :])))  # (3, 12, 12): P(i ≻ j) per member
    ent = (-(p * np.log(p) + (1 - p) * np.log(1 - p))).mean(0)
    brute = sorted(itertools.combinations(range(12), 2), key=lambda ij: -ent[ij])[:3]
    got = {tuple(sorted((int(q.a[0][1:]), int(q.b[0][1:])))) for q in qs}
    assert got == {tuple(ij) for ij in brute}
    assert all(q.meta["selector"] == "entropy" for q in qs)


class _FixedReturns:
    """A reward model whose members give fixed segment returns."""

    def __init__(self, returns: np.ndarray) -> None:
        self.returns = returns

    def predict(self, obs: np.ndarray, acts: np.ndarray | None = None) -> np.ndarray:
        raise AssertionError("the selector needs segment returns only")

    def segment_returns(self, batch: SegmentBatch) -> np.ndarray:
        assert len(batch) == self.returns.shape[1]
        return self.returns


def _logit(p: float) -> float:
    return float(np.log(p / (1 - p)))


def test_entropy_is_the_members_mean_entropy_as_in_bpref() -> None:
    """B-Pref's entropy_sampling ranks by the mean over members of each member's binary entropy:
    three members agreeing at P = 0.6 on (s0, s1) outrank members predicting 0.01, 0.99 and 0.5
    on (s2, s3), whose mean prediction is 0.5 (the entropy of the mean would ask that one)."""
    segs = make_segments(4, rng=np.random.default_rng(0), random_rewards=False, id_prefix="s")
    # s2 and s3 far above s0 and s1: every pair across the two is certain (entropy ≈ 0)
    returns = np.array(
        [[_logit(0.6), 0.0, 50.0 + _logit(p), 50.0] for p in (0.01, 0.99, 0.5)], np.float64
    )
    qs = DisagreementSelector(score="entropy", oversample=200).select(
        segs, _FixedReturns(returns), 2, np.random.default_rng(0)
    )
    assert [{q.a[0], q.b[0]} for q in qs] == [{"s0", "s1"}, {"s2", "s3"}]
    # by hand: H(0.6) = 0.6 ln(1/0.6) + 0.4 ln(1/0.4) = 0.30649537 + 0.36651629;
    # (H(0.01) + H(0.99) + H(0.5)) / 3 = (2 × 0.05600154 + 0.69314718) / 3
    assert qs[0].meta["score"] == pytest.approx(0.67301166, abs=1e-7)
    assert qs[1].meta["score"] == pytest.approx(0.26838342, abs=1e-7)
    probs = np.array([[0.6, 0.01], [0.6, 0.99], [0.6, 0.5]])
    np.testing.assert_allclose(pair_scores(probs, "entropy"), [0.67301166, 0.26838342], atol=1e-7)


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
