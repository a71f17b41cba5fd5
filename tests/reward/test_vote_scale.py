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
