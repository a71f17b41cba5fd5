"""RIME's warm start: the intrinsic reward's scaling and the members' regression onto it
(issue #59, item 1)."""

import numpy as np
import pytest
import torch

from preflab.config import TrainConfig
from preflab.errors import ConfigError, DataError
from preflab.reward import FitConfig, RewardConfig, RewardEnsemble, RewardTrainer, RimeConfig
from preflab.reward.warmstart import intrinsic_targets, warm_start


def test_intrinsic_targets_are_centred_and_scaled_by_their_largest_magnitude() -> None:
    """d = (1, 1, 4): mean 2, deviations (−1, −1, 2), largest magnitude 2 → (−½, −½, 1);
    d = (1, 2, 3) → (−1, 0, 1); equal distances carry no information → 0."""
    np.testing.assert_allclose(intrinsic_targets(np.array([1.0, 1.0, 4.0])), [-0.5, -0.5, 1.0])
    np.testing.assert_allclose(intrinsic_targets(np.array([1.0, 2.0, 3.0])), [-1.0, 0.0, 1.0])
    np.testing.assert_array_equal(intrinsic_targets(np.full(4, 3.0)), np.zeros(4))


def test_warm_start_fits_every_member_to_the_target() -> None:
    """A target that is a smooth function of the state (tanh of the first coordinate): after
    300 steps every member's per-step reward follows it (correlation > 0.95) and the loss fell
    by more than half."""
    rng = np.random.default_rng(0)
    obs = rng.normal(size=(500, 3)).astype(np.float32)
    acts = rng.uniform(-1, 1, size=(500, 2)).astype(np.float32)
    target = np.tanh(obs[:, 0])
    ens = RewardEnsemble(3, 2, RewardConfig(members=3, hidden=(32,)), seed=1)
    trainer = RewardTrainer(ens)
    gen = torch.Generator().manual_seed(0)
    losses = warm_start(
        ens, trainer.optimizer, obs, acts, target, steps=300, batch_size=128, gen=gen
    )
    assert len(losses) == 300 and np.mean(losses[-20:]) < 0.5 * np.mean(losses[:5])
    pred = ens.predict(obs, acts)  # (members, N): the raw per-step rewards
    for m in range(3):
        assert np.corrcoef(pred[m], target)[0, 1] > 0.95


def test_warm_start_refuses_mismatched_data() -> None:
    ens = RewardEnsemble(3, 2, RewardConfig(members=3, hidden=(8,)), seed=1)
    with pytest.raises(DataError, match="as many"):
        warm_start(
            ens,
            RewardTrainer(ens).optimizer,
            np.zeros((4, 3), np.float32),
            np.zeros((3, 2), np.float32),
            np.zeros(4, np.float32),
            steps=1,
            batch_size=2,
            gen=torch.Generator(),
        )


def test_a_warm_start_without_pretraining_is_refused() -> None:
    """The warm start fits the pre-training's intrinsic reward; a run without pre-training
    (unsup_steps 0) is told to add it or drop the warm start, before anything runs."""
    fit = FitConfig(rime=RimeConfig(warm_start_steps=10))
    with pytest.raises(ConfigError, match="--unsup-steps"):
        TrainConfig(algo="sac", fit=fit)
    assert TrainConfig(algo="sac", unsup_steps=100, fit=fit).fit.rime.warm_start_steps == 10
