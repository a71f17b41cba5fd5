"""Observation spaces: flat vectors and images are supported; anything else is a clear error."""

from __future__ import annotations

import gymnasium as gym
import numpy as np
import pytest
from gymnasium import spaces

from preflab.config import TrainConfig
from preflab.envs import model_obs, obs_shape
from preflab.errors import ConfigError
from preflab.pixels.spaces import check_obs_space, image_shape
from preflab.runs import start_loop


def test_supported_spaces_and_shapes() -> None:
    assert obs_shape(spaces.Box(-1, 1, (5,))) == (5,)
    assert obs_shape(spaces.Discrete(4)) == (4,)
    assert obs_shape(spaces.Box(0, 255, (84, 84, 4), np.uint8)) == (4, 84, 84)
    assert obs_shape(spaces.Box(0, 255, (4, 84, 84), np.uint8)) == (4, 84, 84)
    assert image_shape(spaces.Box(0, 255, (84, 84), np.uint8)) == (1, 84, 84)
    last = spaces.Box(0, 255, (84, 84, 4), np.uint8)
    x = np.arange(2 * 84 * 84 * 4, dtype=np.int64).reshape(2, 84, 84, 4) % 256
    out = model_obs(x.astype(np.uint8), last)
    assert out.shape == (2, 4, 84, 84) and out.dtype == np.uint8
    np.testing.assert_array_equal(out[1, 2], x[1, :, :, 2])
    # SB3's rollout buffer hands images back as float32 0..255: converted, not rescaled
    np.testing.assert_array_equal(model_obs(x.astype(np.float32), last), out)


@pytest.mark.parametrize(
    "space",
    [
        spaces.Dict(
            {"image": spaces.Box(0, 255, (7, 7, 3), np.uint8), "direction": spaces.Discrete(4)}
        ),
        spaces.Tuple((spaces.Discrete(2), spaces.Box(-1, 1, (3,)))),
        spaces.Box(0.0, 1.0, (84, 84, 3), np.float32),
        spaces.MultiBinary(4),
    ],
)
def test_other_spaces_get_a_config_error_saying_what_to_do(space: spaces.Space) -> None:
    with pytest.raises(ConfigError) as err:
        check_obs_space(space)
    msg = str(err.value)
    assert "flat vector observations" in msg and "images" in msg
    assert "FlattenObservation" in msg and "FlatObsWrapper" in msg


def test_minigrid_run_fails_with_a_config_error_not_a_type_error(tmp_path) -> None:
    pytest.importorskip("minigrid")
    config = TrainConfig.smoke(env_id="MiniGrid-Empty-5x5-v0", algo="ppo")
    with pytest.raises(ConfigError, match="Dict observation space") as err:
        start_loop(config, tmp_path / "run")
    assert "FlatObsWrapper" in str(err.value)


def test_a_flattened_minigrid_env_is_accepted() -> None:
    minigrid = pytest.importorskip("minigrid")
    from minigrid.wrappers import FlatObsWrapper

    del minigrid
    env = FlatObsWrapper(gym.make("MiniGrid-Empty-5x5-v0"))
    check_obs_space(env.observation_space)
