"""bench crowd_ppo's report (paper 003 Fig. 3 under the protocol): IQM per arm, the paired
SML / majority ratio against the plan entry's target, exploratory rows kept out of verdicts."""

from __future__ import annotations

import argparse
import json
import math
import shutil
from pathlib import Path

import pytest

from preflab.aggregate import Feedback
from preflab.rundir.output import RunOutput
from preflab_bench.bpref import envs_under_plan
from preflab_bench.crowd_ppo import (
    ScoredAggregator,
    curves_section,
    parse,
    report,
    run_arm,
    run_dir_name,
)
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
    # which runs exist, not what they gave: no return or label error before the entry is read
    assert "| sml | 10 | 1000 | 1 | `preflab bench crowd_ppo` |" in md
    assert "200" not in md and "label error" not in md and "0.1" not in md


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


# ----- training curves read back from the runs' directories ------------------------------------
STEPS = [0, *range(100, 1001, 100)]
SPREAD = [1.0, 2.0, 3.0, 4.0, 100.0]
"""Seed 10 + i's curve is SPREAD[i] × step / 100 × its arm's factor: the IQM across the five
seeds drops the lowest and the highest value, so it is 3 × step / 100 × the factor (the mean
would be 22×)."""
FACTOR = {"sml": 2.0, "majority": 1.0, "oracle": 4.0}


def _finished_run(root: Path, row: dict, curve: list[float]) -> Path:
    """A finished run's directory as the bench leaves it: metrics.csv, written by a run's own
    RunOutput, with ``curve`` as train_true_return at STEPS (nan in the first round, before any
    episode ended), and the summary.json of ``row``'s run."""
    d = root / run_dir_name(row["env"], row["arm"], row["seed"])
    d.mkdir(parents=True)
    out = RunOutput(d)
    for k, (step, value) in enumerate(zip(STEPS, curve, strict=True)):
        out.append_metrics(
            {"round": k, "env_steps": step, "n_labels": 10 * k, "train_true_return": value}
        )
    summary = {"env_steps": row["steps"], "true_return": row["return"]}
    (d / "summary.json").write_text(json.dumps(summary))
    return d


def _curve_rows(root: Path) -> list[dict]:
    """Every planned run (3 arms × seeds 10–14) in the run log, each with its run directory
    under ``root``; seed 10 + i's label errors per round are (SPREAD[i] / 10, SPREAD[i] / 20)."""
    rows = []
    for arm, f in FACTOR.items():
        for r in _rows(arm, [100.0 * f] * 5):
            i = r["seed"] - 10
            if arm != "oracle":
                r["label_errors"] = [SPREAD[i] / 10, SPREAD[i] / 20]
            curve = [math.nan] + [SPREAD[i] * s / 100 * f for s in STEPS[1:]]
            _finished_run(root, r, curve)
            rows.append(r)
    return rows


def _curve_cells(md: str, arm: str) -> list[str]:
    line = next(x for x in md.splitlines() if x.startswith(f"| {arm} | ") and " at " in x)
    return [c.strip() for c in line.strip("|").split("|")]


def test_the_curves_are_the_iqm_across_seeds_at_each_step_with_a_band(tmp_path: Path) -> None:
    rows = _curve_rows(tmp_path / "runs")
    png = tmp_path / "crowd_ppo_curves.png"
    md = report(rows, _plan(tmp_path), run_root=tmp_path / "runs", curves=png)
    assert "### Training curves" in md and "![training curves per arm](crowd_ppo_curves.png)" in md
    assert "25 % (250 steps)" in md and "100 % (1,000 steps)" in md
    # the last round at or below 25/50/75/100 % of the 1,000 steps: 200, 500, 700, 1,000
    for arm, f in FACTOR.items():
        cells = _curve_cells(md, arm)
        assert cells[:2] == [arm, "5"]
        for cell, step in zip(cells[2:], (200, 500, 700, 1000), strict=True):
            point, band = cell.split(" [")
            lo, hi = (float(x) for x in band.split("]")[0].split(", "))
            assert float(point) == pytest.approx(3 * step / 100 * f)
            assert lo < float(point) < hi and cell.endswith(f" at {step:,}")
    assert "True reward's reference: none" in md and "not found" not in md
    assert png.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
    # the label error per feedback round: the IQM of seeds' (0.1, 0.2, 0.3, 0.4, 10) / 10 is 0.3
    status = next(iter(envs_under_plan(rows, _plan(tmp_path))))[2]
    _, panel = curves_section("t", rows, status, tmp_path / "runs", png.name)
    assert panel.per_round["sml"] == pytest.approx([0.3, 0.15])
    assert "oracle" not in panel.per_round
    steps = panel.curves["oracle"].steps
    assert steps.tolist() == STEPS[1:]  # the nan round is no point


def test_a_missing_or_unfinished_run_directory_is_named_and_the_curves_go_on(
    tmp_path: Path,
) -> None:
    queue = tmp_path / "queue"
    rows = [r | {"command": f"preflab bench crowd_ppo --run-root {queue}"} for r in
            _curve_rows(queue)]  # fmt: skip
    shutil.rmtree(queue / run_dir_name(ENV, "majority", 11))  # SPREAD 2 gone
    (queue / run_dir_name(ENV, "oracle", 13) / "summary.json").unlink()  # a half-finished dir
    png = tmp_path / "c.png"
    md = report(rows, _plan(tmp_path), run_root=tmp_path / "elsewhere", curves=png)
    assert "whose run directory was not found (2;" in md
    assert f"majority seed 11: {tmp_path / 'elsewhere' / run_dir_name(ENV, 'majority', 11)} " in md
    assert f"{queue / run_dir_name(ENV, 'majority', 11)} missing" in md
    assert "oracle seed 13:" in md and "no finished run" in md
    # found under the run root of the rows' own command; the IQM over what is left:
    # majority's SPREAD (1, 3, 4, 100) keeps 3 and 4, oracle's (1, 2, 3, 100) keeps 2 and 3
    assert _curve_cells(md, "majority")[1] == "4"
    assert float(_curve_cells(md, "majority")[5].split(" [")[0]) == pytest.approx(3.5 * 10)
    assert float(_curve_cells(md, "oracle")[5].split(" [")[0]) == pytest.approx(2.5 * 10 * 4)
    assert float(_curve_cells(md, "sml")[5].split(" [")[0]) == pytest.approx(3 * 10 * 2)
    assert png.is_file()


def test_an_incomplete_entry_draws_no_curves(tmp_path: Path) -> None:
    rows = [r for r in _curve_rows(tmp_path / "runs") if (r["arm"], r["seed"]) != ("sml", 14)]
    png = tmp_path / "c.png"
    md = report(rows, _plan(tmp_path), run_root=tmp_path / "runs", curves=png)
    assert "**incomplete**" in md and "Training curves" not in md and not png.exists()
