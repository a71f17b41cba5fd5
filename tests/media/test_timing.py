"""Clips play at the env's real time (issue #25): the timing function against gymnasium's own
metadata and the ALE's frame skip, and encoded clips whose duration is steps × step length."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import gymnasium as gym
import numpy as np
import pytest

from preflab.envs import make_env
from preflab.media import MediaConfig, MediaService
from preflab.media.timing import (
    ATARI_HZ,
    MAX_CLIP_FPS,
    clip_timing,
    frames_per_step,
    step_seconds,
    step_seconds_of,
    timing,
    timing_of,
)
from preflab.store.feedback_store import FeedbackStore
from preflab.testing.factories import make_segment

from .test_service import recorded

T = 25
SIZE = 64


@pytest.mark.parametrize("env_id", ["Hopper-v5", "Pendulum-v1", "CartPole-v1"])
def test_step_seconds_is_one_over_render_fps(env_id: str) -> None:
    env = gym.make(env_id)
    try:
        fps = env.unwrapped.metadata["render_fps"]
    finally:
        env.close()
    assert step_seconds(env_id) == pytest.approx(1.0 / fps)
    t = clip_timing(env_id)
    assert t.fps == pytest.approx(fps) and t.playback_rate == pytest.approx(1.0)
    assert t.source == "render_fps" and t.still_frames == 0


def test_mujoco_render_fps_already_holds_the_frame_skip() -> None:
    # gymnasium: render_fps = round(1 / dt), dt = frame_skip × model timestep
    env = gym.make("Hopper-v5")
    try:
        u = env.unwrapped
        dt = u.frame_skip * u.model.opt.timestep
    finally:
        env.close()
    assert step_seconds("Hopper-v5") == pytest.approx(dt, rel=0.01)


def _sb3_frames_per_step(venv: object) -> tuple[int, int]:
    """(SB3 MaxAndSkipEnv skip, ALE frameskip) of the first env of PrefLab's Atari stack, found
    by isinstance rather than by the timing module's attribute walk."""
    from ale_py.env import AtariEnv
    from stable_baselines3.common.atari_wrappers import MaxAndSkipEnv

    env = venv.venv.envs[0]  # type: ignore[attr-defined]  # VecFrameStack → DummyVecEnv
    skip = None
    while not isinstance(env, AtariEnv):
        if isinstance(env, MaxAndSkipEnv):
            skip = env._skip
        env = env.env
    assert skip is not None
    return skip, env._frameskip


def test_pong_agent_step_is_its_emulator_frames_at_60_hz() -> None:
    from preflab.pixels.atari import make_atari_vec_env

    venv = make_atari_vec_env("ALE/Pong-v5", 1, seed=0)
    try:
        skip, ale_skip = _sb3_frames_per_step(venv)
        expected = skip * ale_skip / 60.0  # the Atari 2600 draws 60 frames per second
        assert (skip, ale_skip) == (4, 1)  # SB3 skips, the ALE's own skip is off
        assert step_seconds_of(venv) == pytest.approx(expected)
        assert frames_per_step(venv) == skip * ale_skip
    finally:
        venv.close()
    assert step_seconds("ALE/Pong-v5") == pytest.approx(expected)
    assert clip_timing("ALE/Pong-v5").fps == pytest.approx(15.0)
    assert timing("ALE/Pong-v5").source == "atari"
    # a bare ALE env: its own frame skip (v5: 4) at 60 Hz; a NoFrameskip id: 1 frame per step
    for env_id, kwargs in [("ALE/Pong-v5", {}), ("PongNoFrameskip-v4", {})]:
        env = gym.make(env_id, **kwargs)
        try:
            assert step_seconds_of(env) == pytest.approx(env.unwrapped._frameskip / ATARI_HZ)
        finally:
            env.close()


def test_grid_worlds_and_unknown_ids() -> None:
    env = make_env("PrefLab/NoLock-v0")
    try:
        assert step_seconds("PrefLab/NoLock-v0") == pytest.approx(step_seconds_of(env))
    finally:
        env.close()
    assert timing("No/Such-v0").source == "default" and timing("").source == "default"
    assert timing_of(object()).source == "default"


def test_fixed_fps_and_fast_envs_play_back_at_real_time() -> None:
    fixed = clip_timing("Hopper-v5", fps=30)
    assert fixed.fps == 30 and fixed.playback_rate * fixed.fps == pytest.approx(fixed.steps_per_s)
    still = clip_timing("Pendulum-v1", still_s=0.3)
    assert still.still_frames == round(0.3 * still.fps)
    assert still.clip_seconds(T) == pytest.approx((T + 2 * still.still_frames) / still.fps)
    assert clip_timing("Hopper-v5").fps <= MAX_CLIP_FPS


# ----- encoded clips ---------------------------------------------------------------------------
@pytest.fixture(scope="module")
def media(tmp_path_factory: pytest.TempPathFactory) -> Iterator[dict]:
    root = tmp_path_factory.mktemp("timing")
    store = FeedbackStore(root / "feedback.db")
    hop = recorded("Hopper-v5", 1, seed=3)[0]
    pend = recorded("Pendulum-v1", 1, seed=4)[0]
    rng = np.random.default_rng(0)
    pong = make_segment(
        obs=rng.integers(0, 255, (T, 4, 84, 84), dtype=np.uint8), env_id="ALE/Pong-v5"
    )
    store.segments.add([hop, pend, pong])
    service = MediaService(store, root / "cache", config=MediaConfig(size=SIZE, workers=1))
    yield {"media": service, "segs": {"Hopper-v5": hop, "Pendulum-v1": pend, "ALE/Pong-v5": pong}}
    service.close()
    store.close()


def _decoded(path: Path) -> tuple[int, float]:
    """(frames, seconds) counted by decoding the whole file with imageio-ffmpeg's ffmpeg."""
    import imageio_ffmpeg

    return imageio_ffmpeg.count_frames_and_secs(str(path))


@pytest.mark.parametrize("env_id", ["Hopper-v5", "Pendulum-v1", "ALE/Pong-v5"])
@pytest.mark.parametrize("still", [False, True])
def test_encoded_clip_lasts_its_steps_in_real_time(media: dict, env_id: str, still: bool) -> None:
    service: MediaService = media["media"]
    seg = media["segs"][env_id]
    key = service.request([seg.id], priority=0, still=still)
    assert service.wait(key, 180) == "ready", service.clip_info(key)
    n_frames, seconds = _decoded(service.path(key))  # type: ignore[arg-type]
    t = service.timing(env_id, still=still)
    pad = 2 * t.still_frames
    assert (t.still_frames > 0) == still
    assert n_frames == seg.length + pad
    one_frame = 1.0 / t.fps
    real = seg.length * step_seconds(env_id)  # the segment's real duration
    assert abs(seconds - (real + pad * one_frame)) <= one_frame + 1e-6
    info = service.clip_info(key)
    assert info is not None and info.fps == pytest.approx(t.fps)
    assert info.n_steps == seg.length and info.still_frames == t.still_frames
    assert (
        service.key_for([seg.id], still=still) == key != service.key_for([seg.id], still=not still)
    )
