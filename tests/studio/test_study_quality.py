"""The flag rules and per-person statistics of a study on synthetic answer streams: a careless
person (random, fast), an adversarial one (flips), one who always picks the left clip, and
careful people who must not be flagged."""

from __future__ import annotations

import numpy as np
import pytest

from preflab.studio.study_config import StudyConfig
from preflab.studio.study_quality import Answer, crowd_stats, flags_of

CLIP_S = 3.0


def stream(rng: np.random.Generator) -> tuple[list[Answer], dict[str, float]]:
    truth = {f"q{i}": float(rng.integers(0, 2)) for i in range(60)}
    gold = {q: p for q, p in list(truth.items())[:15]}
    kinds = {
        "careful-1": "careful",
        "careful-2": "careful",
        "careful-3": "careful",
        "careful-4": "careful",
        "careless": "random",
        "adversary": "flip",
        "lefty": "left",
    }
    out = []
    t = 0.0
    for q, p in truth.items():
        for who, kind in kinds.items():
            t += 1.0
            if kind == "careful":
                ans = p if rng.random() < 0.9 else 1.0 - p
                rt = float(rng.uniform(4.0, 8.0))
            elif kind == "random":
                ans, rt = float(rng.integers(0, 2)), float(rng.uniform(0.4, 1.0))
            elif kind == "flip":
                ans, rt = 1.0 - p, float(rng.uniform(4.0, 8.0))
            else:
                ans, rt = 1.0, float(rng.uniform(4.0, 8.0))
            out.append(Answer(who, q, ans, rt, t))
    return out, gold


def test_the_flag_rules_find_the_careless_the_adversary_and_the_side_bias() -> None:
    answers, gold = stream(np.random.default_rng(11))
    cfg = StudyConfig(overlap=3)
    stats = crowd_stats(
        answers,
        gold=gold,
        config=cfg,
        clip_s=CLIP_S,
        people=sorted({a.annotator_id for a in answers}),
        rng=np.random.default_rng(0),
        n_boot=50,
    )
    by = {p.annotator_id: p for p in stats.people}
    assert "fast" in by["careless"].flags
    assert "gold" in by["adversary"].flags and "crowd" in by["adversary"].flags
    assert "side" in by["lefty"].flags and by["lefty"].left_share == 1.0
    for k in range(1, 5):
        careful = by[f"careful-{k}"]
        assert careful.flags == ()
        assert careful.gold_accuracy is not None and careful.gold_accuracy > 0.7
        assert careful.agreement is not None and careful.agreement > 0.7
    assert by["adversary"].agreement is not None and by["adversary"].agreement < 0.2
    assert stats.aggregator == "sml"
    # the SML weighs the careful people above the careless and the adversary
    assert min(by[f"careful-{k}"].sml_weight for k in range(1, 5)) > max(  # type: ignore[type-var]
        by["careless"].sml_weight, by["adversary"].sml_weight
    )
    assert stats.alpha is not None and stats.alpha_low is not None and stats.alpha_high is not None
    assert stats.alpha_low <= stats.alpha <= stats.alpha_high
    assert stats.labels_per_hour == pytest.approx(len(answers) / ((len(answers) - 1) / 3600))


def test_excluded_people_stop_counting_in_the_crowd() -> None:
    answers, gold = stream(np.random.default_rng(5))
    people = sorted({a.annotator_id for a in answers})
    cfg = StudyConfig(overlap=3)
    kept = crowd_stats(
        answers,
        gold=gold,
        config=cfg,
        clip_s=CLIP_S,
        people=people,
        rng=np.random.default_rng(0),
        n_boot=20,
    )
    cut = crowd_stats(
        answers,
        gold=gold,
        config=cfg,
        clip_s=CLIP_S,
        people=people,
        excluded={"careless", "adversary", "lefty"},
        rng=np.random.default_rng(0),
        n_boot=20,
    )
    assert cut.alpha is not None and kept.alpha is not None and cut.alpha > kept.alpha
    by = {p.annotator_id: p for p in cut.people}
    assert by["adversary"].sml_weight is None and "gold" in by["adversary"].flags


def test_each_rule_needs_enough_answers_and_respects_its_bound() -> None:
    cfg = StudyConfig(min_gold=3, gold_fail_share=0.34, min_answers=10, side_z=3.29)
    common = {"config": cfg, "clip_s": 3.0}
    # 2 of 3 checks failed: flagged; 1 of 3: not; 2 of 2: too few checks to say
    assert (
        "gold"
        in flags_of(
            answers=3,
            gold_answered=3,
            gold_correct=1,
            median_response_s=5,
            decisive=3,
            left=2,
            **common,
        )[0]
    )
    assert (
        "gold"
        not in flags_of(
            answers=3,
            gold_answered=3,
            gold_correct=2,
            median_response_s=5,
            decisive=3,
            left=2,
            **common,
        )[0]
    )
    assert (
        "gold"
        not in flags_of(
            answers=2,
            gold_answered=2,
            gold_correct=0,
            median_response_s=5,
            decisive=2,
            left=1,
            **common,
        )[0]
    )
    # faster than the clips play, with enough answers
    assert (
        "fast"
        in flags_of(
            answers=10,
            gold_answered=0,
            gold_correct=0,
            median_response_s=2.9,
            decisive=10,
            left=5,
            **common,
        )[0]
    )
    assert (
        "fast"
        not in flags_of(
            answers=9,
            gold_answered=0,
            gold_correct=0,
            median_response_s=0.5,
            decisive=9,
            left=5,
            **common,
        )[0]
    )
    # side bias: 20 of 20 left is z = 4.47 > 3.29; 15 of 20 is z = 2.24
    flags, z = flags_of(
        answers=20,
        gold_answered=0,
        gold_correct=0,
        median_response_s=5,
        decisive=20,
        left=20,
        **common,
    )
    assert "side" in flags and z == pytest.approx(20**0.5)
    assert (
        "side"
        not in flags_of(
            answers=20,
            gold_answered=0,
            gold_correct=0,
            median_response_s=5,
            decisive=20,
            left=15,
            **common,
        )[0]
    )


def test_the_crowd_rule_flags_who_disagrees_with_the_others() -> None:
    cfg = StudyConfig(min_answers=10, min_agreement=0.5)
    base = {
        "answers": 12,
        "gold_answered": 0,
        "gold_correct": 0,
        "median_response_s": 5.0,
        "decisive": 12,
        "left": 6,
        "config": cfg,
        "clip_s": 3.0,
    }
    assert "crowd" in flags_of(**base, compared=12, agreed=5)[0]
    assert "crowd" not in flags_of(**base, compared=12, agreed=6)[0]
    assert "crowd" not in flags_of(**base, compared=9, agreed=0)[0]  # too few compared


def test_a_crowd_without_covariance_falls_back_to_majority() -> None:
    """More than 64 people who share queries only with someone who answers them the same way:
    the SML has nothing to weigh (it raises DataError, not ARPACK's error), so the study's
    statistics use the majority instead of failing."""
    people = [f"p{i:03d}" for i in range(70)]
    answers = []
    for i, who in enumerate(people):  # p_i and p_{i+1} share two pairs; everyone picks left
        for q in (f"q{2 * i}", f"q{2 * i + 1}", f"q{2 * i - 2}", f"q{2 * i - 1}"):
            if q not in ("q-2", "q-1"):
                answers.append(Answer(who, q, 1.0, 5.0, float(len(answers))))
    stats = crowd_stats(
        answers,
        gold={},
        config=StudyConfig(overlap=3),
        clip_s=CLIP_S,
        people=people,
        rng=np.random.default_rng(0),
        n_boot=20,
    )
    assert stats.aggregator == "majority"
    assert all(p.sml_weight is None for p in stats.people)
    assert stats.labels == {f"q{k}": 1 for k in range(140)}
