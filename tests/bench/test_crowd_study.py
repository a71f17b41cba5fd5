"""The parts of ``bench crowd_study`` (issue #61) that need no trainer: the Bradley–Terry
person's scale against its closed form, how each kind of person answers, the crowd's label
error against a hand-worked case, and flags read at a person's n-th answer."""

from __future__ import annotations

import math

import numpy as np
import pytest

from preflab.studio.study_config import StudyConfig
from preflab.studio.study_quality import Answer
from preflab_bench._crowd_people import KINDS, Behaviour, bt_scale, sigmoid
from preflab_bench.crowd_study import flags_at, label_errors


def test_the_crowd_is_the_issues_twelve_people() -> None:
    assert len(KINDS) == 12
    assert KINDS.count("careful") == 8 and KINDS.count("careless") == 2
    assert KINDS.count("adversary") == 1 and KINDS.count("leaver") == 1


@pytest.mark.parametrize("error", [0.05, 0.1, 0.15])
def test_bt_scale_matches_the_closed_form_for_one_gap(error: float) -> None:
    # sigma(-g / tau) = e  <=>  tau = g / log((1 - e) / e)
    tau = bt_scale([2.0, -2.0], error)
    assert tau == pytest.approx(2.0 / math.log((1 - error) / error), rel=1e-6)


def test_bt_scale_gives_the_asked_mean_error_over_many_gaps() -> None:
    gaps = np.random.default_rng(0).normal(0, 30, 400)
    tau = bt_scale(gaps, 0.1)
    assert float(np.mean(sigmoid(-np.abs(gaps) / tau))) == pytest.approx(0.1, abs=1e-6)
    with pytest.raises(ValueError, match="error must be in"):
        bt_scale(gaps, 0.6)


def test_each_kind_answers_as_described() -> None:
    careful = Behaviour.of("careful", 1)
    assert 0.05 <= careful.error <= 0.15
    careful.tau = bt_scale([1.0, 10.0], careful.error)
    close = np.mean([careful.choose(1.0, 0.0) == 0.0 for _ in range(4000)])
    clear = np.mean([careful.choose(10.0, 0.0) == 0.0 for _ in range(4000)])
    assert close > clear  # errors fall on close pairs
    assert close == pytest.approx(float(sigmoid(-1.0 / careful.tau)), abs=0.03)
    adversary = Behaviour.of("adversary", 2)
    assert [adversary.choose(3.0, 1.0), adversary.choose(1.0, 3.0)] == [0.0, 1.0]
    careless = Behaviour.of("careless", 3)
    picks = [careless.choose(100.0, 0.0) for _ in range(2000)]
    assert 0.45 < np.mean(picks) < 0.55
    assert all(1.0 < careless.think_s() < 1.5 for _ in range(50))  # the studio refuses < 1 s


def _a(who: str, q: str, p: float, t: float, rt: float = 4.0) -> Answer:
    return Answer(who, q, p, rt, t)


def test_label_errors_against_a_hand_worked_case() -> None:
    # truth: q1 left, q2 left, q3 right; q4 is a check and q5 has only two answers (left out)
    truth = {"q1": 1, "q2": 1, "q3": -1, "q4": 1, "q5": 1}
    votes = {
        "A": {"q1": 1.0, "q2": 1.0, "q3": 0.0, "q4": 1.0, "q5": 1.0},
        "B": {"q1": 1.0, "q2": 0.0, "q3": 0.0, "q4": 1.0, "q5": 1.0},
        "C": {"q1": 0.0, "q2": 0.0, "q3": 1.0, "q4": 1.0},
    }
    answers = [_a(w, q, p, 0.0) for w, row in votes.items() for q, p in row.items()]
    out = label_errors(answers, truth, {"q4"}, ["A", "B", "C"], 3)
    assert out["pairs"] == 3
    # majority: q1 left (right), q2 right (wrong), q3 right (right): 1 of 3 wrong
    assert out["majority_error"] == pytest.approx(1 / 3)
    # own errors over non-check pairs: A 0/4, B 1/4, C 3/3
    assert out["person_error"] == pytest.approx({"A": 0.0, "B": 0.25, "C": 1.0})
    # SML (rank-one fit) by hand: votes A (+,+,−), B (+,−,−), C (−,−,+); means 1/3, −1/3, −1/3;
    # covariances over the 3 pairs AB 4/9, AC −8/9, BC −4/9 = r_i r_j exactly for
    # r = (√8, √2, −√8)/3, so v ∝ (2, 1, −2) (C, the adversary, weighs against): the labels
    # sign(Σ v_i f_i) are q1 +5/3, q2 +1, q3 −5/3 → left, left, right, the truth on all three
    assert out["sml_labelled"] == 3
    assert out["sml_error"] == 0.0


def test_label_errors_of_a_crowd_too_small_for_sml_has_no_sml_labels() -> None:
    """SML needs three people; with two, its column is empty (nothing labelled, error nan) and
    majority still labels every pair."""
    truth = {"q1": 1, "q2": 1, "q3": -1}
    votes = {"A": {"q1": 1.0, "q2": 1.0, "q3": 0.0}, "B": {"q1": 1.0, "q2": 0.0, "q3": 0.0}}
    answers = [_a(w, q, p, 0.0) for w, row in votes.items() for q, p in row.items()]
    out = label_errors(answers, truth, set(), ["A", "B"], 2)
    assert out["pairs"] == 3
    assert out["sml_labelled"] == 0 and math.isnan(out["sml_error"])
    # majority: q1 left (right), q2 a tie (unlabelled), q3 right (right)
    assert out["majority_labelled"] == 2 and out["majority_error"] == 0.0


def test_label_errors_with_no_pair_answered_k_times_label_nothing() -> None:
    """Early in a study no pair has k = 3 decisive answers yet: neither SML nor majority has a
    pair to label (pairs 0, errors NaN, 0 labelled; majority refused the empty vote matrix with
    a DataError before), while each person's own error is still counted: A picked q1's left
    side, the true one (0 wrong of 1); B picked q2's left side, whose truth is the right (1 of
    1); C answered nothing (NaN). With no answers at all every error is NaN."""
    truth = {"q1": 1, "q2": -1}
    answers = [_a("A", "q1", 1.0, 0.0), _a("B", "q2", 1.0, 0.0)]
    out = label_errors(answers, truth, set(), ["A", "B", "C"], 3)
    assert out["pairs"] == 0
    for name in ("sml", "majority"):
        assert out[f"{name}_labelled"] == 0 and math.isnan(out[f"{name}_error"])
    own = out["person_error"]
    assert own["A"] == 0.0 and own["B"] == 1.0 and math.isnan(own["C"])
    none = label_errors([], truth, set(), ["A", "B", "C"], 3)
    assert none["pairs"] == 0 and none["majority_labelled"] == none["sml_labelled"] == 0
    assert all(math.isnan(none[k]) for k in ("sml_error", "majority_error"))
    assert all(math.isnan(e) for e in none["person_error"].values())


def test_flags_are_read_at_the_persons_nth_answer() -> None:
    # a fast person answering 12 pairs with three careful ones: flagged 'fast' by answer 12,
    # not by answer 5 (the rule waits for min_answers = 10)
    rng = np.random.default_rng(0)
    answers = []
    for k in range(12):
        q, p = f"q{k}", float(k % 2)  # sides alternate: nobody picks one side only
        for who in ("c1", "c2", "c3"):
            answers.append(_a(who, q, p, 10.0 * k + 1, rt=4.0 + rng.random()))
        answers.append(_a("fast", q, p, 10.0 * k + 2, rt=0.5))
    people = ["c1", "c2", "c3", "fast"]
    cfg = StudyConfig(overlap=3)
    assert "fast" in flags_at(answers, {}, cfg, 2.0, people, "fast", 12)
    assert flags_at(answers, {}, cfg, 2.0, people, "fast", 5) == ()
    assert flags_at(answers, {}, cfg, 2.0, people, "c1", 12) == ()
