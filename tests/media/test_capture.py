"""State capture in SegmentRecorder: stored states reproduce the stored observations."""

from __future__ import annotations

import functools
from pathlib import Path

import gymnasium as gym
import numpy as np
import pytest
from stable_baselines3.common.vec_env import VecNormalize

from preflab.envs import make_env, make_vec_env
from preflab.errors import DataError
from preflab.media.capture import capture_for, capture_state, register_capture
from preflab.policy.reward_wrapper import SegmentRecorder
from preflab.store.arrays import ArrayStore
from preflab.store.feedback_store import FeedbackStore
from preflab.testing.factories import make_segment


def record(env_id: str, n_envs: int, length: int, steps: int, seed: int = 0) -> SegmentRecorder:
    venv = make_vec_env(env_id, n_envs, seed=seed)
    rec = SegmentRecorder(venv, length, env_id=env_id)
    rec.reset()
    rng = np.random.default_rng(seed)
    space = venv.action_space
    for _ in range(steps):
        acts = rng.uniform(space.low, space.high, (n_envs, *space.shape)).astype(np.float32)
        rec.step(acts)
    return rec


def obs_from_state(env: gym.Env, state: np.ndarray) -> np.ndarray:
    """The observation a fresh env produces when put into ``state`` (independent of capture)."""
    u = env.unwrapped
    if hasattr(u, "set_state"):  # MuJoCo
        u.set_state(state[: u.model.nq], state[u.model.nq :])
    else:
        u.state = state.copy()
    return np.asarray(u._get_obs(), np.float32)


@pytest.mark.parametrize(
    ("env_id", "n_envs", "length", "steps"),
    [("Pendulum-v1", 3, 50, 420), ("Hopper-v5", 2, 10, 300)],
)
def test_states_reproduce_observations(env_id: str, n_envs: int, length: int, steps: int) -> None:
    """Every row of every segment: obs of a fresh env set to the stored state == stored obs.

    Pendulum episodes end by time limit at 200 steps and Hopper's by falling, so segments
    before and after auto-resets are covered (the state before the step that ended an episode
    belongs to that episode; the first state of the next episode is the reset state)."""
    rec = record(env_id, n_envs, length, steps)
    segs = rec.pop_segments()
    assert rec.captures_states and len(segs) >= 6
    starts = {s.start for s in segs}
    assert 0 in starts and max(starts) > 0
    env = make_env(env_id)
    env.reset(seed=123)
    for s in segs:
        assert s.states is not None and s.states.dtype == np.float64
        assert s.states.shape[0] == s.length
        for t in range(s.length):
            np.testing.assert_allclose(obs_from_state(env, s.states[t]), s.obs[t], atol=1e-6)


def test_state_layouts() -> None:
    hop = make_env("Hopper-v5", seed=0)
    u = hop.unwrapped
    np.testing.assert_array_equal(capture_state(hop), np.concatenate([u.data.qpos, u.data.qvel]))
    pend = make_env("Pendulum-v1", seed=0)
    np.testing.assert_array_equal(capture_state(pend), pend.unwrapped.state)
    cart = make_env("CartPole-v1", seed=0)
    np.testing.assert_array_equal(capture_state(cart), np.asarray(cart.unwrapped.state))
    grid = make_env("PrefLab/Lock-v0", seed=0)
    np.testing.assert_array_equal(capture_state(grid), grid.unwrapped.gen_obs())
    assert capture_state(make_env("FrozenLake-v1")) is None
    door = make_env("MiniGrid-DoorKey-6x6-v0", seed=0)
    door.action_space.seed(0)
    m = door.unwrapped
    for _ in range(30):
        st = capture_state(door)
        assert st is not None
        carried = m.carrying.encode() if m.carrying is not None else (-1, -1, -1)
        np.testing.assert_array_equal(st[:6], [*m.agent_pos, m.agent_dir, *carried])
        np.testing.assert_array_equal(st[6:], m.grid.encode().reshape(-1))
        door.step(door.action_space.sample())


def test_register_capture_and_segments_without_capture() -> None:
    venv = make_vec_env("FrozenLake-v1", 2, seed=0)
    rec = SegmentRecorder(venv, 3, env_id="FrozenLake-v1")
    rec.reset()
    for _ in range(30):
        rec.step(np.zeros(2, np.int64))
    assert not rec.captures_states
    assert all(s.states is None for s in rec.pop_segments())

    frozen = type(make_env("FrozenLake-v1").unwrapped)
    register_capture(frozen, lambda env: np.array([float(env.s)]))
    try:
        rec = SegmentRecorder(make_vec_env("FrozenLake-v1", 2, seed=0), 3, env_id="x")
        rec.reset()
        for _ in range(30):
            rec.step(np.full(2, 2, np.int64))
        segs = rec.pop_segments()
        assert rec.captures_states and segs
        for s in segs:
            assert s.states is not None
            # FrozenLake's observation is the cell index: obs one-hot == captured cell
            np.testing.assert_array_equal(s.obs.argmax(1), s.states[:, 0].astype(int))
    finally:
        from preflab.media import capture as cap

        cap._USER.clear()
    assert capture_for(make_env("FrozenLake-v1")) is None


def test_capture_through_vecenv_wrappers_and_switch_off() -> None:
    venv = VecNormalize(make_vec_env("Pendulum-v1", 2, seed=0))
    rec = SegmentRecorder(venv, 5, env_id="Pendulum-v1")
    assert rec.captures_states
    off = SegmentRecorder(make_vec_env("Pendulum-v1", 2, seed=0), 5, capture_states=False)
    off.reset()
    for _ in range(10):
        off.step(np.zeros((2, 1), np.float32))
    assert not off.captures_states
    assert all(s.states is None for s in off.pop_segments())


# a 4-step Pendulum segment with the given simulator states (its id depends on obs and acts only)
pendulum_segment = functools.partial(
    make_segment,
    obs=np.arange(12, dtype=np.float32).reshape(4, 3),
    acts=np.ones((4, 1), np.float32),
    env_id="Pendulum-v1",
)


def test_segment_states_validation() -> None:
    s = pendulum_segment(states=np.ones((4, 2), np.float32))
    assert s.states is not None and s.states.dtype == np.float64
    with pytest.raises(DataError, match="states must have shape"):
        pendulum_segment(states=np.ones((3, 2)))
    with pytest.raises(DataError, match="states must have shape"):
        pendulum_segment(states=np.ones(4))
    with pytest.raises(DataError, match="NaN or infinite"):
        pendulum_segment(states=np.array([[0.0, np.nan]] * 4))
    # the id is a hash of obs and acts only
    assert (
        pendulum_segment().id
        == pendulum_segment(states=np.zeros((4, 2))).id
        == pendulum_segment(states=np.ones((4, 5))).id
    )


def test_states_round_trip_through_store(tmp_path: Path) -> None:
    store = FeedbackStore(tmp_path / "feedback.db")
    states = np.random.default_rng(0).normal(size=(4, 2))
    with_states, without = (
        pendulum_segment(states=states),
        make_segment(
            obs=np.arange(15, dtype=np.float32).reshape(5, 3),
            acts=np.ones((5, 1)),
            env_id="Pendulum-v1",
        ),
    )
    store.segments.add([with_states, without])
    back = {s.id: s for s in store.segments.all()}
    np.testing.assert_array_equal(back[with_states.id].states, states)
    assert back[without.id].states is None


def test_old_npz_without_states_loads(tmp_path: Path) -> None:
    arrays = ArrayStore(tmp_path)
    s = pendulum_segment()
    p = arrays.path(s.id)
    p.parent.mkdir(parents=True)
    np.savez_compressed(p, obs=s.obs, acts=s.acts, true_rewards=s.true_rewards)  # old layout
    out = arrays.read(s.id)
    assert set(out) == {"obs", "acts", "true_rewards"}


def test_failing_capture_switches_off_without_stopping_training(
    caplog: pytest.LogCaptureFixture,
) -> None:
    frozen = type(make_env("FrozenLake-v1").unwrapped)
    calls = {"n": 0}

    def flaky(env: object) -> np.ndarray:
        calls["n"] += 1
        if calls["n"] > 20:
            raise RuntimeError("capture broke")
        return np.zeros(1)

    register_capture(frozen, flaky)
    try:
        rec = SegmentRecorder(make_vec_env("FrozenLake-v1", 2, seed=0), 3, env_id="FrozenLake-v1")
        rec.reset()
        for _ in range(30):
            rec.step(np.zeros(2, np.int64))
        segs = rec.pop_segments()
    finally:
        from preflab.media import capture as cap

        cap._USER.clear()
    assert not rec.captures_states and "capture broke" in caplog.text
    assert segs[0].states is not None and segs[-1].states is None
