"""Segments are cut in one place (:func:`preflab.policy.rollout.cut_segments`): the recorder and
``collect_segments`` give the same segments, and a recorder's checkpoint keeps the segment in
progress."""

from __future__ import annotations

import numpy as np
from stable_baselines3.common.vec_env import DummyVecEnv

from preflab.envs import make_env
from preflab.policy.reward_wrapper import SegmentRecorder
from preflab.policy.rollout import collect_segments, sample_action
from preflab.runstate.codec import plain_attrs, set_attrs
from tests.policy.test_termination import _venv


def _pendulum(seed: int) -> DummyVecEnv:
    venv = DummyVecEnv([lambda: make_env("Pendulum-v1")])
    venv.seed(seed)
    return venv


def test_recorder_and_collect_segments_cut_alike() -> None:
    got = collect_segments(_pendulum(4), None, 120, 10, np.random.default_rng(2), env_id="p")
    rec = SegmentRecorder(_pendulum(4), 10, env_id="p", capture_states=False)
    rec.reset()
    rng = np.random.default_rng(2)
    for _ in range(120):
        rec.step(sample_action(rec.action_space, rng)[None])
    want = rec.pop_segments()
    assert len(got) == 12
    assert [(s.id, s.episode, s.start) for s in got] == [(s.id, s.episode, s.start) for s in want]
    for a, b in zip(got, want, strict=True):
        np.testing.assert_array_equal(a.obs, b.obs)
        np.testing.assert_array_equal(a.true_rewards, b.true_rewards)


def test_a_recorder_checkpoint_keeps_the_segment_in_progress() -> None:
    def run(n: int, rec: SegmentRecorder) -> list:
        for _ in range(n):
            rec.step(np.zeros((1, 1), np.float32))
        return [(s.id, s.episode, s.start) for s in rec.pop_segments()]

    whole = SegmentRecorder(_venv(9, 100, absorbing=True), 4, capture_states=False, absorbing=True)
    whole.reset()
    first = run(6, whole)  # one full segment, two steps of the next
    arrays: dict[str, np.ndarray] = {}
    state = plain_attrs(whole, arrays, "recorder")
    arrays = {k: v.copy() for k, v in arrays.items()}  # as written to disk
    rest = run(20, whole)
    again = SegmentRecorder(_venv(9, 100, absorbing=True), 4, capture_states=False, absorbing=True)
    again.venv.reset()  # the env at the same step, the recorder only from its checkpoint
    for _ in range(6):
        again.venv.step(np.zeros((1, 1), np.float32))
    set_attrs(again, state, arrays)
    assert len(first) == 1 and run(20, again) == rest and len(rest) >= 4
