"""The reporting protocol (preflab_bench._protocol), checked against independent derivations:
order statistics by hand, scipy's trimmed mean, the asymptotic variance of the normal trimmed
mean, brute-force pair counts, equivariance of the IQM, and exact Bonferroni arithmetic."""

from __future__ import annotations

import math
from pathlib import Path

import numpy as np
import pytest
from scipy import stats

from preflab.errors import ConfigError, DataError
from preflab_bench import _protocol as protocol

REPS = 1000


def test_iqm_is_the_mean_of_the_middle_half() -> None:
    rng = np.random.default_rng(1)
    x = rng.exponential(3.0, size=(12, 1))  # n divisible by 4: the trim is exact
    by_hand = float(np.sort(x.ravel())[3:9].mean())
    s = protocol.iqm_ci({"a": x}, reps=200, seed=0)["a"]
    assert s.iqm.point == pytest.approx(by_hand, rel=1e-12)
    assert s.iqm.point == pytest.approx(float(stats.trim_mean(x.ravel(), 0.25)), rel=1e-12)
    assert s.mean == pytest.approx(float(x.mean()), rel=1e-12)
    assert s.iqm.lo <= s.iqm.point <= s.iqm.hi
    assert (s.n_runs, s.n_tasks) == (12, 1)


@pytest.mark.parametrize("seed", range(40))
def test_iqm_equals_rliables_to_the_last_bit(seed: int) -> None:
    """The protocol's IQM is rliable's ``aggregate_iqm`` (scipy's trimmed mean) without scipy's
    per-call overhead: equal bit for bit on runs x tasks of every shape, with ties and ints."""
    from rliable import metrics  # type: ignore[import-untyped]

    rng = np.random.default_rng(seed)
    shape = (int(rng.integers(1, 25)), int(rng.integers(1, 4)))
    floats = rng.normal(rng.uniform(-1000, 1000), rng.uniform(0.01, 300), size=shape)
    ties = np.round(floats / 50) * 50
    ints = rng.integers(-5, 6, size=shape)
    for x in (floats, ties, ints, np.zeros(shape)):
        assert protocol._iqm(x) == float(metrics.aggregate_iqm(x))


def test_iqm_pools_runs_and_tasks() -> None:
    x = np.arange(16, dtype=float).reshape(8, 2)
    s = protocol.iqm_ci({"a": x}, reps=200)["a"]
    assert s.iqm.point == pytest.approx(float(np.arange(4, 12).mean()))


def test_constant_scores_give_a_zero_width_interval() -> None:
    s = protocol.iqm_ci({"c": np.full((9, 1), 4.25)}, reps=REPS)["c"]
    assert s.iqm.point == s.iqm.lo == s.iqm.hi == 4.25
    assert s.mean_half_width == 0.0


def test_bootstrap_resamples_runs_within_each_task() -> None:
    # Task 0 always scores 0 and task 1 always 10. Resampling runs within each task keeps n
    # zeros and n tens in every resample, so the IQM (middle half: n/2 of each) is always 5.
    # A bootstrap that pooled the tasks would move it.
    x = np.column_stack([np.zeros(8), np.full(8, 10.0)])
    s = protocol.iqm_ci({"a": x}, reps=REPS)["a"]
    assert s.iqm.point == s.iqm.lo == s.iqm.hi == 5.0


def test_bootstrap_ci_of_a_large_normal_sample_matches_the_analytic_intervals() -> None:
    n, sigma = 400, 2.0
    x = np.random.default_rng(7).normal(10.0, sigma, size=(n, 1))
    s = protocol.iqm_ci({"x": x}, reps=2000, confidence=0.95)["x"]
    z = stats.norm.ppf(0.975)
    # Asymptotic variance of the 25%-trimmed mean of N(0, 1): with q = Φ⁻¹(0.75),
    # [∫_{-q}^{q} t² φ(t) dt + 2·0.25·q²] / 0.5² = [0.5 − 2qφ(q) + 0.5q²] / 0.25 ≈ 1.195.
    q = stats.norm.ppf(0.75)
    var = (0.5 - 2 * q * stats.norm.pdf(q) + 0.5 * q**2) / 0.25
    analytic_half = z * sigma * math.sqrt(var / n)
    boot_half = (s.iqm.hi - s.iqm.lo) / 2
    assert boot_half == pytest.approx(analytic_half, rel=0.15)
    # The Student-t interval of the mean, computed here: the mean's interval is narrower by
    # √1.195 ≈ 1.09 and has nearly the same centre, so the bootstrap interval about covers it.
    t_half = stats.t.ppf(0.975, n - 1) * x.std(ddof=1) / math.sqrt(n)
    assert s.mean_half_width == pytest.approx(t_half, rel=1e-9)
    assert s.iqm.lo <= x.mean() - t_half + 0.25 * t_half
    assert s.iqm.hi >= x.mean() + t_half - 0.25 * t_half
    assert abs((s.iqm.lo + s.iqm.hi) / 2 - x.mean()) < 0.25 * t_half


def test_intervals_are_seeded_and_leave_the_global_generator_alone() -> None:
    x = np.random.default_rng(3).normal(size=(10, 2))
    np.random.seed(12345)
    before = np.random.get_state()[1].copy()
    a = protocol.iqm_ci({"x": x}, reps=300, seed=4)["x"]
    b = protocol.iqm_ci({"x": x}, reps=300, seed=4)["x"]
    c = protocol.iqm_ci({"x": x}, reps=300, seed=5)["x"]
    assert np.array_equal(np.random.get_state()[1], before)
    assert a == b
    assert (a.iqm.lo, a.iqm.hi) != (c.iqm.lo, c.iqm.hi)


def test_probability_of_improvement_of_disjoint_samples_is_exactly_one_or_zero() -> None:
    rng = np.random.default_rng(0)
    low, high = rng.uniform(0, 1, size=(6, 1)), rng.uniform(2, 3, size=(5, 1))
    up = protocol.probability_of_improvement(high, low, reps=REPS)
    down = protocol.probability_of_improvement(low, high, reps=REPS)
    assert (up.point, up.lo, up.hi) == (1.0, 1.0, 1.0)
    assert (down.point, down.lo, down.hi) == (0.0, 0.0, 0.0)


def test_probability_of_improvement_counts_pairs_and_half_ties() -> None:
    x = np.array([[1.0, 5.0], [2.0, 6.0], [3.0, 7.0], [4.0, 8.0]])
    y = np.array([[0.0, 5.0], [2.0, 9.0], [5.0, 1.0]])
    by_hand = np.mean(
        [
            np.mean([(a > b) + 0.5 * (a == b) for a in x[:, t] for b in y[:, t]])
            for t in range(x.shape[1])
        ]
    )
    p = protocol.probability_of_improvement(x, y, reps=300)
    assert p.point == pytest.approx(by_hand, abs=1e-12)
    assert 0.0 <= p.lo <= p.point <= p.hi <= 1.0


def test_performance_profile_counts_runs_above_each_threshold() -> None:
    x = np.random.default_rng(2).normal(size=(10, 2))
    taus = [-1.0, 0.0, 0.5, 3.0]
    prof = protocol.performance_profile({"x": x, "c": np.ones((4, 1))}, taus, reps=300)
    expected = [float(np.mean(x > t)) for t in taus]
    assert prof["x"].fractions.tolist() == pytest.approx(expected)
    assert np.all(prof["x"].lo <= prof["x"].fractions)
    assert np.all(prof["x"].fractions <= prof["x"].hi)
    assert prof["c"].fractions.tolist() == [1.0, 1.0, 1.0, 0.0]
    assert np.array_equal(prof["c"].lo, prof["c"].hi)


def test_paired_ratio_and_difference_follow_the_iqm_equivariances() -> None:
    # IQM(2x) = 2 IQM(x) and IQM(x + 3) = IQM(x) + 3 for every resample when both arms are
    # resampled with the same run indices (paired): the intervals collapse to the point.
    x = np.random.default_rng(5).uniform(1, 2, size=(8, 2))
    r = protocol.ratio_ci(x, 2 * x, paired=True, reps=REPS)
    assert r.point == pytest.approx(0.5)
    assert r.lo == pytest.approx(0.5) and r.hi == pytest.approx(0.5)
    d = protocol.difference_ci(x + 3, x, paired=True, reps=REPS)
    assert d.lo == pytest.approx(3.0) and d.hi == pytest.approx(3.0)
    # Unpaired, the two arms are resampled independently: the same data gives a real interval.
    u = protocol.ratio_ci(x, x, paired=False, reps=REPS)
    assert u.point == pytest.approx(1.0)
    assert u.lo < 1.0 < u.hi


def test_paired_comparison_needs_aligned_runs() -> None:
    with pytest.raises(DataError, match="paired"):
        protocol.ratio_ci(np.ones((4, 1)), np.ones((5, 1)), paired=True, reps=10)


def test_bonferroni_correction_for_looks() -> None:
    assert protocol.corrected_confidence(0.95, 4) == pytest.approx(0.9875, abs=1e-12)
    assert protocol.corrected_confidence(0.95, 1) == pytest.approx(0.95, abs=1e-12)
    assert protocol.corrected_confidence(0.9, 5) == pytest.approx(0.98, abs=1e-12)
    with pytest.raises(ConfigError, match="looks"):
        protocol.corrected_confidence(0.95, 0)
    with pytest.raises(ConfigError, match="between 0 and 1"):
        protocol.corrected_confidence(95, 2)


def test_rows_entry_is_the_one_registered_entry_all_rows_name_with_its_looks() -> None:
    from preflab_bench._plan import parse_plan

    entry = """
[[experiment]]
id = "{id}"
{extends}bench = "overhead"
envs = ["A-v0"]
question = "q"
arms = ["ours", "base"]
eval_seeds = {seeds}
tuning_seeds = []
budget = {{}}
metric = "wall_s"
target = {{ value = 1.15, direction = "below", kind = "ratio" }}
looks = 1
committed = 2026-11-28
"""
    plan = parse_plan(
        entry.format(id="e", extends="", seeds="[0, 1]")
        + entry.format(id="e2", extends='extends = "e"\n', seeds="[2, 3]")
    )
    assert protocol.rows_entry([{"plan": "e"}, {"plan": "e"}], plan) == ("e", 0.95)
    # e2 is e's second look: Bonferroni over 2
    assert protocol.rows_entry([{"plan": "e2"}], plan) == ("e2", pytest.approx(0.975))
    for exploratory in (
        [{"plan": "e"}, {"plan": "e2"}],  # two entries
        [{"plan": "e"}, {}],  # one row without an entry
        [{"plan": None}],
        [{"plan": "not-in-the-plan"}],
    ):
        assert protocol.rows_entry(exploratory, plan) == ("", 0.95), exploratory


def test_verdict_needs_the_whole_interval_past_the_target() -> None:
    assert protocol.verdict(0.82, 1.1, 0.8, "above") == "met"
    assert protocol.verdict(0.5, 0.79, 0.8, "above") == "missed"
    assert protocol.verdict(0.79, 1.1, 0.8, "above") == "not shown"
    assert protocol.verdict(0.8, 1.1, 0.8, "above") == "not shown"  # touching is not clearing
    assert protocol.verdict(1.0, 2.0, 2.5, "below") == "met"
    assert protocol.verdict(3.0, 4.0, 2.5, "below") == "missed"
    assert protocol.verdict(2.0, 3.0, 2.5, "below") == "not shown"
    with pytest.raises(ConfigError, match="direction"):
        protocol.verdict(0.0, 1.0, 0.5, "up")  # type: ignore[arg-type]


def test_markdown_table_states_iqm_interval_mean_and_runs() -> None:
    x = np.arange(1.0, 9.0)[:, None]  # IQM = mean(3..6) = 4.5, mean 4.5
    y = np.full((5, 1), 2.0)
    summaries = protocol.iqm_ci({"pebble": x, "sac": y}, reps=300, confidence=0.9)
    md = protocol.markdown_table(summaries)
    lines = md.strip().splitlines()
    assert lines[0] == "| arm | IQM [90% stratified bootstrap CI] | mean ± 90% t-CI | n runs |"
    t_half = stats.t.ppf(0.95, 7) * x.std(ddof=1) / math.sqrt(8)
    assert lines[2].startswith("| pebble | 4.5 [")
    assert f"4.5 ± {t_half:.4g} | 8 |" in lines[2]
    assert lines[3] == "| sac | 2 [2, 2] | 2 ± 0 | 5 |"


def test_bad_scores_are_refused() -> None:
    with pytest.raises(DataError, match="nan"):
        protocol.iqm_ci({"a": np.array([1.0, np.nan, 2.0])}, reps=10)
    with pytest.raises(DataError, match="shape"):
        protocol.iqm_ci({"a": np.ones((2, 2, 2))}, reps=10)


def test_restate_reads_verdicts_and_replaces_its_section(tmp_path: Path) -> None:
    from preflab_bench._plan import parse_plan
    from preflab_bench.restate import (
        SECTION,
        Restatement,
        original_verdicts,
        replace_section,
        restate,
    )

    plan = parse_plan(
        """
[[experiment]]
id = "e"
bench = "mujoco"
envs = ["A-v0"]
question = "q"
arms = ["ours", "base"]
eval_seeds = [0, 1, 2, 3]
tuning_seeds = []
budget = {}
metric = "return"
target = { value = 0.8, direction = "above", kind = "ratio" }
looks = 1
committed = 2026-11-28

[[experiment]]
id = "e2"
extends = "e"
bench = "mujoco"
envs = ["A-v0"]
question = "q"
arms = ["ours", "base"]
eval_seeds = [4, 5, 6, 7]
tuning_seeds = []
budget = {}
metric = "return"
target = { value = 0.8, direction = "above", kind = "ratio" }
looks = 1
committed = 2026-11-28
"""
    )
    spec = Restatement(
        plan_id="e",
        runs=tmp_path / "runs.jsonl",
        report=tmp_path / "r.md",
        tag="t",
        arms={"ours": {"kind": "p"}, "base": {"kind": "b"}},
        score="ret",
        original_variant="v",
    )
    rows = [
        {"tag": "t", "env": "A-v0", "kind": k, "seed": s, "ret": (2.0 if k == "p" else 1.0) + s}
        for s in range(8)
        for k in ("p", "b")
    ]
    report = "# R\n\n| env | variant | x |\n| --- | --- | --- |\n| A-v0 | v | +3 ± 1 (n=8): met |\n"
    original = original_verdicts(report, "v")
    assert original == {"A-v0": "met"}
    (r,) = restate(spec, plan, rows, original=original, reps=200, check_seeds=1)
    assert r.looks == 2 and r.seeds == tuple(range(8))
    assert r.ratio.confidence == pytest.approx(0.975)
    # base scores 1..8 and ours = base + 1: IQM(base) = mean(3, 4, 5, 6) = 4.5, IQM(ours) = 5.5
    assert r.ratio.point == pytest.approx(5.5 / 4.5)
    assert r.verdict == "met"
    once = replace_section(report, f"{SECTION}\n\nfirst\n")
    twice = replace_section(once + "\n## Later\n\nkept\n", f"{SECTION}\n\nsecond\n")
    assert twice.count(SECTION) == 1 and "second" in twice and "first" not in twice
    assert twice.endswith("## Later\n\nkept\n") and twice.startswith(report.rstrip("\n"))
    # A new entry (no verdict in the original table) is read for the first time, not "changed"
    from dataclasses import replace

    from preflab_bench.restate import NO_ORIGINAL, _changes

    new = replace(r, original=NO_ORIGINAL)
    text = _changes([new], 0.95, 0.8)
    assert text.startswith("No earlier verdict to compare with")
    assert "- A-v0: **met** (no earlier verdict)." in text and "→" not in text
    assert "A-v0 (met → met)" not in _changes([r], 0.95, 0.8)
    one = _changes([replace(new, looks=1)], 0.95, 0.8)
    assert "says met (one look: no correction)." in one and "widens" not in one
    mixed = _changes([new, replace(r, env="B-v0", original="not shown")], 0.95, 0.8)
    assert "B-v0 (not shown → met) changed" in mixed and "A-v0 (" not in mixed
