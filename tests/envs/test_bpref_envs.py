"""B-Pref's envs (issue #27): DeepMind Control through Shimmy and single-task Meta-World 3, built,
seeded, timed, resumed step for step and rendered from stored states."""

from __future__ import annotations

import os

import numpy as np
import pytest

from preflab.env_families import METAWORLD_EPISODE_STEPS
from preflab.envs import make_env, make_vec_env
from preflab.errors import ConfigError
from preflab.media.capture import capture_state
from preflab.media.timing import timing
from preflab.runstate.envstate import capture_vec_env, restore_vec_env

WALKER = "dm_control/walker-walk-v0"
BUTTON = "metaworld/button-press-v3"


def test_walker_walk_is_a_flat_box_with_1000_step_episodes() -> None:
    env = make_env(WALKER, seed=0)
    obs, _ = env.reset(seed=0)
    # height (1) + orientations (14) + velocity (9), flattened with the keys' layout kept
    assert obs.shape == (24,) and env.observation_space.shape == (24,)
    steps, done = 0, False
    while not done:
        obs, r, term, trunc, _ = env.step(env.action_space.sample())
        assert 0.0 <= r <= 1.0  # DeepMind Control rewards lie in [0, 1]
        steps, done = steps + 1, term or trunc
    assert steps == 1000 and trunc and not term


def test_meta_world_task_draws_its_goal_from_the_seed() -> None:
    env = make_env(BUTTON)
    a, _ = env.reset(seed=1)
    b, _ = env.reset(seed=1)
    c, _ = env.reset(seed=2)
    assert a.shape == (39,)
    np.testing.assert_array_equal(a, b)  # a seeded reset is reproducible ...
    assert not np.allclose(a[-3:], c[-3:])  # ... and another seed moves the (observed) goal
    steps, done, info = 0, False, {}
    while not done:
        _, _, term, trunc, info = env.step(env.action_space.sample())
        steps, done = steps + 1, term or trunc
    assert steps == METAWORLD_EPISODE_STEPS and "success" in info


def test_clips_play_at_the_control_rate_not_shimmys_render_fps() -> None:
    # Shimmy states render_fps = control timestep × 1000 (25 for walker); walker acts every
    # 25 ms (40 steps per second), cheetah every 10 ms; Meta-World every 5 × 2.5 ms
    assert timing(WALKER).step_seconds == pytest.approx(0.025)
    assert timing("dm_control/cheetah-run-v0").step_seconds == pytest.approx(0.010)
    assert timing(BUTTON).step_seconds == pytest.approx(0.0125)


def test_an_unknown_meta_world_task_names_the_ids() -> None:
    with pytest.raises(ConfigError, match="unknown environment id"):
        make_env("metaworld/button-mash-v3")


@pytest.mark.parametrize("env_id", [WALKER, BUTTON])
def test_resume_continues_step_for_step_across_an_episode_end(env_id: str) -> None:
    rng = np.random.default_rng(0)
    venv = make_vec_env(env_id, 2, seed=0)
    venv.reset()
    horizon = 1000 if env_id == WALKER else METAWORLD_EPISODE_STEPS
    actions = rng.uniform(-1, 1, size=(horizon + 40, 2, venv.action_space.shape[0]))
    for a in actions[: horizon - 20]:
        venv.step(a)
    arrays: dict[str, np.ndarray] = {}
    state = capture_vec_env(venv, arrays)
    assert state["exact"]
    expected = [venv.step(a) for a in actions[horizon - 20 :]]  # crosses a reset at `horizon`

    fresh = make_vec_env(env_id, 2, seed=7)  # another seed: every bit of state must come back
    fresh.reset()
    restore_vec_env(fresh, state, arrays)
    for (obs, rew, done, _), (obs2, rew2, done2, _) in zip(
        expected, (fresh.step(a) for a in actions[horizon - 20 :]), strict=True
    ):
        np.testing.assert_array_equal(obs2, obs)
        np.testing.assert_array_equal(rew2, rew)
        np.testing.assert_array_equal(done2, done)


@pytest.mark.parametrize("env_id", [WALKER, BUTTON])
def test_a_stored_state_renders_the_same_frame_in_a_fresh_env(env_id: str) -> None:
    os.environ.setdefault("MUJOCO_GL", "egl")
    from preflab.media.replay import make_replay_env, replayer_for

    env = make_replay_env(env_id, 128)
    env.reset(seed=3)
    rng = np.random.default_rng(1)
    for _ in range(25):
        env.step(rng.uniform(-1, 1, env.action_space.shape))
    state = capture_state(env)
    assert state is not None
    first = replayer_for(env, 128)
    other = make_replay_env(env_id, 128)  # its own reset put the objects elsewhere
    second = replayer_for(other, 128)
    try:
        a, b = first.frame(state), second.frame(state)
        assert a.shape == (128, 128, 3) and a.dtype == np.uint8 and a.std() > 5
        np.testing.assert_array_equal(a, b)
    finally:
        first.close()
        second.close()
        env.close()
        other.close()


class _Scripted:
    """Meta-World's own scripted expert for button-press, behind SB3's ``predict``."""

    def __init__(self) -> None:
        from metaworld.policies import SawyerButtonPressV3Policy

        self.policy = SawyerButtonPressV3Policy()

    def predict(self, obs: np.ndarray, deterministic: bool = True) -> tuple[np.ndarray, None]:
        return np.clip(self.policy.get_action(obs), -1, 1), None


class _Still:
    def predict(self, obs: np.ndarray, deterministic: bool = True) -> tuple[np.ndarray, None]:
        return np.zeros(4), None


def test_success_rate_is_reported_where_the_env_says_success() -> None:
    from preflab.policy.evaluate import evaluate_episodes

    expert = evaluate_episodes(_Scripted(), BUTTON, n_episodes=3, seed=0)
    still = evaluate_episodes(_Still(), BUTTON, n_episodes=2, seed=0)
    assert expert.success_rate == 1.0 and still.success_rate == 0.0
    assert expert.mean > still.mean
    pendulum = evaluate_episodes(_Still(), "Pendulum-v1", n_episodes=1, seed=0)
    assert pendulum.success_rate is None  # no success in its info: nothing is made up
