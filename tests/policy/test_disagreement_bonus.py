"""RUNE's exploration bonus: the reward members' disagreement added to the policy's reward with
a decaying weight (issue #28, item 3)."""

import numpy as np
import pytest
import torch

from preflab.errors import ConfigError
from preflab.policy.shaping import PolicyReward, PolicyRewardConfig
from preflab.reward import RewardConfig, RewardEnsemble, SegmentBatch


def _fitted_ensemble(members: int = 4) -> RewardEnsemble:
    rng = np.random.default_rng(0)
    ens = RewardEnsemble(3, 1, RewardConfig(members=members, hidden=(8,)), seed=0)
    batch = SegmentBatch.from_arrays(
        rng.normal(size=(6, 5, 3)).astype(np.float32), rng.normal(size=(6, 5, 1))
    )
    ens.fit_input_stats(batch)
    ens.fit_output_stats(batch)
    ens.fit_reward_stats(batch)
    return ens


def _two_constant_members() -> RewardEnsemble:
    """Two linear members with zero weights and hand-set output biases 1.5 and 4: with the
    members' normalisation (out_mean, out_std) = ([1, −2], [0.5, 2]) they give (1.5 − 1) / 0.5 = 1
    and (4 + 2) / 2 = 3 on every step; the policy's reward is re-standardised by
    (mix_mean, mix_std) = (0.5, 2)."""
    ens = RewardEnsemble(3, 1, RewardConfig(members=2, hidden=()), seed=0)
    with torch.no_grad():
        ens.weights[0].zero_()
        ens.biases[0].copy_(torch.tensor([1.5, 4.0]).reshape(2, 1, 1))
        ens.out_mean.copy_(torch.tensor([1.0, -2.0]))
        ens.out_std.copy_(torch.tensor([0.5, 2.0]))
        ens.mix_mean.fill_(0.5)
        ens.mix_std.fill_(2.0)
    return ens


@pytest.mark.parametrize("rows", [3, 600])  # the NumPy forward (a few rows) and torch's
def test_the_bonus_is_the_members_spread_in_reward_units_times_a_decaying_weight(
    rows: int,
) -> None:
    """r = r̂ + β₀ (1 − ρ)^k · std_m(r̂_m) / s (RUNE; the population std of the members, NumPy's
    ddof 0), with r̂ the reward the policy sees without the bonus and s its re-standardising
    scale; k is the run's env step, read from the clock. By hand for members 1 and 3: r̂ =
    (2 − 0.5) / 2 = 0.75, spread = 1 / 2 = 0.5; β₀ = 0.05, ρ = 1e-3: β = 0.05 at k = 0 and
    0.05 · 0.999^1000 = 0.0183848 at k = 1000 (bonus 0.0091924)."""
    ens = _two_constant_members()
    rng = np.random.default_rng(1)
    obs, acts = rng.normal(size=(rows, 3)), rng.normal(size=(rows, 1))
    r, spread = ens.reward_and_disagreement(obs, acts)
    np.testing.assert_allclose(r, np.full(rows, 0.75), rtol=1e-6)
    np.testing.assert_allclose(spread, np.full(rows, 0.5), rtol=1e-6)
    k = [0]
    cfg = PolicyRewardConfig(disagreement_bonus=0.05, bonus_decay=1e-3)
    pr = PolicyReward(cfg, model=ens, clock=lambda: k[0])
    pr.fitted = True
    for step, beta, want in ((0, 0.05, 0.775), (1000, 0.0183848, 0.75 + 0.0091924)):
        k[0] = step
        assert pr.bonus_weight() == pytest.approx(beta, rel=1e-5)
        np.testing.assert_allclose(pr.base(obs, acts, obs), np.full(rows, want), rtol=1e-6)
        np.testing.assert_allclose(pr(obs, acts, obs), np.full(rows, want), rtol=1e-6)
    k[0] = 5000
    assert pr.bonus_weight() < 0.05 * 0.01  # after 5,000 steps at ρ = 1e-3 almost nothing is left


def test_no_bonus_when_off_or_when_members_agree() -> None:
    ens = _fitted_ensemble(members=1)
    obs, acts = np.ones((3, 3)), np.zeros((3, 1))
    pr = PolicyReward(PolicyRewardConfig(disagreement_bonus=0.5), model=ens, clock=lambda: 0)
    pr.fitted = True
    np.testing.assert_allclose(pr(obs, acts, obs), ens.reward(obs, acts), rtol=1e-6)
    off = PolicyReward(PolicyRewardConfig(), model=_fitted_ensemble(), clock=lambda: 0)
    assert off.bonus_weight() == 0.0


@pytest.mark.parametrize(
    ("kwargs", "match"),
    [
        ({"disagreement_bonus": -0.1}, "disagreement_bonus"),
        ({"bonus_decay": 1.0}, "bonus_decay"),
        ({"disagreement_bonus": 0.05, "mode": "potential"}, "direct"),
    ],
)
def test_bad_bonus_settings_are_refused(kwargs: dict, match: str) -> None:
    with pytest.raises(ConfigError, match=match):
        PolicyRewardConfig(**kwargs)
