"""The one random-action helper, :func:`preflab.policy.rollout.sample_action`."""

from __future__ import annotations

import numpy as np
import pytest
from gymnasium import spaces

from preflab.errors import ConfigError
from preflab.policy.rollout import sample_action


@pytest.mark.parametrize(
    "space",
    [
        spaces.Box(-2.0, 2.0, (3,), np.float32),
        spaces.Box(np.array([0.0, -1.0]), np.array([1.0, 5.0]), dtype=np.float64),
        spaces.Discrete(5, start=2),
    ],
)
def test_matches_a_seeded_gymnasium_space(space: spaces.Space) -> None:
    space.seed(11)
    rng = np.random.default_rng(11)
    for _ in range(20):
        want, got = space.sample(), sample_action(space, rng)
        assert np.array_equal(np.asarray(want), got) and got.dtype == np.asarray(want).dtype


def test_unbounded_sides_are_one_wide_and_unknown_spaces_refused() -> None:
    box = spaces.Box(-np.inf, np.inf, (4,), np.float32)
    acts = np.stack([sample_action(box, np.random.default_rng(k)) for k in range(50)])
    assert acts.shape == (50, 4) and np.all(np.abs(acts) <= 1.0) and acts.std() > 0.3
    md = sample_action(spaces.MultiDiscrete([2, 7]), np.random.default_rng(0))
    assert md.shape == (2,) and 0 <= md[0] < 2 and 0 <= md[1] < 7
    with pytest.raises(ConfigError, match="random actions"):
        sample_action(spaces.Text(5), np.random.default_rng(0))
