"""The simulated AI judge: its stated error model (mean flip rate ε̄, flips concentrated on
similar pairs), its confidence, and its state."""

from __future__ import annotations

import json

import numpy as np
import pytest

from preflab.errors import ConfigError, DataError
from preflab.kinds import PAIR
from preflab.records import Segment
from preflab.sources.simulated_judge import SimulatedJudge, SimulatedJudgeConfig, mid_ranks
from preflab.testing.factories import make_query, make_segment


def segments_with_returns(returns: list[float]) -> dict[str, Segment]:
    return {
        f"s{k}": make_segment(f"s{k}", true_rewards=[r / 2, r / 2]) for k, r in enumerate(returns)
    }


def pairs(n: int, n_segs: int, rng: np.random.Generator) -> list:
    out = []
    for k in range(n):
        a, b = rng.choice(n_segs, 2, replace=False)
        out.append(make_query(f"q{k}", f"s{a}", f"s{b}"))
    return out


def test_mid_ranks_by_hand() -> None:
    # reference 1, 2, 2, 4: below 2 is one value, equal to 2 are two → (1 + 1) / 4
    assert mid_ranks(np.array([2.0, 0.5, 4.0]), np.array([1, 2, 2, 4])) == pytest.approx(
        [0.5, 0.0, 0.875]
    )


def test_flip_probability_falls_with_the_difference_and_averages_the_flip_rate() -> None:
    judge = SimulatedJudge(SimulatedJudgeConfig(flip_rate=0.25, window=100))
    diffs = np.arange(1.0, 41.0)  # 40 distinct differences: mid-ranks (k + ½) / 40
    eps = judge.flip_probs(diffs)
    assert eps.mean() == pytest.approx(0.25, abs=1e-12)  # exactly ε̄ (module docstring)
    assert np.all(np.diff(eps) < 0)  # more similar → more flips
    assert eps[0] == pytest.approx(2 * 0.25 * (1 - 0.5 / 40))
    uniform = SimulatedJudge(SimulatedJudgeConfig(flip_rate=0.25, concentration="uniform"))
    assert np.all(uniform.flip_probs(diffs) == 0.25)


def test_errors_are_a_quarter_and_concentrated_on_similar_pairs() -> None:
    rng = np.random.default_rng(3)
    segs = segments_with_returns(list(rng.normal(0, 10, size=60)))
    judge = SimulatedJudge(SimulatedJudgeConfig(flip_rate=0.25), np.random.default_rng(4))
    qs = pairs(3000, 60, rng)
    for k in range(0, len(qs), 100):
        judge.submit(qs[k : k + 100], segs)
    js = judge.collect()
    diff = np.array([abs(segs[q.a[0]].true_return - segs[q.b[0]].true_return) for q in qs])
    wrong = np.array([j.meta["flipped"] for j in js])
    assert wrong.mean() == pytest.approx(0.25, abs=0.03)
    assert judge.true_accuracy == pytest.approx(1 - wrong.mean())
    similar = diff < np.median(diff)
    assert wrong[similar].mean() > 0.35 and wrong[~similar].mean() < 0.15
    conf = np.array([j.meta["confidence"] for j in js])
    assert conf[wrong].mean() < conf[~wrong].mean() - 0.2  # self-consistency tells them apart
    # the answer is the side the true returns favour unless flipped
    for q, j in zip(qs[:50], js[:50], strict=True):
        truth = float(segs[q.a[0]].true_return > segs[q.b[0]].true_return)
        assert (j.p == truth) != j.meta["flipped"]


def test_state_round_trip_answers_identically() -> None:
    rng = np.random.default_rng(0)
    segs = segments_with_returns(list(rng.normal(size=12)))
    qs = pairs(30, 12, rng)
    a = SimulatedJudge(rng=np.random.default_rng(9))
    a.submit(qs[:10], segs)
    saved = json.loads(json.dumps(a.state()))
    a.submit(qs[10:], segs)
    b = SimulatedJudge(rng=np.random.default_rng(123))
    b.load_state(saved)
    b.submit(qs[10:], segs)
    want = [(j.query_id, j.p, j.meta) for j in a.collect()]
    got = [(j.query_id, j.p, j.meta) for j in b.collect()]
    assert got == want


def test_bad_settings_and_queries_are_refused() -> None:
    with pytest.raises(ConfigError, match="flip_rate"):
        SimulatedJudgeConfig(flip_rate=0.7)
    with pytest.raises(ConfigError, match="samples"):
        SimulatedJudgeConfig(samples=0)
    segs = segments_with_returns([1, 2, 3])
    group = make_query("g", ["s0", "s1"], ["s2"])
    with pytest.raises(DataError, match="pairwise comparisons only"):
        SimulatedJudge().submit([group], segs)
    with pytest.raises(DataError, match="not given segment"):
        SimulatedJudge().submit([PAIR.query("s0", "zz")], segs)
