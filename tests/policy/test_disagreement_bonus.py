"""RUNE's exploration bonus: the reward members' disagreement added to the policy's reward with
a decaying weight (issue #28, item 3)."""

import numpy as np
import pytest

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


def test_the_bonus_is_the_members_spread_in_reward_units_times_a_decaying_weight() -> None:
    """r = r̂ + β₀ (1 − ρ)^k · std_m(r̂_m) / s, with r̂ the reward the policy sees without the
    bonus and s its re-standardising scale; k is the run's env step, read from the clock."""
    ens = _fitted_ensemble()
    rng = np.random.default_rng(1)
    obs, acts = rng.normal(size=(7, 3)), rng.normal(size=(7, 1))
    k = [0]
    cfg = PolicyRewardConfig(disagreement_bonus=0.05, bonus_decay=1e-3)
    pr = PolicyReward(cfg, model=ens, clock=lambda: k[0])
    pr.fitted = True
    plain = ens.reward(obs, acts)
    members = ens.predict(obs, acts, normalise=True)
    spread = np.std(members, axis=0) / float(ens.mix_std)
    for step in (0, 1000, 5000):
        k[0] = step
        beta = 0.05 * (1 - 1e-3) ** step
        assert pr.bonus_weight() == pytest.approx(beta)
        np.testing.assert_allclose(pr(obs, acts, obs), plain + beta * spread, rtol=1e-5)
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
