"""The groupwise benchmark's analysis: paired differences, verdicts, the reward-learning check,
the jsonl of runs and the report built from it (no training)."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from preflab.errors import ConfigError
from preflab.rundir.reporting import append_jsonl
from preflab_bench._groupwise_report import (
    load_runs,
    paired_differences,
    report,
    reward_learns,
    verdict,
)


def _row(env: str, dm: str, seed: int, ret: float, err: float, acc: float) -> dict[str, Any]:
    return {
        "env": env,
        "dm": dm,
        "seed": seed,
        "budget": {
            "env_id": env,
            "total_steps": 100,
            "steps_per_round": 50,
            "comparisons": 10,
            "segment_length": 5,
            "pool": 20,
            "noise_frac": 0.5,
            "max_discordance": 0.25,
        },
        "true_return": ret,
        "heldout_accuracy": acc,
        "heldout_corr": 0.5,
        "wall_s": 1.0,
        "dm_comparisons": 10,
        "dm_skipped": 0,
        "dm_labels": 10,
        "dm_label_error_rate": err,
        "command": "preflab bench groupwise --envs X",
    }


def test_paired_differences_pair_by_seed() -> None:
    rows = [
        _row("E", "pairwise", 0, 1.0, 0.2, 0.9),
        _row("E", "pairwise", 1, 5.0, 0.3, 0.9),
        _row("E", "interactive", 1, 8.0, 0.1, 0.9),
        _row("E", "interactive", 0, 2.0, 0.1, 0.9),
        _row("E", "interactive", 2, 9.0, 0.1, 0.9),  # no pairwise seed 2: not paired
        _row("F", "pairwise", 0, 100.0, 0.0, 0.9),
    ]
    assert paired_differences(rows, "E", "interactive", "pairwise", "true_return") == [1.0, 3.0]
    err = paired_differences(rows, "E", "interactive", "pairwise", "dm_label_error_rate")
    assert err == pytest.approx([-0.1, -0.2])


@pytest.mark.parametrize(
    ("values", "better", "expected"),
    [
        ([1.0, 1.2, 0.9, 1.1], +1, "shown"),
        ([-1.0, -1.2, -0.9, -1.1], -1, "shown"),
        ([-1.0, -1.2, -0.9, -1.1], +1, "opposite"),
        ([1.0, 1.2, 0.9, 1.1], -1, "opposite"),
        ([1.0, -1.0, 0.5, -0.5], +1, "not shown"),
        ([1.0], +1, "n < 2"),
    ],
)
def test_verdict_reads_the_ci(values: list[float], better: int, expected: str) -> None:
    assert verdict(values, better).startswith(expected)


def test_reward_learns_needs_accuracy_and_a_ci_above_chance() -> None:
    good = [_row("E", "pairwise", s, 0.0, 0.1, a) for s, a in enumerate([0.8, 0.85, 0.9])]
    chance = [_row("E", "pairwise", s, 0.0, 0.1, a) for s, a in enumerate([0.5, 0.55, 0.45])]
    wide = [_row("E", "pairwise", s, 0.0, 0.1, a) for s, a in enumerate([0.3, 1.0, 0.7])]
    assert reward_learns(good, "E")[0]
    assert not reward_learns(chance, "E")[0]
    assert not reward_learns(wide, "E")[0]  # mean 0.67 but the CI reaches below 0.5
    assert reward_learns(chance, "E", threshold=0.0)[0]


def test_jsonl_appends_and_the_last_record_of_a_run_wins(tmp_path: Path) -> None:
    path = tmp_path / "runs.jsonl"
    assert load_runs(path) == []
    append_jsonl(path, _row("E", "pairwise", 0, 1.0, 0.2, 0.9))
    append_jsonl(path, _row("E", "interactive", 0, 2.0, 0.1, 0.9))
    append_jsonl(path, _row("E", "pairwise", 0, 3.0, 0.2, 0.9))  # the same run again
    rows = load_runs(path)
    assert len(rows) == 2
    assert {r["dm"]: r["true_return"] for r in rows} == {"pairwise": 3.0, "interactive": 2.0}
    path.write_text(path.read_text() + "{not json\n")
    with pytest.raises(ConfigError, match=r"runs\.jsonl:4"):
        load_runs(path)


def test_report_drops_an_environment_whose_reward_stays_at_chance(tmp_path: Path) -> None:
    rows = []
    for s in range(3):
        rows += [
            _row("GridWorld", "pairwise", s, 10.0 + s, 0.20, 0.9),
            _row("GridWorld", "interactive", s, 12.0 + s, 0.05, 0.9),
            _row("MountainCar", "pairwise", s, 1.0, 0.2, 0.5),
            _row("MountainCar", "interactive", s, 1.0, 0.2, 0.52),
        ]
    md = report(rows, ["--report"], tmp_path / "runs.jsonl")
    assert "Dropped (reward at chance, see the first table): MountainCar." in md
    diff, protocol = [line for line in md.splitlines() if "interactive − pairwise" in line]
    assert diff.startswith("| GridWorld") and protocol.startswith("| GridWorld")
    cells = [c.strip() for c in diff.strip("|").split("|")]
    assert cells[3] == "-15.0 ± 0.0"  # label error, percentage points
    assert cells[4].startswith("shown") and cells[6].startswith("shown")
    assert cells[7] == "+8"  # the paper's Table 1: 770 − 762
    # under the protocol: IQM differences paired by seed (return 2, label error −15 points)
    cells = [c.strip() for c in protocol.strip("|").split("|")]
    assert cells[4:] == ["3", "2 [2, 2]", "-15 [-15, -15]"]
    assert "not pre-registered (no plan entry): no verdict" in md


@pytest.mark.parametrize(("best", "noted"), [(-0.2, True), (95.0, False)])
def test_report_says_when_no_mountaincar_run_reached_the_flag(
    tmp_path: Path, best: float, noted: bool
) -> None:
    rows = [
        _row("MountainCar", dm, s, best if (s, dm) == (1, "true-reward") else -0.3, 0.1, 0.9)
        for s in range(3)
        for dm in ("pairwise", "interactive", "true-reward")
    ]
    md = report(rows, ["--report"], tmp_path / "runs.jsonl")
    assert ("no run reached the flag" in md) is noted
    if noted:
        assert "best return -0.20" in md


PLAN = """
[[experiment]]
id = "gw"
bench = "groupwise"
envs = ["GridWorld"]
question = "q"
arms = ["interactive", "groupwise", "pairwise"]
eval_seeds = [0, 1, 2]
tuning_seeds = []
budget = { skips = "count" }
metric = "final true return"
target = { kind = "difference", value = 0.0, direction = "above" }
looks = 1
committed = 2026-11-29
"""


def _planned(dm: str, seed: int, ret: float) -> dict[str, Any]:
    return _row("GridWorld", dm, seed, ret, 0.1, 0.9) | {"plan": "gw", "date": "2026-11-29"}


def test_a_plan_entrys_report_lists_its_runs_only_until_every_run_exists(tmp_path: Path) -> None:
    (tmp_path / "plan.toml").write_text(PLAN)
    rows = [_planned(dm, s, 12.0 + s if dm == "interactive" else 10.0 + s)
            for s in range(3) for dm in ("interactive", "groupwise", "pairwise")]  # fmt: skip
    md = report(
        rows[:-1], ["--plan", "gw"], tmp_path / "runs.jsonl", plan_path=tmp_path / "plan.toml"
    )
    assert "**incomplete**, 8 of 9 planned runs" in md and "(missing: GridWorld pairwise 2)" in md
    assert "IQM" not in md and "12.00" not in md and "verdict" not in md.lower()
    md = report(rows, ["--plan", "gw"], tmp_path / "runs.jsonl", plan_path=tmp_path / "plan.toml")
    line = next(x for x in md.splitlines() if x.startswith("| GridWorld | 3 |"))
    assert line == "| GridWorld | 3 | 2 [2, 2] | **met** |"  # interactive − pairwise: 2 per seed
    assert "not pre-registered" not in md
    # the interactive DM 1 below the pairwise one on every seed: the whole interval below 0
    worse = [r | {"true_return": r["true_return"] - 3.0} if r["dm"] == "interactive" else r
             for r in rows]  # fmt: skip
    md = report(worse, ["--plan", "gw"], tmp_path / "runs.jsonl", plan_path=tmp_path / "plan.toml")
    assert "| GridWorld | 3 | -1 [-1, -1] | **missed** |" in md


def test_a_planned_invocation_must_be_the_entrys_own(tmp_path: Path) -> None:
    from preflab_bench._groupwise_plan import planned_entry

    (tmp_path / "plan.toml").write_text(PLAN)
    ok = {"envs": ["GridWorld"], "dms": ["pairwise"], "seeds": [0], "skips": "count"}
    assert planned_entry(tmp_path / "plan.toml", "gw", **ok, overrides=[]).id == "gw"
    for change, says in (
        ({"seeds": [3]}, "seeds [3] are not its evaluation seeds"),
        ({"envs": ["Hopper"]}, "envs ['Hopper'] are not its envs"),
        ({"dms": ["true-reward"]}, "decision makers ['true-reward'] are not its arms"),
        ({"skips": "replace"}, "it registers --skips count, not replace"),
    ):
        with pytest.raises(ConfigError, match=says.replace("[", r"\[").replace("]", r"\]")):
            planned_entry(tmp_path / "plan.toml", "gw", **(ok | change), overrides=[])
    with pytest.raises(ConfigError, match="--steps would change its registered budgets"):
        planned_entry(tmp_path / "plan.toml", "gw", **ok, overrides=["--steps"])


def test_every_spec_is_a_table_1_environment_gymnasium_knows() -> None:
    """HalfCheetah and Walker (the Table 1 envs not run by default) can be named by an entry."""
    import gymnasium as gym

    from preflab_bench._groupwise_envs import DEFAULT_ENVS, PAPER, SPECS

    assert set(SPECS) == set(PAPER) and set(DEFAULT_ENVS) < set(SPECS)
    for spec in SPECS.values():
        assert gym.spec(spec.env_id).id == spec.env_id
