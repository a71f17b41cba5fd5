import math

import numpy as np
import pytest

from preflab.errors import ConfigError, DataError
from preflab.kinds import PAIR
from preflab.records import Query
from preflab.sources.teacher import SyntheticTeacher, TeacherConfig
from preflab.testing.factories import make_segment

A, B = (
    make_segment("a", true_rewards=[1.0, 0.0, 0.0], obs_dim=1),
    make_segment("b", true_rewards=[0.0, 0.0, 0.5], obs_dim=1),
)


def test_perfect_oracle_by_default() -> None:
    t = SyntheticTeacher()
    assert t.judge(A, B) == 1.0 and t.judge(B, A) == 0.0
    c = make_segment("c", true_rewards=[0.5, 0.5, 0.0], obs_dim=1)
    assert t.judge(A, c) == 0.5  # exactly equal returns


def test_mistake_rate_matches_epsilon() -> None:
    t = SyntheticTeacher(TeacherConfig(epsilon=0.2), np.random.default_rng(0))
    answers = np.array([t.judge(A, B) for _ in range(20_000)])
    wrong = np.mean(answers == 0.0)
    assert abs(wrong - 0.2) < 4 * math.sqrt(0.2 * 0.8 / 20_000)


def test_finite_beta_follows_bradley_terry() -> None:
    beta = 2.0
    t = SyntheticTeacher(TeacherConfig(beta=beta), np.random.default_rng(1))
    share = np.mean([t.judge(A, B) for _ in range(20_000)])
    expected = 1 / (1 + math.exp(-beta * (1.0 - 0.5)))
    assert abs(share - expected) < 4 * math.sqrt(expected * (1 - expected) / 20_000)


def test_myopic_gamma_weights_recent_steps_more() -> None:
    t = SyntheticTeacher(TeacherConfig(gamma=0.5))
    # a: 1 at t=0 (weight 0.25); b: 0.5 at t=2 (weight 1) → b preferred although its sum is lower
    assert t.discounted_return(A) == pytest.approx(0.25) and t.discounted_return(
        B
    ) == pytest.approx(0.5)
    assert t.judge(A, B) == 0.0


def test_skip_and_equal_thresholds() -> None:
    t = SyntheticTeacher(TeacherConfig(skip_threshold=2.0, equal_threshold=0.1))
    assert t.judge(A, B) is None
    t2 = SyntheticTeacher(TeacherConfig(equal_threshold=0.6))
    assert t2.judge(A, B) == 0.5


def test_source_protocol_and_provenance() -> None:
    t = SyntheticTeacher(annotator_id="oracle")
    q = PAIR.query("a", "b")
    t.submit([q], {"a": A, "b": B})
    (j,) = t.collect()
    assert (j.query_id, j.annotator_id, j.source, j.p) == (q.id, "oracle", "synthetic", 1.0)
    assert t.collect() == []
    c = make_segment("c", true_rewards=[0.0, 0.0, 0.0], obs_dim=1)
    segs = {"a": A, "b": B, "c": c}
    t.submit(
        [
            Query(id="g1", kind="group", a=("a", "b"), b=("c",)),
            Query(id="g2", kind="group", a=("c",), b=("a", "b")),
            Query(id="g3", kind="group", a=("a", "c"), b=("b",)),
        ],
        segs,
    )
    # group means: (a, b) = 0.75 > c = 0 both ways round; (a, c) = 0.5 equals b = 0.5
    assert [g.p for g in t.collect()] == [1.0, 0.0, 0.5]
    with pytest.raises(DataError, match="rating"):
        t.submit([Query(id="r", kind="rating", a=("a",))], {"a": A})


def test_bad_config() -> None:
    for kw in ({"beta": 0.0}, {"gamma": 0.0}, {"gamma": 1.5}, {"epsilon": -0.1}):
        with pytest.raises(ConfigError):
            TeacherConfig(**kw)


def test_equal_if_no_reward_answers_equal_for_two_scoreless_clips() -> None:
    """Paper 002's Atari oracle: two clips without any reward are equally good (even for a
    noisy teacher); a clip with reward is still judged by the preference model."""
    from preflab.sources.teacher import SyntheticTeacher, TeacherConfig

    zero_a, zero_b = (
        make_segment("a", true_rewards=[0.0, 0.0], obs_dim=2),
        make_segment("b", true_rewards=[0.0, 0.0], obs_dim=2),
    )
    scored = make_segment("c", true_rewards=[0.0, 1.0], obs_dim=2)
    cfg = TeacherConfig(beta=1.0, epsilon=0.3, equal_if_no_reward=True)
    teacher = SyntheticTeacher(cfg, np.random.default_rng(0))
    assert {teacher.judge(zero_a, zero_b) for _ in range(50)} == {0.5}
    assert teacher.judge_groups([zero_a], [zero_b]) == 0.5
    assert {teacher.judge(scored, zero_a) for _ in range(200)} == {0.0, 1.0}
    plain = SyntheticTeacher(TeacherConfig(beta=1.0), np.random.default_rng(0))
    assert {plain.judge(zero_a, zero_b) for _ in range(50)} == {0.0, 1.0}


# ----- B-Pref's teachers (Lee et al. 2021), with B-Pref's relative skip and equal rules -------
def _bpref_label(r1: np.ndarray, r2: np.ndarray, margin: float, eps_skip: float, eps_equal: float):
    """B-Pref's get_label for one deterministic pair, written out from its definition: None when
    skipped, -1 for equal, else 1 when the second segment is preferred and 0 when the first is."""
    thres_skip, thres_equal = margin * eps_skip, margin * eps_equal
    s1, s2 = float(np.sum(r1)), float(np.sum(r2))
    if thres_skip > 0 and not max(s1, s2) > thres_skip:
        return None
    if abs(s1 - s2) < thres_equal:
        return -1
    return int(s1 < s2)


def _pref(label):  # B-Pref's label → PrefLab's P(first ≻ second)
    return None if label is None else 0.5 if label == -1 else 1.0 - label


@pytest.mark.parametrize("name", ["bpref-skip", "bpref-equal"])
def test_bpref_relative_rules_answer_as_bpref_does(name: str) -> None:
    from preflab.sources.teacher import bpref_teacher

    rng = np.random.default_rng(3)
    cfg = bpref_teacher(name)
    for margin in (12.0, 40.0, -5.0, math.nan):
        t = SyntheticTeacher(cfg, np.random.default_rng(0))
        t.set_margin(margin)
        for _ in range(200):
            r1, r2 = rng.uniform(-0.5, 1.5, 10), rng.uniform(-0.5, 1.5, 10)
            a = make_segment("x", true_rewards=r1.tolist(), obs_dim=1)
            b = make_segment("y", true_rewards=r2.tolist(), obs_dim=1)
            want = _pref(_bpref_label(r1, r2, margin, cfg.skip_eps, cfg.equal_eps))
            assert t.judge(a, b) == want


def test_bpref_teachers_are_the_six_of_the_benchmark() -> None:
    from preflab.sources.teacher import BPREF_TEACHERS, bpref_teacher

    assert set(BPREF_TEACHERS) == {"oracle", "stoc", "mistake", "skip", "equal", "myopic"}
    assert bpref_teacher("bpref-stoc").beta == 1.0 and bpref_teacher("myopic").gamma == 0.9
    assert bpref_teacher("bpref-mistake").epsilon == 0.1
    assert bpref_teacher("bpref-oracle") == TeacherConfig()
    with pytest.raises(ConfigError, match="bpref-mistake"):
        bpref_teacher("bpref-mistakes")
    with pytest.raises(ConfigError, match="skip_eps"):
        TeacherConfig(skip_eps=1.5)


def test_without_a_margin_bpref_never_skips_nor_calls_equal() -> None:
    from preflab.sources.teacher import bpref_teacher

    t = SyntheticTeacher(bpref_teacher("bpref-skip"))
    assert math.isnan(t.margin) and t.uses_margin
    assert t.judge(A, B) == 1.0  # NaN margin: the oracle's answer
    t.set_margin(100.0)  # threshold 10 > both returns (1, 0.5): skipped
    assert t.judge(A, B) is None
    assert not SyntheticTeacher().uses_margin
