"""Routing (issue 58): confident pairs go to the reward model, the AI judge answers where its
measured accuracy allows, people get the rest; budgets, the calibration share, the accuracy
interval and the state are checked against hand-computed or replayed values."""

from __future__ import annotations

import json
import math
from pathlib import Path

import numpy as np
import pytest

from preflab.errors import ConfigError, DataError
from preflab.records import Judgement, Query, Segment
from preflab.reward.batch import SegmentBatch
from preflab.sources.human import StoreSource
from preflab.sources.routing.calibration import Calibration, wilson_interval
from preflab.sources.routing.config import RoutingConfig
from preflab.sources.routing.router import RoutingSource, route_id
from preflab.sources.simulated_judge import SimulatedJudge, SimulatedJudgeConfig
from preflab.sources.teacher import SyntheticTeacher, bpref_teacher, margin_teacher_of
from preflab.store import FeedbackStore
from preflab.testing.factories import make_query, make_segment


class TableModel:
    """The RewardModel protocol with every member's return of each segment given by id."""

    def __init__(self, returns: dict[str, list[float]]) -> None:
        self.returns = returns

    def predict(self, obs: np.ndarray, acts: np.ndarray | None = None) -> np.ndarray:
        raise AssertionError("routing reads segment returns only")

    def segment_returns(self, batch: SegmentBatch) -> np.ndarray:
        return np.array([self.returns[i] for i in batch.ids], np.float64).T


def segs(returns: dict[str, float]) -> dict[str, Segment]:
    return {k: make_segment(k, true_rewards=[r]) for k, r in returns.items()}


def router(
    *,
    flip_rate: float = 0.25,
    model: TableModel | None = None,
    seed: int = 0,
    **route: object,
) -> RoutingSource:
    cfg = RoutingConfig(judge=SimulatedJudgeConfig(flip_rate=flip_rate), **route)  # type: ignore[arg-type]
    r = RoutingSource(
        cfg,
        np.random.default_rng(seed),
        ai=SimulatedJudge(cfg.judge, np.random.default_rng(seed + 1)),
        people=SyntheticTeacher(rng=np.random.default_rng(seed + 2), annotator_id="oracle"),
    )
    if model is not None:
        r.watch_model(lambda: model)
    return r


def trusted(r: RoutingSource, n: int = 40) -> None:
    """Calibration records that make the AI trusted at confidence 1.0."""
    for _ in range(n):
        r.calibration.add(1.0, True)


def many(n: int, seed: int = 0) -> tuple[list[Query], dict[str, Segment]]:
    rng = np.random.default_rng(seed)
    s = segs({f"s{k}": float(v) for k, v in enumerate(rng.normal(0, 5, 40))})
    qs = []
    for k in range(n):
        a, b = rng.choice(40, 2, replace=False)
        qs.append(make_query(f"q{k}", f"s{a}", f"s{b}"))
    return qs, s


# ----- the accuracy interval and the threshold rule ----------------------------------------------
def test_wilson_interval_against_the_closed_form() -> None:
    # by hand: 8 of 10 at 95 % (z = 1.959964): centre (0.8 + z²/20) / (1 + z²/10) = 0.71675,
    # half-width z √(0.016 + z²/400) / (1 + z²/10) = 0.22658 → [0.4902, 0.9433]
    lo, hi = wilson_interval(8, 10, 0.95)
    assert (lo, hi) == pytest.approx((0.49016, 0.94332), abs=1e-5)
    # none wrong of n: upper end z² / (n + z²); for n = 20, 3.8415 / 23.8415 = 0.16113
    z2 = 1.959964**2
    assert wilson_interval(0, 20)[1] == pytest.approx(z2 / (20 + z2), abs=1e-6)
    assert wilson_interval(0, 0) == (0.0, 1.0)
    with pytest.raises(DataError):
        wilson_interval(3, 2)


def test_threshold_is_the_lowest_confidence_whose_wilson_upper_error_meets_the_target() -> None:
    cal = Calibration(level=0.95, min_records=10)
    for k in range(20):
        cal.add(0.8, k % 2 == 0)  # 10 of 20 wrong at confidence 0.8
        cal.add(1.0, True)  # none wrong of 20 at 1.0
    # t = 0.8: 10 wrong of 40, Wilson upper 0.40 > 0.2; t = 1.0: 0 of 20, upper 0.161 ≤ 0.2
    assert cal.threshold(0.2) == 1.0
    assert cal.threshold(0.15) is None  # 0.161 > 0.15
    assert cal.threshold(0.45) == 0.8
    few = Calibration(min_records=25)
    for _ in range(20):
        few.add(1.0, True)
    assert few.threshold(0.4) is None  # fewer records than min_records
    acc, lo, hi = cal.accuracy()
    assert acc == 30 / 40 and (lo, hi) == wilson_interval(30, 40)


# ----- who answers --------------------------------------------------------------------------------
def test_confident_pairs_go_to_the_model_and_disagreements_to_people() -> None:
    s = segs({"A": 10.0, "B": 0.0, "C": 5.0, "D": 5.1})
    model = TableModel({"A": [10, 9], "B": [0, 1], "C": [5, 6], "D": [6, 5]})
    r = router(model=model)
    r.submit([make_query("sure", "A", "B"), make_query("split", "C", "D")], s)
    js = {j.query_id: j for j in r.collect()}
    assert js["sure"].source == "model" and js["sure"].p == 1.0
    assert js["sure"].meta["route"]["reason"] == "model-confident"
    assert js["sure"].id == route_id("sure", "model")
    # members disagree about (C, D); the AI is not trusted yet: people answer (and calibrate)
    assert js["split"].annotator_id == "oracle" and js["split"].p == 0.0
    assert js["split"].meta["route"]["answerer"] == "people"
    assert js["split"].meta["route"]["reason"] == "calibration-warmup"
    assert r.calibration.n == 1
    assert r.labels == {"model": 1, "ai": 0, "people": 1}


def test_the_ai_answers_above_its_threshold_and_people_below_it() -> None:
    qs, s = many(60)
    r = router(calibration_share=0.0)
    trusted(r)
    assert r.threshold() == 1.0
    r.submit(qs, s)
    js = r.collect()
    for j in js:
        route = j.meta["route"]
        if route["answerer"] == "ai":
            assert route["reason"] == "ai-confident" and route["confidence"] >= 1.0
            assert j.annotator_id == "simulated-judge" and j.meta["ai_judgements"]
        else:
            assert route["reason"] == "ai-unsure" and route["ai_confidence"] < 1.0
            assert j.annotator_id == "oracle"
    assert {j.meta["route"]["answerer"] for j in js} == {"ai", "people"}
    assert r.calibration.n == 40  # unsure answers are not calibration records


def test_calibration_share_is_the_routers_draws() -> None:
    qs, s = many(300, seed=1)
    share = 0.3
    r = router(flip_rate=0.0, calibration_share=share, seed=5)
    trusted(r)
    r.submit(qs, s)
    js = r.collect()
    calibrated = [j.query_id for j in js if j.meta["route"]["reason"] == "calibration"]
    draws = np.random.default_rng(5).random(len(qs))  # one draw per query asked of the AI
    assert calibrated == [q.id for q, u in zip(qs, draws, strict=True) if u < share]
    n = len(calibrated)
    assert abs(n - share * 300) < 4 * math.sqrt(300 * share * (1 - share))
    # a flawless AI: every calibration answer agreed, every other query answered by it alone
    assert r.calibration.n == 40 + n and r.calibration.agreed == r.calibration.n
    assert r.labels == {"model": 0, "ai": 300 - n, "people": n}


def test_budgets_are_honoured() -> None:
    """With ``people_spent = 'ai'``, the behaviour before the option: unsure pairs go to the AI
    once people's budget is spent, and to the model's guess when the AI's is spent too."""
    qs, s = many(10)
    r = router(budget_ai=5, budget_people=3, people_spent="ai")
    r.submit(qs, s)
    js = r.collect()
    assert r.used == {"model": 0, "ai": 5, "people": 3}
    reasons = [r.routes[q.id]["reason"] for q in qs]
    # the AI is not trusted yet: its 5 go to people while their budget lasts, then stand
    assert reasons[:3] == ["calibration-warmup"] * 3
    assert reasons[3:5] == ["people-budget"] * 2
    assert reasons[5:] == ["budgets-spent"] * 5  # nobody left (and no model fitted yet)
    assert r.unrouted == 5 and len(js) == 5
    model = TableModel({k: [v.true_return] * 2 for k, v in s.items()})
    r2 = router(model=model, budget_model=2, budget_ai=0, budget_people=0, people_spent="ai")
    r2.submit(qs, s)
    assert r2.used["model"] == 2 and r2.unrouted == 8


@pytest.mark.parametrize("people_spent", ["skip", "ai"])
def test_once_peoples_budget_is_spent_an_unsure_pair_gets_no_label_unless_asked(
    people_spent: str,
) -> None:
    """The AI trusted at confidence 1 (no calibration draws), people's budget 2: the AI answers
    the pairs it is sure about, people the first two it is not; the other unsure pairs get no
    label by default ('skip') and the AI's unsure answer with 'ai'."""
    qs, s = many(60)
    r = router(calibration_share=0.0, budget_people=2, people_spent=people_spent)
    trusted(r)
    r.submit(qs, s)
    js = r.collect()
    reasons = [r.routes[q.id]["reason"] for q in qs]
    sure, unsure = reasons.count("ai-confident"), len(qs) - reasons.count("ai-confident")
    assert reasons.count("ai-unsure") == 2 and reasons.count("people-budget") == unsure - 2
    assert sure > 0 and unsure > 2  # the case this test needs: both kinds of pairs
    ai_labels = [j for j in js if j.meta["route"]["answerer"] == "ai"]
    if people_spent == "skip":
        assert r.unrouted == unsure - 2 and len(js) == sure + 2
        assert all(j.meta["route"]["confidence"] >= 1.0 for j in ai_labels)
        assert all(
            r.routes[q.id]["answerer"] == "none" and r.routes[q.id]["ai_confidence"] < 1.0
            for q in qs
            if r.routes[q.id]["reason"] == "people-budget"
        )
    else:
        assert r.unrouted == 0 and len(js) == len(qs)
        below = [j for j in ai_labels if j.meta["route"]["confidence"] < 1.0]
        assert len(below) == unsure - 2
        assert {j.meta["route"]["reason"] for j in below} == {"people-budget"}


def test_once_every_budget_is_spent_the_models_unsure_guess_is_a_label_only_if_asked() -> None:
    """A fitted model whose members disagree on every pair, no AI or people budget left: by
    default nothing is answered; with 'ai' the model guesses (reason budgets-spent)."""
    qs, s = many(6)
    model = TableModel({k: [v.true_return, -v.true_return] for k, v in s.items()})
    skip = router(model=model, budget_ai=0, budget_people=0)
    skip.submit(qs, s)
    assert skip.collect() == [] and skip.unrouted == 6 and skip.used["model"] == 0
    guess = router(model=model, budget_ai=0, budget_people=0, people_spent="ai")
    guess.submit(qs, s)
    js = guess.collect()
    assert guess.unrouted == 0 and len(js) == 6
    assert {j.meta["route"]["reason"] for j in js} == {"budgets-spent"}


def test_other_kinds_go_to_people() -> None:
    s = segs({"A": 1.0, "B": 0.0, "C": 2.0})
    r = router(model=TableModel({"A": [9, 9], "B": [0, 0], "C": [5, 5]}))
    r.submit([make_query("g", ["A", "C"], ["B"])], s)
    (j,) = r.collect()
    assert j.meta["route"] == {"answerer": "people", "reason": "kind"}
    assert r.used["ai"] == 0


def test_state_resumes_exactly() -> None:
    qs, s = many(90, seed=2)
    model = TableModel({k: [v.true_return, v.true_return * 0.5 + 1] for k, v in s.items()})
    kw = dict(model=model, calibration_share=0.2, min_calibration=5, target_error=0.3, level=0.8)
    a = router(**kw)  # type: ignore[arg-type]
    a.submit(qs[:30], s)
    a.collect()
    a.submit(qs[30:45], s)  # uncollected answers are part of the state
    saved = json.loads(json.dumps(a.state()))
    a.submit(qs[45:], s)

    def seen(j: Judgement) -> tuple:  # people's ids are the loop's to give (not the router's)
        own = j.id if j.meta["route"]["answerer"] != "people" else ""
        return (own, j.query_id, j.annotator_id, j.p, j.meta["route"])

    want = [seen(j) for j in a.collect()]
    b = router(**kw, seed=99)  # type: ignore[arg-type]
    b.load_state(saved)
    b.submit(qs[45:], s)
    got = [seen(j) for j in b.collect()]
    assert got == want
    assert b.routing_report() == a.routing_report()
    assert {j[4]["answerer"] for j in want} >= {"model", "people"}


def test_report_carries_the_split_and_the_accuracy_interval() -> None:
    qs, s = many(40)
    r = router(min_calibration=5)
    r.submit(qs, s)
    r.collect()
    rep = r.routing_report()
    acc = rep["ai_accuracy"]
    assert sum(rep["labels"].values()) == 40
    assert acc["interval"] == list(wilson_interval(acc["agreed"], acc["records"], 0.95))
    assert 0 <= rep["ai_true_accuracy"] <= 1
    json.dumps(rep)


def test_bad_settings_are_refused(tmp_path: Path) -> None:
    with pytest.raises(ConfigError, match="target_error"):
        RoutingConfig(target_error=0.0)
    with pytest.raises(ConfigError, match="calibration_share"):
        RoutingConfig(calibration_share=1.5)
    with pytest.raises(ConfigError, match="budget_people"):
        RoutingConfig(budget_people=-1)
    with pytest.raises(ConfigError, match=r"route\.people"):
        RoutingConfig(people="robots")  # type: ignore[arg-type]
    with pytest.raises(ConfigError, match=r"route\.people_spent must be 'skip' or 'ai'"):
        RoutingConfig(people_spent="people")  # type: ignore[arg-type]
    store = FeedbackStore(tmp_path / "feedback.db")
    try:
        with pytest.raises(DataError, match="store="):
            RoutingSource(
                RoutingConfig(),
                np.random.default_rng(0),
                ai=SimulatedJudge(),
                people=StoreSource(store),
            )
        with pytest.raises(DataError, match="answer at once"):
            RoutingSource(
                RoutingConfig(),
                np.random.default_rng(0),
                ai=StoreSource(store),
                people=SimulatedJudge(),
            )
    finally:
        store.close()


def test_people_as_a_relative_bpref_teacher_are_the_margin_teacher_the_ai_may_not_be() -> None:
    """The router hands over people's teacher when its skip or equal rule is relative to
    B-Pref's margin (the loop then sets its margin, as for --source teacher); an AI judge with
    such a rule is refused, since the router asks it before the loop sets the round's margin."""
    equal = SyntheticTeacher(bpref_teacher("bpref-equal"), annotator_id="oracle")
    r = RoutingSource(RoutingConfig(), np.random.default_rng(0), ai=SimulatedJudge(), people=equal)
    assert r.margin_teacher is equal and margin_teacher_of(r) is equal
    assert router().margin_teacher is None  # the plain oracle has no rule to set
    assert margin_teacher_of(router()) is None
    with pytest.raises(DataError, match=r"AI judge is a synthetic teacher.*skip_threshold"):
        RoutingSource(
            RoutingConfig(),
            np.random.default_rng(0),
            ai=SyntheticTeacher(bpref_teacher("bpref-skip")),
            people=SyntheticTeacher(),
        )
