"""bench crowd_ppo's report (paper 003 Fig. 3 under the protocol): IQM per arm, the paired
SML / majority ratio against the plan entry's target, exploratory rows kept out of verdicts."""

from __future__ import annotations

import argparse
from pathlib import Path

import pytest

from preflab.aggregate import Feedback
from preflab_bench.crowd_ppo import ScoredAggregator, parse, report, run_arm
from tests.bench.test_plan import entry

ENV = "dm_control/walker-walk-v0"


def _rows(arm: str, returns: list[float], *, plan: str = "crowd-walker") -> list[dict]:
    return [
        {
            "bench": "crowd_ppo",
            "plan": plan,
            "command": "preflab bench crowd_ppo",
            "env": ENV,
            "arm": arm,
            "seed": 10 + i,
            "return": r,
            "labels": 100,
            "steps": 1000,
            "wall_s": 1.0,
            "users": 15,
            "return_scale": 1.0,
            "screened_gain": 0.04,
            "label_error": None if arm == "oracle" else 0.1,
            "label_errors": [] if arm == "oracle" else [0.2, 0.1],
            "user_error_mean": None if arm == "oracle" else 0.3,
            "user_error_best": None if arm == "oracle" else 0.1,
            "user_error_worst": None if arm == "oracle" else 0.5,
        }
        for i, r in enumerate(returns)
    ]


def _plan(tmp_path: Path) -> Path:
    p = tmp_path / "plan.toml"
    p.write_text(
        entry(
            "crowd-walker",
            bench='"crowd_ppo"',
            arms='["sml", "majority", "oracle"]',
            eval_seeds="[10, 11, 12, 13, 14]",
            target='{ value = 1.0, direction = "above", kind = "ratio" }',
        )
    )
    return p


def test_sml_twice_majority_on_every_seed_meets_a_ratio_above_one(tmp_path: Path) -> None:
    rows = _rows("sml", [200.0, 300, 400, 500, 600]) + _rows(
        "majority", [100.0, 150, 200, 250, 300]
    )
    rows += _rows("oracle", [400.0, 600, 800, 1000, 1200])
    md = report(rows, _plan(tmp_path))
    assert "plan entry `crowd-walker`, 1 look(s)" in md
    sml_maj = next(line for line in md.splitlines() if line.startswith("IQM sml / IQM majority"))
    assert "2 [2, 2]" in sml_maj and "**met**" in sml_maj
    sml_oracle = next(line for line in md.splitlines() if line.startswith("IQM sml / IQM oracle"))
    assert "0.5 [0.5, 0.5]" in sml_oracle and "target" not in sml_oracle  # no target of its own
    assert "0.20 0.10" in md  # the label error per feedback round


def test_a_row_outside_the_plan_is_reported_apart_and_never_joins_the_verdict(
    tmp_path: Path,
) -> None:
    rows = _rows("sml", [200.0] * 5) + _rows("majority", [100.0] * 5) + _rows("oracle", [1.0] * 5)
    rows += _rows("sml", [900.0], plan="")  # seed 10 again, outside any entry
    md = report(rows, _plan(tmp_path))
    planned, unplanned = md.split("## dm_control/walker-walk-v0 · no plan entry")
    assert "## dm_control/walker-walk-v0 · plan entry `crowd-walker`" in planned
    assert "2 [2, 2]" in planned and "**met**" in planned  # the 900 is not in it
    assert "**exploratory** (no verdict)" in unplanned and "**met**" not in unplanned


def test_a_planned_entry_with_a_seed_outside_it_is_exploratory(tmp_path: Path) -> None:
    rows = _rows("sml", [200.0] * 5) + _rows("majority", [100.0] * 5) + _rows("oracle", [1.0] * 5)
    rows[0] = rows[0] | {"seed": 99}  # named the entry, but not one of its evaluation seeds
    md = report(rows, _plan(tmp_path))
    assert "**exploratory** (no verdict)" in md and "**met**" not in md


def test_an_entry_with_planned_runs_missing_shows_its_runs_and_no_ratio_or_verdict(
    tmp_path: Path,
) -> None:
    rows = _rows("sml", [200.0] * 5) + _rows("majority", [100.0] * 4)  # majority 14 and oracle
    md = report(rows, _plan(tmp_path))
    assert "**incomplete**, 9 of 15 planned runs (missing: majority 14, oracle 10," in md
    assert "IQM sml / IQM majority" not in md and "**met**" not in md
    assert md.count("| sml |") == 5 and md.count("| majority |") == 4


def test_a_stopped_crowd_run_continues_exactly_with_the_errors_of_every_round(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A run stopped in its second aggregation (a time limit, a lost machine) and run again with
    the same command ends as the run that was never stopped: the same return and labels, and
    the label error of every round, the rounds before the stop included."""

    def args(root: str) -> argparse.Namespace:
        log = str(tmp_path / "runs.jsonl")
        return parse(
            ["--smoke", "--seeds", "0", "--run-root", str(tmp_path / root), "--jsonl", log]
        )

    whole = run_arm(args("whole"), ENV, "sml", 0)
    assert len(whole["label_errors"]) >= 2  # the stop below falls after a finished round

    calls = {"n": 0}
    labels = ScoredAggregator.labels

    def stop_in_the_second_round(self: ScoredAggregator, feedback: Feedback) -> list:
        calls["n"] += 1
        if calls["n"] == 2:
            raise KeyboardInterrupt
        return labels(self, feedback)

    with monkeypatch.context() as m:
        m.setattr(ScoredAggregator, "labels", stop_in_the_second_round)
        with pytest.raises(KeyboardInterrupt):
            run_arm(args("split"), ENV, "sml", 0)
    split = run_arm(args("split"), ENV, "sml", 0)  # the same command again
    for key in ("return", "labels", "steps", "label_errors", "user_error_mean"):
        assert split[key] == whole[key], key
    # run_arm appends no row, so the run looks finished with its row lost (a process ended
    # after the run's summary): the row comes back, the crowd's errors from its checkpoint
    assert run_arm(args("split"), ENV, "sml", 0) == split
