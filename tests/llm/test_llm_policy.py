"""Slow: PPO on potential-difference rewards from ranked NoLock state pairs reaches the goal."""

from __future__ import annotations

import numpy as np
import pytest
import torch

from preflab.bench.llm_fig7 import one_run

torch.set_num_threads(1)


@pytest.mark.slow
def test_potential_rewards_from_exact_rankings_train_a_successful_agent() -> None:
    (rec,) = one_run(
        "PrefLab/NoLock-v0",
        1.0,
        1,
        seed=0,
        modes=["potential"],
        pairs=2500,
        steps=20_000,
        eval_episodes=30,
    )
    # a uniformly random policy reaches the goal in 33% of NoLock episodes (60 steps)
    assert rec["success"] > 0.5
    assert np.isfinite(rec["return"])
