"""preflab bench crowd_fig5 under a plan entry: planned runs only, each once, read when all exist."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pytest

from preflab.errors import ConfigError
from preflab_bench import crowd_fig5

ENTRY = """
[[experiment]]
id = "fig5-test"
bench = "crowd_fig5"
env = "mo-hopper-v5"
question = "q"
arms = ["viewpoints"]
eval_seeds = [1, 2]
tuning_seeds = []
budget = { ppo_steps = [256], trajectories = 10, pairs = 40, users = 150, minority = 40, return_scale = 1.0 }
metric = "share of users in their own group"
target = { kind = "fraction", value = 0.95, direction = "above" }
looks = 1
committed = 2026-11-29
"""


def _run(tmp_path: Path, *extra: str) -> int:
    return crowd_fig5.main(
        ["--smoke", "--plan", "fig5-test", "--plan-file", str(tmp_path / "plan.toml"),
         "--out", str(tmp_path), *extra]
    )  # fmt: skip


def test_a_plan_entry_is_read_once_every_seed_has_run(tmp_path: Path) -> None:
    (tmp_path / "plan.toml").write_text(ENTRY)
    report = tmp_path / "fig5_test.md"
    assert _run(tmp_path, "--seed", "1") == 0
    text = report.read_text()
    assert "**incomplete**, 1 of 2 planned runs (missing: viewpoints 2)" in text
    assert "IQM" not in text and "**met**" not in text
    assert "%" not in text.split("**incomplete**")[1]  # the runs made, not their results
    with pytest.raises(ConfigError, match="already holds seed 1"):
        _run(tmp_path, "--seed", "1")
    with pytest.raises(ConfigError, match="not an evaluation seed"):
        _run(tmp_path, "--seed", "3")
    with pytest.raises(ConfigError, match="other budgets"):
        _run(tmp_path, "--seed", "2", "--users", "149")
    assert _run(tmp_path, "--seed", "2") == 0
    rows = [
        json.loads(line) for line in (tmp_path / "crowd_fig5_runs.jsonl").read_text().splitlines()
    ]
    assert [(r["plan"], r["seed"], r["ppo_steps"]) for r in rows] == [
        ("fig5-test", 1, 256), ("fig5-test", 2, 256)
    ]  # fmt: skip
    assert all(r["command"].startswith("preflab bench crowd_fig5 --smoke --plan") for r in rows)
    text = report.read_text()
    # the IQM of two runs trims nothing: their mean
    mean = sum(r["assigned"] for r in rows) / 2
    line = next(x for x in text.splitlines() if x.startswith("Share of the users"))
    assert f"IQM over 2 seeds: {mean:.4g} [" in line
    # two runs: a resample is (lo, lo), (lo, hi) or (hi, hi) with chances 1/4, 1/2, 1/4, so over
    # 2,000 resamples the 2.5 and 97.5 percentiles are exactly the two runs: [lo, hi]
    lo, hi = min(r["assigned"] for r in rows), max(r["assigned"] for r in rows)
    assert f"{mean:.4g} [{lo:.4g}, {hi:.4g}] (95% stratified bootstrap)" in line
    expected = "met" if lo > 0.95 else "missed" if hi < 0.95 else "not shown"
    assert f"target above 0.95: **{expected}**." in line, line
    # --report rebuilds the same reading without a run
    assert _run(tmp_path, "--report") == 0
    assert line in report.read_text()
    assert len((tmp_path / "crowd_fig5_runs.jsonl").read_text().splitlines()) == 2
    # the same two runs with other shares: the interval is again [lo, hi], and the verdict reads
    # it, not the IQM (0.96 clears 0.95, the interval [0.92, 1] does not)
    for shares, reading in (
        (
            (0.92, 1.0),
            "0.96 [0.92, 1] (95% stratified bootstrap); target above 0.95: **not shown**",
        ),
        ((0.96, 0.98), "0.97 [0.96, 0.98] (95% stratified bootstrap); target above 0.95: **met**"),
        ((0.9, 0.94), "0.92 [0.9, 0.94] (95% stratified bootstrap); target above 0.95: **missed**"),
    ):
        log = tmp_path / "crowd_fig5_runs.jsonl"
        log.write_text(
            "".join(
                json.dumps(r | {"assigned": a}) + "\n" for r, a in zip(rows, shares, strict=True)
            )
        )
        assert _run(tmp_path, "--report") == 0
        assert f"IQM over 2 seeds: {reading}." in report.read_text()


def test_report_needs_a_plan_entry(tmp_path: Path) -> None:
    with pytest.raises(ConfigError, match="--plan ENTRY"):
        crowd_fig5.main(["--report", "--out", str(tmp_path)])


@pytest.mark.parametrize(
    ("assign", "truth", "share"),
    [
        ([1, 1, 1, 0], [0, 0, 0, 1], 1.0),  # the found labels are the true ones, swapped
        ([0, 1, 1, 0], [0, 1, 1, 0], 1.0),
        ([0, 0, 0, 0], [0, 0, 0, 1], 0.75),  # one group found: it matches the larger true one
        ([0, 0, 0, 0], [1, 1, 1, 0], 0.75),
        # three found groups, two true: one found group is left without a true group, and the
        # best one-to-one matching (0→0, 2→1) puts 3 of 4 users right
        ([0, 1, 2, 2], [0, 0, 1, 1], 0.75),
        ([0, 1, 0, 1], [0, 0, 1, 1], 0.5),  # half right under either matching
    ],
)
def test_assignment_accuracy_is_the_share_right_under_the_best_matching_of_groups(
    assign: list[int], truth: list[int], share: float
) -> None:
    got = crowd_fig5.assignment_accuracy(np.array(assign), np.array(truth))
    assert got == share
