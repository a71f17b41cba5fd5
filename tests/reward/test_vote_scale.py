"""Pref-GUIDE Voting's δ in feedback units (issue #27: 5 % of the feedback range, as the paper
sets it), with the standardised scale kept as an option."""

import numpy as np
import pytest

from preflab.errors import ConfigError
from preflab.kinds.rating_windows import DEFAULT_DELTA
from preflab.reward import RewardConfig, RewardEnsemble, SegmentBatch
from preflab.reward.scalar import item_scores, voting_labels


def _model_and_items() -> tuple[RewardEnsemble, SegmentBatch]:
    rng = np.random.default_rng(0)
    items = SegmentBatch.from_arrays(rng.normal(size=(12, 3, 2)).astype(np.float32))
    model = RewardEnsemble(2, 0, RewardConfig(use_actions=False, members=2, hidden=(8,)), seed=0)
    model.fit_input_stats(items)
    model.fit_output_stats(items)
    return model, items


def test_feedback_scale_maps_the_items_onto_the_feedback_range() -> None:
    model, items = _model_and_items()
    r = model.segment_returns(items, normalise=True).mean(0)
    want = -1 + 2 * (r - r.min()) / (r.max() - r.min())
    got = item_scores(model, items, "feedback")
    np.testing.assert_allclose(got, want, rtol=1e-6, atol=1e-7)
    assert got.min() == -1.0 and got.max() == 1.0
    std = item_scores(model, items, "std")
    np.testing.assert_allclose(std, (r - r.mean()) / r.std(), rtol=1e-5)
    with pytest.raises(ConfigError, match="feedback"):
        item_scores(model, items, "rank")  # type: ignore[arg-type]


def test_the_vote_compares_feedback_units_with_five_percent_of_the_range() -> None:
    """One model: a pair whose mapped scores differ by less than δ = 0.1 (5 % of [−1, 1]) is a
    tie (0.5); otherwise the higher-scored item wins. Checked pair by pair against the mapped
    scores computed here."""
    model, items = _model_and_items()
    s = item_scores(model, items, "feedback")
    pairs = np.array([(i, j) for i in range(12) for j in range(12) if i < j], dtype=np.int64)
    p = voting_labels([model], items, pairs, DEFAULT_DELTA).p
    diff = s[pairs[:, 0]] - s[pairs[:, 1]]
    want = np.where(np.abs(diff) < 0.1, 0.5, np.where(diff > 0, 1.0, 0.0))
    np.testing.assert_array_equal(p, want)
    assert pytest.approx(0.1) == DEFAULT_DELTA


class _GivenReturns:
    """A stand-in model whose members' segment returns are given: all :func:`item_scores`
    reads of a model. Records the ``normalise`` it was asked for."""

    def __init__(self, returns: list[list[float]]) -> None:
        self.returns = np.asarray(returns, np.float64)
        self.asked: list[bool] = []

    def segment_returns(self, items: SegmentBatch, *, normalise: bool = False) -> np.ndarray:
        assert len(items) == self.returns.shape[1]
        self.asked.append(normalise)
        return self.returns


def _three_items() -> SegmentBatch:
    return SegmentBatch.from_arrays(np.zeros((3, 2, 1), np.float32))


def test_item_scores_of_returns_0_1_3_by_hand() -> None:
    """Members' returns (0, 2, 2) and (0, 0, 4) average to (0, 1, 3). 'feedback': lowest −1,
    highest +1, linear between: (−1, −1/3, 1). 'std': (r − 4/3) / σ with the population σ =
    √(14/9) (ddof 0, NumPy's default, as the code computes it): (−1.0690, −0.2673, 1.3363)."""
    model = _GivenReturns([[0, 2, 2], [0, 0, 4]])
    items = _three_items()
    got = item_scores(model, items, "feedback")  # type: ignore[arg-type]
    np.testing.assert_allclose(got, [-1.0, -1.0 / 3.0, 1.0], rtol=1e-12)
    got = item_scores(model, items, "std")  # type: ignore[arg-type]
    np.testing.assert_allclose(got, [-1.0690450, -0.2672612, 1.3363062], rtol=1e-6)
    assert model.asked == [True, True]  # each member's output normalised first
    flat = item_scores(_GivenReturns([[2, 2, 2]]), items, "feedback")  # type: ignore[arg-type]
    np.testing.assert_array_equal(flat, [0.0, 0.0, 0.0])  # no spread: the middle of the range


def test_votes_on_feedback_scores_by_hand() -> None:
    """Algorithm 2 with δ = 0.1 on the 'feedback' scale, votes 1 (a higher by δ or more),
    0 (b higher) or 0.5 (closer than δ), averaged over the models. Scores by hand:
    A (0, 1, 3) → (−1, −1/3, 1); B (3, 1, 0) → (1, −1/3, −1); C (0, 0.02, 3) → (−1, −0.98667,
    1), whose items 0 and 1 differ by 0.0133 < δ; D (0, 0.225, 3) → (−1, −0.85, 1), items 0 and
    1 differ by 0.15 ≥ δ."""
    items = _three_items()
    pairs = np.array([(0, 1), (0, 2), (1, 2), (1, 0), (2, 0), (2, 1)], dtype=np.int64)
    a = _GivenReturns([[0, 1, 3]])
    p = voting_labels([a], items, pairs, 0.1).p  # type: ignore[list-item]
    np.testing.assert_array_equal(p, [0, 0, 0, 1, 1, 1])
    p = voting_labels([_GivenReturns([[0, 0.225, 3]])], items, pairs, 0.1).p  # type: ignore[list-item]
    np.testing.assert_array_equal(p, [0, 0, 0, 1, 1, 1])
    models = [a, _GivenReturns([[3, 1, 0]]), _GivenReturns([[0, 0.02, 3]])]
    p = voting_labels(models, items, pairs[:3], 0.1).p  # type: ignore[arg-type]
    # (0, 1): A 0, B 1, C 0.5; (0, 2): A 0, B 1, C 0; (1, 2): A 0, B 1, C 0
    np.testing.assert_allclose(p, [0.5, 1 / 3, 1 / 3], rtol=1e-12)
    binary = voting_labels(models, items, pairs[:3], 0.1, binary=True).p  # type: ignore[arg-type]
    np.testing.assert_array_equal(binary, [0.5, 0.0, 0.0])
