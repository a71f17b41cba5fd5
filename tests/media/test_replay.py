"""Replayers: a stored state renders exactly like the live env in that state."""

from __future__ import annotations

import numpy as np
import pytest

from preflab.envs import make_env
from preflab.media.capture import capture_state
from preflab.media.replay import (
    MujocoReplayer,
    env_fps,
    fit_frame,
    make_replay_env,
    replayer_for,
)

SIZE = 96


def walk(env_id: str, steps: int, seed: int = 0) -> tuple[object, list[np.ndarray]]:
    env = make_env(env_id, seed=seed, render_mode="rgb_array")
    env.action_space.seed(seed)
    states = [capture_state(env)]
    for _ in range(steps):
        _, _, term, trunc, _ = env.step(env.action_space.sample())
        if term or trunc:
            break
        states.append(capture_state(env))
    return env, states  # type: ignore[return-value]


@pytest.mark.parametrize(
    "env_id", ["PrefLab/Lock-v0", "PrefLab/MultiLock-v0", "MiniGrid-DoorKey-5x5-v0"]
)
def test_grid_replay_matches_live_render(env_id: str) -> None:
    live = make_env(env_id, seed=1, render_mode="rgb_array")
    live.action_space.seed(1)
    replay = replayer_for(make_replay_env(env_id, SIZE), SIZE)
    assert replay is not None
    tile = replay.tile  # type: ignore[attr-defined]
    u = live.unwrapped
    for _ in range(40):
        state = capture_state(live)
        expect = fit_frame(u.grid.render(tile, u.agent_pos, u.agent_dir), SIZE)
        np.testing.assert_array_equal(replay.frame(state), expect)
        _, _, term, trunc, _ = live.step(live.action_space.sample())
        if term or trunc:
            break


def test_classic_control_replay_matches_live_render() -> None:
    live, states = walk("Pendulum-v1", 5)
    live.unwrapped.last_u = None  # type: ignore[attr-defined]
    expect = fit_frame(live.render(), SIZE)  # type: ignore[attr-defined]
    replay = replayer_for(make_replay_env("Pendulum-v1", SIZE), SIZE)
    assert replay is not None
    got = replay.frame(states[-1])
    np.testing.assert_array_equal(got, expect)
    assert not np.array_equal(replay.frame(states[0]), got)
    cart = replayer_for(make_replay_env("CartPole-v1", SIZE), SIZE)
    assert cart is not None and cart.frame(np.zeros(4)).shape == (64, 96, 3)


def test_mujoco_replay_is_deterministic_and_follows_the_body() -> None:
    _, states = walk("Hopper-v5", 15)
    a = replayer_for(make_replay_env("Hopper-v5", SIZE), SIZE)
    b = replayer_for(make_replay_env("Hopper-v5", SIZE), SIZE)
    assert isinstance(a, MujocoReplayer) and isinstance(b, MujocoReplayer)
    frames = [a.frame(s) for s in states]
    assert frames[0].shape == (SIZE, SIZE, 3) and frames[0].dtype == np.uint8
    np.testing.assert_array_equal(b.frame(states[-1]), frames[-1])  # fresh env, same pixels
    assert not np.array_equal(frames[0], frames[-1])
    # 5 m further along x: the camera follows, so the lookat point moves with the body
    far = states[-1].copy()
    far[0] += 5.0
    a.frame(far)
    np.testing.assert_allclose(a.cam.lookat[0] - 5.0, _lookat_x(a, states[-1]), atol=1e-9)
    a.close()
    b.close()


def _lookat_x(rp: MujocoReplayer, state: np.ndarray) -> float:
    rp.frame(state)
    return float(rp.cam.lookat[0])


def test_fit_frame_keeps_aspect_with_even_sides() -> None:
    img = np.zeros((400, 600, 3), np.uint8)
    assert fit_frame(img, 256).shape == (170, 256, 3)
    assert fit_frame(np.zeros((99, 99, 4), np.uint8), 99 + 1).shape == (100, 100, 3)
    same = np.ones((64, 32, 3), np.uint8)
    assert fit_frame(same, 64) is not None and fit_frame(same, 64).shape == (64, 32, 3)


def test_fps_from_metadata_capped() -> None:
    assert env_fps(make_env("Pendulum-v1")) == 30
    assert env_fps(make_env("Hopper-v5")) == 60  # 125 Hz capped
    assert env_fps(object()) == 30
