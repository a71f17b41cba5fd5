"""A short run of the core loop with the groupwise selector and a groupwise decision maker."""

from __future__ import annotations

import numpy as np
import pytest

from preflab.reward import FitConfig, RewardConfig
from preflab.runs import train
from preflab.sources.deciders import DecisionConfig, DecisionMaker

ROUNDS = {
    "initial_steps": 1_024,
    "steps_per_round": 1_024,
    "segment_length": 25,
    "pool_size": 120,
    "agent_kwargs": '{"n_steps": 512}',
}
"""Rounds of 1,024 PPO steps over a pool of 120 recent 25-step segments."""


@pytest.mark.parametrize("seed", [0, 1])
def test_groupwise_loop_learns_the_reward(tmp_path, seed: int, pendulum_ppo_config) -> None:
    cfg = pendulum_ppo_config(
        seed=seed,
        total_steps=2_048,
        total_labels=24,
        initial_label_frac=0.5,
        **ROUNDS,
        reward=RewardConfig(members=3, hidden=(32, 32)),
        fit=FitConfig(epochs=10),
        first_fit_epochs=40,
    )
    dm = DecisionMaker("groupwise", DecisionConfig(noise_std=0.0), rng=np.random.default_rng(seed))
    summary = train(cfg, run_dir=tmp_path / "run", source=dm, selector=dm)
    assert dm.stats.comparisons >= 10
    assert dm.stats.labels > dm.stats.comparisons  # groups expand to more labels than comparisons
    assert summary.n_labels == dm.stats.labels
    # the learned reward ranks held-out segments like the true reward (chance = 0.5)
    assert summary.reward_accuracy > 0.7
    assert summary.reward_corr > 0.5


@pytest.mark.parametrize("count", [True, False])
def test_skips_use_the_runs_budget_only_when_they_count(
    tmp_path, count: bool, pendulum_ppo_config
) -> None:
    """Over a whole run, not one round: with skips counted, comparisons answered + skipped is
    the run's total_labels (the loop does not ask a skipped comparison again); replaced, the
    answered comparisons make up for the skips."""
    cfg = pendulum_ppo_config(
        seed=3,
        total_steps=3_072,
        total_labels=30,
        initial_label_frac=0.3,
        **ROUNDS,
        reward=RewardConfig(members=3, hidden=(16,)),
        fit=FitConfig(epochs=2),
        first_fit_epochs=2,
    )
    dm = DecisionMaker(
        "interactive",
        DecisionConfig(noise_std=50.0, max_discordance=0.0, overlap_rule="discordance"),
        rng=np.random.default_rng(3),
        max_group_uses=3,
        skips_use_budget=count,
    )
    train(cfg, run_dir=tmp_path / "run", source=dm, selector=dm)
    assert dm.stats.skipped > 0  # noisy enough that some comparisons cannot be decided
    if count:
        assert dm.stats.comparisons + dm.stats.skipped == 30
    else:  # skips replaced (those of the last round can be left short: no later round)
        assert 30 - dm.stats.skipped < dm.stats.comparisons <= 30
