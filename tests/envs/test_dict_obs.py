"""Dict observations (what DeepMind Control returns through shimmy) are flattened into one vector
with each key's place kept, by every env PrefLab builds, and a run trains on them."""

from __future__ import annotations

from typing import Any

import gymnasium as gym
import numpy as np
import pytest
from gymnasium import spaces

from preflab.config import TrainConfig
from preflab.envs import FlatDict, dict_layout, make_env, make_vec_env, unflatten
from preflab.runs import train


class DictPendulum(gym.ObservationWrapper[Any, Any, Any]):
    """Pendulum-v1 with its observation split into a Dict, one key nested."""

    def __init__(self) -> None:
        super().__init__(gym.make("Pendulum-v1"))
        box = lambda n: spaces.Box(-8.0, 8.0, (n,), np.float32)  # noqa: E731
        self.observation_space = spaces.Dict(
            {"angle": box(2), "motion": spaces.Dict({"speed": box(1)})}
        )

    def observation(self, obs: np.ndarray) -> dict[str, Any]:
        return {"angle": obs[:2], "motion": {"speed": obs[2:]}}


def test_layout_says_where_each_key_lies() -> None:
    space = spaces.Dict(
        {
            "height": spaces.Box(0, 1, (1,)),
            "orientations": spaces.Box(-1, 1, (2, 7)),
            "goal": spaces.Dict({"xy": spaces.Box(-1, 1, (2,))}),
        }
    )
    layout = dict_layout(space)
    obs = space.sample()
    flat = spaces.flatten(space, obs)
    # gymnasium keeps a Dict's keys sorted; the layout follows the space's own order
    assert [f.key for f in layout] == ["goal/xy", "height", "orientations"]
    assert layout[-1].stop == flat.shape[0] == 1 + 14 + 2
    by_key = {
        "height": obs["height"],
        "orientations": obs["orientations"],
        "goal/xy": obs["goal"]["xy"],
    }
    for f in layout:  # each slice holds that key's values, in its own shape
        np.testing.assert_array_equal(flat[f.start : f.stop].reshape(f.shape), by_key[f.key])
    back = unflatten(flat[None, :], layout)
    np.testing.assert_array_equal(back["orientations"][0], obs["orientations"])


def test_every_env_preflab_builds_is_flat() -> None:
    env = make_env(DictPendulum, seed=0)
    assert isinstance(env, FlatDict) and env.observation_space.shape == (3,)
    obs, _ = env.reset(seed=0)
    raw = gym.make("Pendulum-v1")
    want, _ = raw.reset(seed=0)
    np.testing.assert_allclose(obs, want)  # keys in the Dict's order: angle, then speed
    venv = make_vec_env(DictPendulum, n_envs=2, seed=0)
    assert venv.observation_space.shape == (3,) and venv.reset().shape == (2, 3)
    venv.close()
    with pytest.raises(TypeError, match="Dict"):
        FlatDict(gym.make("Pendulum-v1"))


def test_a_run_trains_on_dict_observations(tmp_path) -> None:
    result = train(TrainConfig.smoke(), run_dir=tmp_path / "run", env=DictPendulum)
    assert result.n_labels > 0 and np.isfinite(result.true_return)
