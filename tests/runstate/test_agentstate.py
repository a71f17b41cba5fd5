"""Agent state: the last observation comes back with its values and its memory layout."""

from __future__ import annotations

import numpy as np
from stable_baselines3 import PPO

from preflab.runstate.agentstate import capture_agent, restore_agent


def _agent() -> PPO:
    return PPO("MlpPolicy", "Pendulum-v1", n_steps=64, batch_size=32, seed=0, device="cpu")


def test_restored_last_obs_keeps_the_transposed_layout_of_image_observations() -> None:
    # SB3 hands image observations to the policy as np.transpose views (VecTransposeImage); a
    # convolution over a contiguous copy rounds differently, and a resumed run drifts
    frames = np.arange(2 * 8 * 8 * 4, dtype=np.uint8).reshape(2, 8, 8, 4)
    agent = _agent()
    agent._last_obs = np.transpose(frames, (0, 3, 1, 2))
    arrays: dict[str, np.ndarray] = {}
    meta, tensors = capture_agent(agent, arrays)
    fresh = _agent()
    restore_agent(fresh, meta, tensors, arrays)
    got = fresh._last_obs
    assert got.shape == (2, 4, 8, 8) and np.array_equal(got, agent._last_obs)
    assert not got.flags.c_contiguous and np.array_equal(
        np.argsort(got.strides), np.argsort(agent._last_obs.strides)
    )


def test_contiguous_last_obs_stays_contiguous() -> None:
    agent = _agent()
    agent._last_obs = np.linspace(-1, 1, 3, dtype=np.float32)[None]
    arrays: dict[str, np.ndarray] = {}
    meta, tensors = capture_agent(agent, arrays)
    fresh = _agent()
    restore_agent(fresh, meta, tensors, arrays)
    assert fresh._last_obs.flags.c_contiguous
    assert np.array_equal(fresh._last_obs, agent._last_obs)
