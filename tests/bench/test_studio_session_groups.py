"""The Groups-view session and the new-behaviour arms of ``preflab bench studio_session``: what
is read off a session (a real SQLite store, a page log written by hand), the 5b verdict, and the
backwards target on a real HalfCheetah."""

from __future__ import annotations

import gymnasium as gym
import numpy as np
import pytest

from preflab.records import Judgement, Query
from preflab.store import FeedbackStore
from preflab_bench._studio_groups_person import analyse_groups
from preflab_bench._studio_person import SessionLog
from preflab_bench._studio_session_report import _groups_section, _wilson_upper
from preflab_bench._studio_target import BackwardsReward, backwards_speed


@pytest.fixture
def store(session_store: FeedbackStore) -> FeedbackStore:
    return session_store


def test_analyse_groups_expands_answers_and_counts_label_errors(store: FeedbackStore) -> None:
    store.queries.add(
        [
            # left group all better than the right: every label right when p = 1
            Query(id="g1", kind="group", a=("s5", "s6"), b=("s0", "s1", "s2")),
            # mixed: s4 > s3 but s1 < s3; p = 1 makes the pair (s1, s3) wrong
            Query(id="g2", kind="group", a=("s4", "s1"), b=("s3",)),
            Query(id="p1", kind="pair", a=("s0",), b=("s1",)),
        ]
    )
    store.answers.add(
        [
            Judgement(id="j1", query_id="g1", annotator_id="pia", source="human", p=1.0),
            Judgement(id="j2", query_id="g2", annotator_id="pia", source="human", p=1.0),
            Judgement(id="j3", query_id="p1", annotator_id="pia", source="human", p=0.0),
        ]
    )
    log = SessionLog(
        t_open=0.0,
        t_end=120_000.0,  # two minutes
        answers=[
            {
                "saved": True,
                "mistake": False,
                "watch_s": 3.0,
                "t": 10_000.0,
                "t_cleared": 10_500.0,
                "p": 1.0,
                "a": ["s5", "s6"],
                "b": ["s0", "s1", "s2"],
            },
            {
                "saved": True,
                "mistake": True,
                "watch_s": 2.0,
                "t": 30_000.0,
                "t_cleared": 30_200.0,
                "p": 1.0,
                "a": ["s4", "s1"],
                "b": ["s3"],
            },
        ],
        visits=[
            {"q": None, "t_show": 1_000.0, "t_ready": 3_000.0},
            {"q": None, "t_show": 20_000.0, "t_ready": 20_500.0},
            {"q": None, "t_show": 40_000.0, "empty": True},
        ],
    )
    r = analyse_groups(log, store, "true", "Hopper-v5")
    assert r["group_judgements"] == 2 and r["pair_judgements"] == 1
    assert r["labels"] == 3 + 2  # max(m, n) per group answer
    assert r["labels_per_min"] == pytest.approx(5 / 2)
    assert r["label_errors"] == 1 and r["label_error"] == pytest.approx(1 / 5)
    assert r["clips_load_s"] == pytest.approx(2.0 + 0.5)
    assert r["save_s"] == pytest.approx(0.5 + 0.2)
    assert r["ui_wait_share"] == pytest.approx(3.2 / 120)
    assert r["watch_s"] == pytest.approx(5.0) and r["mistakes"] == 1


def _wilson_by_root(k: int, n: int, z: float = 1.96) -> float:
    """The upper root p of (k/n − p)² = z² p (1 − p) / n, solved as a quadratic."""
    ph = k / n
    roots = np.roots([1 + z * z / n, -(2 * ph + z * z / n), ph * ph])
    return float(max(roots.real))


@pytest.mark.parametrize(("k", "n"), [(0, 10), (3, 40), (20, 40), (39, 40)])
def test_wilson_upper_end_solves_the_score_equation(k: int, n: int) -> None:
    assert _wilson_upper(k, n) == pytest.approx(_wilson_by_root(k, n), abs=1e-9)


def test_wilson_upper_end_of_none_in_ten_is_the_tabulated_value() -> None:
    assert _wilson_upper(0, 10) == pytest.approx(0.2775, abs=5e-5)


def _groups_row(seed: int, lpm: float, labels: int, errors: int) -> dict[str, object]:
    return {
        "arm": "groups",
        "seed": seed,
        "session_s": 600.0,
        "group_judgements": 30,
        "labels": labels,
        "labels_per_answer": labels / 30,
        "mean_clips": 8.0,
        "labels_per_min": lpm,
        "label_error": errors / labels,
        "label_errors": errors,
        "watch_s": 100.0,
        "clips_load_s": 5.0,
        "ended_by": "labels",
    }


def _pairs_row(seed: int, lpm: float, kept: int, errors: int) -> dict[str, object]:
    return {
        "arm": "studio",
        "seed": seed,
        "session_s": 1000.0,
        "answers_given": kept,
        "answers_kept": kept,
        "labels_per_min": lpm,
        "label_error": errors / kept,
        "label_errors": errors,
        "ended_by": "labels",
    }


def test_groups_verdict_needs_three_times_every_seed_and_equal_error() -> None:
    pairs = [_pairs_row(s, 11 + s, 200, 10) for s in range(3)]  # 5 % error, top 13/min
    fast = [_groups_row(s, 40.0, 150, 9) for s in range(3)]  # 3.08×, 6 % ≤ Wilson upper
    assert "**met**" in _groups_section(pairs + fast)
    slow_one = [*fast[:2], _groups_row(2, 38.0, 150, 9)]  # 2.92× on one seed
    assert "**missed**" in _groups_section(pairs + slow_one)
    noisy = [_groups_row(s, 40.0, 150, 30) for s in range(3)]  # 20 % error
    assert "**missed**" in _groups_section(pairs + noisy)
    assert "no verdict (n=2" in _groups_section(pairs + fast[:2])


def test_backwards_reward_is_minus_the_torso_x_velocity() -> None:
    env = BackwardsReward(gym.make("HalfCheetah-v5"))
    env.reset(seed=0)
    base = env.unwrapped
    for _ in range(5):
        x0 = float(base.data.qpos[0])
        _obs, r, *_ = env.step(env.action_space.sample())
        assert r == pytest.approx(-(float(base.data.qpos[0]) - x0) / base.dt, rel=1e-6)
    env.close()


class _Still:
    """A policy that always outputs zero torque."""

    def predict(self, obs: np.ndarray, deterministic: bool = True) -> tuple[np.ndarray, None]:
        return np.zeros(6, np.float32), None


def test_backwards_speed_of_a_still_cheetah_is_near_zero() -> None:
    mean, std = backwards_speed(_Still(), "HalfCheetah-v5", n_episodes=1, seed=0)  # type: ignore[arg-type]
    assert abs(mean) < 0.05 and std == 0.0
