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
from preflab_bench._studio_session_report import _groups_section, _pairs_error
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


Z95 = 1.959963984540054
"""The 97.5 % quantile of the standard normal: the 95 % interval's z."""


def _wilson_by_root(k: int, n: int, z: float = Z95) -> float:
    """The upper root p of (k/n − p)² = z² p (1 − p) / n, solved as a quadratic."""
    ph = k / n
    roots = np.roots([1 + z * z / n, -(2 * ph + z * z / n), ph * ph])
    return float(max(roots.real))


@pytest.mark.parametrize(("k", "n"), [(0, 10), (3, 40), (20, 40), (39, 40)])
def test_wilson_upper_end_solves_the_score_equation(k: int, n: int) -> None:
    """The report's bound is the library's Wilson interval (scipy's): the score equation's
    upper root at the exact 95 % z."""
    upper, text = _pairs_error(k, n)
    assert upper == pytest.approx(_wilson_by_root(k, n), abs=1e-9)
    assert f"({k}/{n}; 95 % Wilson upper end {100 * _wilson_by_root(k, n):.1f} %)" in text


def test_wilson_upper_end_of_none_in_ten_is_the_tabulated_value() -> None:
    assert _pairs_error(0, 10)[0] == pytest.approx(0.2775, abs=5e-5)


def test_no_pairwise_answers_give_no_bound() -> None:
    """0 of 0 has no error rate: no bound (Wilson's 0 of 0 is all of [0, 1]), and the text says
    there were no answers."""
    upper, text = _pairs_error(0, 0)
    assert upper is None and "kept no answers" in text


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


def test_groups_error_is_within_up_to_the_pairs_wilson_upper_end_by_hand() -> None:
    """Pairs 30 wrong of 600 (5 %): Wilson's upper end by hand, z = 1.96 (z² = 3.8416):
    centre 0.05 + 3.8416/1200 = 0.0532013, half-width 1.96·√(0.05·0.95/600 + 3.8416/1440000)
    = 1.96·√8.18340e−5 = 0.0177306, over 1 + 3.8416/600 = 1.0064027: 0.07048 (z = 1.95996:
    0.07048 too, to 5 places). Groups 211 wrong of 3000 (7.03 %) are within it, 213 (7.10 %)
    are not."""
    pairs = [_pairs_row(s, 11 + s, 200, 10) for s in range(3)]
    assert _pairs_error(30, 600)[0] == pytest.approx(0.07048, abs=5e-6)
    within = [_groups_row(s, 40.0, 1000, e) for s, e in enumerate((70, 70, 71))]
    md = _groups_section(pairs + within)
    assert "**met**" in md and "error within: yes" in md
    assert "against pairs 5.0 % (30/600; 95 % Wilson upper end 7.0 %)" in md
    above = [_groups_row(s, 40.0, 1000, e) for s, e in enumerate((71, 71, 71))]
    assert "**missed**" in _groups_section(pairs + above)


def test_no_pairwise_answers_kept_give_no_verdict() -> None:
    """Pairwise sessions that kept no answers (0 of 0) say so: no verdict and 'error within:
    unknown', not 'missed' (the report's own Wilson bound was NaN for n = 0, and NaN compares
    false) nor 'met' (the library's interval of 0 of 0 is [0, 1], which any error is within)."""
    empty = [{**_pairs_row(s, 11 + s, 1, 0), "answers_kept": 0} for s in range(3)]
    fast = [_groups_row(s, 40.0, 150, 9) for s in range(3)]
    md = _groups_section(empty + fast)
    assert "**no verdict (no pairwise answers kept" in md
    assert "error within: unknown" in md and "0/0: the pairwise sessions kept no answers" in md
    assert "**met**" not in md and "**missed**" not in md


def test_groups_without_labels_give_no_verdict() -> None:
    pairs = [_pairs_row(s, 11 + s, 200, 10) for s in range(3)]
    none = [{**_groups_row(s, 40.0, 1, 0), "labels": 0} for s in range(3)]
    md = _groups_section(pairs + none)
    assert "**no verdict (no groups labels" in md and "error within: unknown" in md


def test_pairwise_sessions_that_labelled_nothing_give_no_ratio() -> None:
    """Labels per minute of 0 on every pairwise seed: no ratio to divide by, and no verdict."""
    idle = [{**_pairs_row(s, 0.0, 1, 0), "answers_kept": 0} for s in range(3)]
    md = _groups_section(idle + [_groups_row(s, 40.0, 150, 9) for s in range(3)])
    assert "labelled nothing (0 labels/min): no ratio, no verdict" in md


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
