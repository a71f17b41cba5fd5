"""The RewardModel protocol: what selectors need, checked with a model that is not an ensemble."""

from __future__ import annotations

import math

import numpy as np
import pytest

from preflab.reward import (
    RewardConfig,
    RewardEnsemble,
    RewardModel,
    SegmentBatch,
    pair_variance,
    preference_probs,
)
from preflab.selection.groupwise import GroupwiseSelector
from preflab.selection.selectors import DisagreementSelector
from preflab.testing.factories import make_segments


class LinearModel:
    """M linear rewards r_m(s) = w_m · s: a RewardModel with nothing else."""

    def __init__(self, w: np.ndarray) -> None:
        self.w = np.asarray(w, np.float64)  # (M, obs_dim)

    def predict(self, obs: np.ndarray, acts: np.ndarray | None = None) -> np.ndarray:
        return self.w @ np.asarray(obs, np.float64).T

    def segment_returns(self, batch: SegmentBatch) -> np.ndarray:
        obs = batch.obs.numpy().astype(np.float64) * batch.mask.numpy()[..., None]
        return np.einsum("md,ntd->mn", self.w, obs)


def test_probabilities_and_variance_by_hand() -> None:
    # member 0 is indifferent between rows 0 and 1, member 1 prefers row 0 with odds 3:1
    returns = np.array([[0.0, 0.0], [math.log(3.0), 0.0]])
    np.testing.assert_allclose(preference_probs(returns, [0], [1]), [[0.5], [0.75]])
    v = pair_variance(returns)
    # mean 0.625, variance ((0.125)² + (0.125)²) / 2
    np.testing.assert_allclose(v, [[0.0, 0.015625], [0.015625, 0.0]], atol=1e-12)
    assert pair_variance(returns[:1]).max() == 0.0


def test_the_ensemble_is_a_reward_model_with_member_wise_shapes() -> None:
    ens = RewardEnsemble(2, 1, RewardConfig(members=3, hidden=(8,)), seed=0)
    assert isinstance(ens, RewardModel)
    batch = SegmentBatch.from_segments(
        make_segments(
            5,
            rng=np.random.default_rng(0),
            length=6,
            random_acts=False,
            random_rewards=False,
            id_prefix="s",
        )
    )
    assert ens.predict(np.zeros((7, 2)), np.zeros((7, 1))).shape == (3, 7)
    r = ens.segment_returns(batch)
    assert r.shape == (3, 5)


def test_selectors_need_only_the_protocol() -> None:
    cands = make_segments(
        16,
        rng=np.random.default_rng(0),
        length=6,
        random_acts=False,
        random_rewards=False,
        id_prefix="s",
    )
    model = LinearModel([[1.0, 0.0], [0.0, 1.0], [1.0, 1.0]])
    assert isinstance(model, RewardModel)
    qs = DisagreementSelector(oversample=20).select(cands, model, 4, np.random.default_rng(0))
    ret = model.segment_returns(SegmentBatch.from_segments(cands))
    idx = {s.id: i for i, s in enumerate(cands)}
    var = pair_variance(ret)
    asked = [var[idx[q.a[0]], idx[q.b[0]]] for q in qs]
    assert len(qs) == 4 and min(asked) >= np.median(var[np.triu_indices(len(cands), 1)])
    gq = GroupwiseSelector().select(cands, model, 2, np.random.default_rng(0))
    assert gq and all(q.kind == "group" for q in gq)
    # one member: no disagreement, the variance selector falls back to random pairs
    one = LinearModel([[1.0, 0.0]])
    assert len(DisagreementSelector().select(cands, one, 3, np.random.default_rng(0))) == 3


@pytest.mark.parametrize("shape", [(3,), (1, 2, 3)])
def test_returns_must_be_members_by_segments(shape) -> None:
    from preflab.errors import DataError

    with pytest.raises(DataError, match="members, segments"):
        pair_variance(np.zeros(shape))
