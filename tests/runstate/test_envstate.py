"""Vec-env state capture beyond MuJoCo: Atari emulators inside SB3's frame stack."""

from __future__ import annotations

import numpy as np
import pytest

from preflab.runstate.envstate import capture_vec_env, restore_vec_env

pytest.importorskip("ale_py")
pytest.importorskip("cv2")


def test_atari_frame_stack_and_emulator_resume_step_for_step() -> None:
    from preflab.pixels.atari import make_atari_vec_env

    actions = np.random.default_rng(0).integers(0, 6, size=(160, 2))
    env = make_atari_vec_env("ALE/Pong-v5", 2, seed=0)
    env.reset()
    for a in actions[:60]:
        env.step(a)
    arrays: dict[str, np.ndarray] = {}
    state = capture_vec_env(env, arrays)
    assert state["exact"] and [w["type"] for w in state["vec_wrappers"]] == ["VecFrameStack"]
    expected = [env.step(a) for a in actions[60:]]

    fresh = make_atari_vec_env("ALE/Pong-v5", 2, seed=1)  # another seed: all state must come back
    fresh.reset()
    restore_vec_env(fresh, state, arrays)
    for (obs, rew, done, _), (obs2, rew2, done2, _) in zip(
        expected, (fresh.step(a) for a in actions[60:]), strict=True
    ):
        np.testing.assert_array_equal(obs2, obs)  # the 4-frame stack and the emulator screens
        np.testing.assert_array_equal(rew2, rew)
        np.testing.assert_array_equal(done2, done)


def test_a_different_wrapper_stack_is_refused() -> None:
    from preflab.pixels.atari import make_atari_vec_env

    env = make_atari_vec_env("ALE/Pong-v5", 1, seed=0)
    env.reset()
    arrays: dict[str, np.ndarray] = {}
    state = capture_vec_env(env, arrays)
    state["vec_wrappers"][0]["type"] = "VecNormalize"
    with pytest.raises(ValueError, match="vec-env wrappers differ"):
        restore_vec_env(make_atari_vec_env("ALE/Pong-v5", 1, seed=0), state, arrays)
