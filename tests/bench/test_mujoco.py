"""The MuJoCo reproduction's verdict on the 80% target, paired by seed."""

from __future__ import annotations

import json
import re
from pathlib import Path

import pytest

from preflab.errors import ConfigError
from preflab_bench.mujoco import main, verdict


def test_verdict_reads_the_ci_of_the_paired_difference() -> None:
    assert verdict([10.0, 12.0, 14.0]).endswith("met")  # 12 ± 5: above 0
    assert verdict([-30.0, 10.0, 40.0]).endswith("not shown")  # spans 0
    assert verdict([-14.0, -12.0, -10.0]).endswith("missed")
    assert "one seed" in verdict([5.0]) and verdict([]) == "—"


_ENTRY = """
[[experiment]]
id = "mj-test"
bench = "mujoco"
envs = ["Hopper-v5"]
question = "q"
arms = ["preflab_absorbing", "ppo_true_reward"]
eval_seeds = [70, 71]
tuning_seeds = []
budget = { env_steps = 768, labels = 6, tag = "t" }
metric = "m"
target = { kind = "ratio", value = 0.8, direction = "above" }
looks = 1
committed = 2026-12-06
"""


def test_a_run_under_plan_must_match_its_entry_before_anything_runs(tmp_path: Path) -> None:
    plan = tmp_path / "plan.toml"
    plan.write_text(_ENTRY)
    base = ["--plan", "mj-test", "--plan-file", str(plan), "--smoke", "--envs", "Hopper-v5"]
    out = ["--jsonl", str(tmp_path / "runs.jsonl"), "--out", str(tmp_path / "m.md")]
    for extra, says in (
        (["--seeds", "72", "--tag", "t"], "seeds [72] are not evaluation seeds"),
        (["--seeds", "70", "--tag", "x"], "has tag = 't'; this run asks 'x'"),
        (["--seeds", "70", "--tag", "t", "--envs", "Walker2d-v5"], "runs ['Hopper-v5']"),
    ):
        with pytest.raises(ConfigError, match=re.escape(says)):
            main([*base, *extra, *out])
    assert not (tmp_path / "runs.jsonl").exists()  # nothing ran


def test_rows_of_a_run_under_plan_name_their_entry(tmp_path: Path) -> None:
    plan = tmp_path / "plan.toml"
    plan.write_text(_ENTRY)
    runs = tmp_path / "runs.jsonl"
    args = ["--plan", "mj-test", "--plan-file", str(plan), "--smoke", "--envs", "Hopper-v5"]
    args += ["--seeds", "70", "--tag", "t", "--variants", "absorbing", "--baselines", "only"]
    main([*args, "--jsonl", str(runs), "--out", str(tmp_path / "m.md")])
    rows = [json.loads(line) for line in runs.read_text().splitlines()]
    assert rows and all(r["plan"] == "mj-test" and r["command"] for r in rows)
