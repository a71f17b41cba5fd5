"""preflab bench crowd_fig5 under a plan entry: planned runs only, each once, read when all exist."""

from __future__ import annotations

import json
from pathlib import Path

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
    # a bootstrap interval of two runs' mean lies between them: the verdict follows from them
    lo, hi = min(r["assigned"] for r in rows), max(r["assigned"] for r in rows)
    expected = ["met"] if lo > 0.95 else ["missed"] if hi < 0.95 else ["met", "missed", "not shown"]
    assert any(f"0.95: **{v}**" in line for v in expected), line
    # --report rebuilds the same reading without a run
    assert _run(tmp_path, "--report") == 0
    assert line in report.read_text()
    assert len((tmp_path / "crowd_fig5_runs.jsonl").read_text().splitlines()) == 2


def test_report_needs_a_plan_entry(tmp_path: Path) -> None:
    with pytest.raises(ConfigError, match="--plan ENTRY"):
        crowd_fig5.main(["--report", "--out", str(tmp_path)])
