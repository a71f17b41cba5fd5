"""preflab.rundir.reporting: the t-intervals against scipy's own derivations (t.interval, ttest_1samp,
ttest_rel), and the wording, tables and JSON-lines logs every result file is written with."""

from __future__ import annotations

import math
from pathlib import Path

import numpy as np
import pytest
from scipy import stats

from preflab.errors import ConfigError
from preflab.rundir.reporting import (
    append_jsonl,
    ci_side,
    fmt_ci,
    invocations,
    md_table,
    mean_ci,
    paired_differences,
    read_jsonl,
    target_verdict,
    verdict,
)


@pytest.mark.parametrize("n", [2, 3, 5, 12, 40])
@pytest.mark.parametrize("level", [0.8, 0.95, 0.99])
def test_mean_ci_is_scipys_student_t_interval(n: int, level: float) -> None:
    x = np.random.default_rng(n).normal(3.0, 2.0, size=n)
    low, high = stats.t.interval(level, df=n - 1, loc=x.mean(), scale=stats.sem(x))
    m, h = mean_ci(list(x), level)
    assert m == pytest.approx((low + high) / 2, rel=1e-12)
    assert h == pytest.approx((high - low) / 2, rel=1e-10)


def test_mean_ci_matches_the_one_sample_t_test_interval() -> None:
    x = np.random.default_rng(7).exponential(1.0, size=9)
    ci = stats.ttest_1samp(x, 0.0).confidence_interval(0.95)
    m, h = mean_ci(list(x))
    assert (m - h, m + h) == pytest.approx((ci.low, ci.high), rel=1e-10)


def test_mean_ci_without_enough_values() -> None:
    m, h = mean_ci([4.0])
    assert m == 4.0 and math.isnan(h)
    m, h = mean_ci([])
    assert math.isnan(m) and math.isnan(h)


def test_paired_differences_give_the_paired_t_interval() -> None:
    rng = np.random.default_rng(3)
    a = {s: float(v) for s, v in enumerate(rng.normal(10, 3, size=8))}
    b = {s: a[s] - float(rng.normal(1.0, 0.5)) for s in range(2, 10) if s in a}
    b[99] = 0.0  # a seed only b ran: not paired
    d = paired_differences(a, b)
    seeds = sorted(a.keys() & b.keys())
    assert seeds == list(range(2, 8)) and len(d) == 6
    ci = stats.ttest_rel([a[s] for s in seeds], [b[s] for s in seeds]).confidence_interval(0.95)
    m, h = mean_ci(d)
    assert (m - h, m + h) == pytest.approx((ci.low, ci.high), rel=1e-10)


@pytest.mark.parametrize(
    ("values", "side"),
    [([0.9, 1.0, 1.1], 1), ([-0.9, -1.0, -1.1], -1), ([-1.0, 1.0], 0), ([5.0], None), ([], None)],
)
def test_ci_side(values: list[float], side: int | None) -> None:
    assert ci_side(values) == side


def test_ci_side_agrees_with_scipy_on_random_samples() -> None:
    rng = np.random.default_rng(11)
    for _ in range(200):
        n = int(rng.integers(2, 15))
        x = rng.normal(rng.normal(0, 1), 1.0, size=n)
        target = float(rng.normal(0, 0.5))
        ci = stats.ttest_1samp(x, target).confidence_interval(0.95)
        want = 1 if ci.low > target else -1 if ci.high < target else 0
        assert ci_side(list(x), target) == want


def test_verdict_words_each_side() -> None:
    words = {"above": "up", "below": "down", "spans": "both", "few": "none"}
    assert verdict([0.9, 1.0, 1.1], **words) == "up"
    assert verdict([-0.9, -1.0, -1.1], **words) == "down"
    assert verdict([-1.0, 1.0], **words) == "both"
    assert verdict([1.0], **words) == "none"
    assert verdict([0.9, 1.0, 1.1], **words, target=2.0) == "down"
    assert verdict([-1.0, 1.0], above="a", below="b") == "not shown (CI spans 0)"


def test_target_verdict_uses_the_point_estimate_and_says_when_the_ci_spans() -> None:
    assert target_verdict([1.0, 1.01, 0.99], 1.15, at_most=True) == "met"
    assert target_verdict([1.3, 1.31, 1.29], 1.15, at_most=True) == "missed"
    assert target_verdict([1.1, 1.2, 1.0], 1.15, at_most=True) == (
        "point estimate meets it; CI spans it"
    )
    assert target_verdict([-5.0, 10.0, -20.0], 0.0, at_most=False, target_name="0") == (
        "point estimate misses it; CI spans 0"
    )
    assert target_verdict([2.0], 1.0, at_most=False) == "met"  # one value: no CI


def test_fmt_ci_forms() -> None:
    x = [1.0, 2.0, 3.0, 4.0]
    m, h = mean_ci(x)
    assert fmt_ci(x) == f"{m:.3g} ± {h:.2g} (n=4)"
    assert fmt_ci(x, 1, n="never") == f"{m:.1f} ± {h:.1f}"
    assert fmt_ci(x, 1, n="single") == f"{m:.1f} ± {h:.1f}"
    assert fmt_ci([2.5], 1, n="single") == "2.5 (n=1)"
    assert fmt_ci([2.5]) == "2.5 (n=1)" and fmt_ci([2.5], 2, n="never") == "2.50"
    assert fmt_ci([], empty="—") == "—"


def test_md_table() -> None:
    assert md_table(["a", "b"], [[1, 0.123456], ["x", "y"]]) == (
        "| a | b |\n| --- | --- |\n| 1 | 0.1235 |\n| x | y |\n"
    )
    assert md_table(["a"], []) == "| a |\n| --- |\n"
    assert md_table(["a"], [], empty="nothing\n") == "nothing\n"


def test_jsonl_round_trip_and_a_bad_line_is_named(tmp_path: Path) -> None:
    path = tmp_path / "deep" / "runs.jsonl"
    append_jsonl(path, {"seed": 0, "x": 1.5})
    append_jsonl(path, {"seed": 1, "x": np.float32(2.5)}, default=float)
    with pytest.raises(TypeError):
        append_jsonl(path, {"seed": 2, "x": np.float32(2.5)})
    path.write_text(path.read_text() + "\n")  # blank lines are skipped
    assert read_jsonl(path) == [{"seed": 0, "x": 1.5}, {"seed": 1, "x": 2.5}]
    path.write_text(path.read_text() + "{not json\n")
    with pytest.raises(ConfigError, match=r"runs\.jsonl:4 is not a JSON line"):
        read_jsonl(path)


def test_invocations_lists_each_command_once() -> None:
    rows = [{"command": "preflab bench x --seeds 1"}, {"command": "preflab bench x --seeds 0"}]
    rows += [{"command": "preflab bench x --seeds 1"}, {"seed": 2}]
    assert invocations(rows) == (
        "Invocations that recorded these runs:\n\n"
        "- `preflab bench x --seeds 0`\n- `preflab bench x --seeds 1`\n"
    )
    assert invocations([{"seed": 0}]) == ""
