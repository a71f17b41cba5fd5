"""``preflab bench bpref``: a PEBBLE run stopped mid-way continues exactly when run again."""

from __future__ import annotations

import dataclasses

import pytest

from preflab.errors import ConfigError
from preflab.rundir.reporting import read_jsonl
from preflab.runs import start_loop
from preflab_bench import bpref
from tests.bench.test_plan import entry

ENV = "dm_control/walker-walk-v0"
TINY = [
    "--seeds", "3", "--steps", "300", "--labels", "6", "--initial-steps", "100",
    "--unsup-steps", "100", "--steps-per-round", "50", "--net-arch", "16",
    "--batch-size", "32", "--threads", "1", "--eval-episodes", "1",
]  # fmt: skip
"""Feedback rounds at 200, 250 and 300 steps (1, 4 and 6 labels): a stop after round 1 leaves one
round to go, as with rounds of 100 to 400 steps, with 100 fewer SAC updates a run."""


def test_a_stopped_pebble_run_continues_where_it_stopped_and_ends_as_if_never_stopped(
    tmp_path,
) -> None:
    whole = bpref.parser().parse_args([*TINY, "--run-root", str(tmp_path / "whole")])
    split = bpref.parser().parse_args([*TINY, "--run-root", str(tmp_path / "split")])
    ref = bpref.run_pebble(whole, ENV, 3)
    run = tmp_path / "split" / "dm_control_walker-walk-v0-pebble-s3"

    def stop_after_round_1(row: dict) -> None:
        if row["round"] == 1:
            raise KeyboardInterrupt

    with pytest.raises(KeyboardInterrupt):
        start_loop(bpref.pebble_config(split, ENV, 3), run, progress=stop_after_round_1).run()
    other = dataclasses.replace(bpref.pebble_config(split, ENV, 3), net_arch=(8,))
    with pytest.raises(ConfigError, match="would change it"):
        bpref.train_row(other, run)  # not continued with other nets
    res = bpref.run_pebble(split, ENV, 3)  # the same command again
    assert res["steps"] == ref["steps"] == 300 and res["labels"] == ref["labels"] == 6
    assert res["return"] == ref["return"]
    assert res["reward_corr"] == ref["reward_corr"]
    assert (res["equal"], res["skipped"]) == (ref["equal"], ref["skipped"]) == (0, 0)  # oracle
    with pytest.raises(ConfigError, match="holds a finished run"):
        bpref.run_pebble(split, ENV, 3)  # a second row of the same run would count it twice
    # its process ended after summary.json, before its row: the row comes back, not a rerun
    assert bpref.run_pebble(split, ENV, 3, row_missing=True) == res


def test_a_finished_sac_run_is_not_run_or_logged_twice(tmp_path) -> None:
    """The SAC arm continues from its checkpoints (tests/bench/test_resumable_learn.py); once
    its row is written, the same command refuses instead of adding a second row."""
    args = bpref.parser().parse_args([*TINY, "--steps", "150", "--run-root", str(tmp_path)])
    res = bpref.run_sac(args, ENV, 3)
    assert res["steps"] == 150 and res["labels"] == 0
    with pytest.raises(ConfigError, match="holds a finished run"):
        bpref.run_sac(args, ENV, 3)


def test_a_finished_run_whose_row_was_lost_gets_its_row_back_once(tmp_path) -> None:
    """A run whose process ended between its end and its row (a killed queue) is not lost:
    the same command writes its row from what the run saved, and refuses a second one."""
    log = tmp_path / "runs.jsonl"
    argv = [*TINY, "--steps", "150", "--arms", "sac_true_reward", "--run-root", str(tmp_path)]
    argv += ["--jsonl", str(log), "--out", str(tmp_path / "bpref.md")]
    assert bpref.main(argv) == 0
    (row,) = read_jsonl(log)
    log.write_text("")  # the row was never appended
    assert bpref.main(argv) == 0
    (back,) = read_jsonl(log)
    assert {k: v for k, v in back.items() if k != "time"} == {
        k: v for k, v in row.items() if k != "time"
    }
    with pytest.raises(ConfigError, match="its row is in the run log already"):
        bpref.main(argv)
    assert len(read_jsonl(log)) == 1


def _row(plan: str, arm: str, seed: int, ret: float) -> dict:
    return {
        "bench": "bpref", "plan": plan, "command": "preflab bench bpref", "env": ENV,
        "arm": arm, "seed": seed, "return": ret, "steps": 1000, "labels": 10, "wall_s": 1.0,
        "net_arch": [16], "batch_size": 32, "teacher": "bpref-oracle",
    }  # fmt: skip


def test_two_experiments_on_one_env_get_a_section_and_a_verdict_each(tmp_path) -> None:
    plan = tmp_path / "plan.toml"
    plan.write_text(entry("pilot", eval_seeds="[10, 11]") + entry("main", eval_seeds="[20, 21]"))
    rows = [
        _row("pilot", a, s, r)
        for s in (10, 11)
        for a, r in (("pebble", 60.0), ("sac_true_reward", 100.0))
    ]
    rows += [_row("main", a, s, r) for s in (20, 21) for a, r in (("pebble", 20.0), ("sac_true_reward", 100.0))]  # fmt: skip
    md = bpref.report(rows, plan)
    _, pilot, main = md.split("## dm_control/walker-walk-v0 · plan entry ")
    assert pilot.startswith("`pilot`") and "0.6 [0.6, 0.6]" in pilot and "**met**" in pilot
    assert main.startswith("`main`") and "0.2 [0.2, 0.2]" in main and "**missed**" in main


def test_a_void_entry_shows_its_runs_and_ratio_and_why_it_has_no_verdict(tmp_path) -> None:
    plan = tmp_path / "plan.toml"
    why = "its teacher answered as the oracle (a defect found after the runs)"
    plan.write_text(entry("main", eval_seeds="[10, 11]"))
    (tmp_path / "plan_voids.toml").write_text(f'[void]\nmain = "{why}"\n')
    rows = [_row("main", a, s, r) for s in (10, 11) for a, r in (("pebble", 90.0), ("sac_true_reward", 100.0))]  # fmt: skip
    md = bpref.report(rows, plan)
    assert "0.9 [0.9, 0.9]" in md and f"**no verdict**, the entry is void: {why}" in md
    assert "**met**" not in md and "| pebble | 10 |" in md


def test_the_runs_table_says_how_the_teacher_answered_where_the_row_records_it(tmp_path) -> None:
    """A PEBBLE row's equal and skipped answers are shown; SAC on the true reward has no teacher,
    and rows logged before the counts were recorded say so with a dash, not a zero."""
    plan = tmp_path / "plan.toml"
    plan.write_text(entry("main", eval_seeds="[10, 11]"))
    rows = [_row("main", a, s, r) for s in (10, 11) for a, r in (("pebble", 90.0), ("sac_true_reward", 100.0))]  # fmt: skip
    rows[0] |= {"equal": 7, "skipped": 0}  # pebble 10; pebble 11 was logged without counts
    md = bpref.report(rows, plan)
    assert "| pebble | 10 | 90 | 1000 | 10 | 7 / 0 |" in md
    assert "| pebble | 11 | 90 | 1000 | 10 | — |" in md
    assert "| sac_true_reward | 10 | 100 | 1000 | 10 | — |" in md


def test_an_entry_with_planned_runs_missing_shows_its_runs_and_no_ratio_or_verdict(
    tmp_path,
) -> None:
    """The entry is read once, when every planned run exists: a report made before that would be
    a look the plan did not count."""
    plan = tmp_path / "plan.toml"
    plan.write_text(entry("main", eval_seeds="[20, 21, 22]"))
    rows = [_row("main", a, s, r) for s in (20, 21) for a, r in (("pebble", 20.0), ("sac_true_reward", 100.0))]  # fmt: skip
    rows.append(_row("main", "sac_true_reward", 22, 100.0))
    md = bpref.report(rows, plan)
    assert "**incomplete**, 5 of 6 planned runs (missing: pebble 22)" in md
    assert "IQM pebble / IQM sac_true_reward" not in md and "IQM [" not in md
    assert "**missed**" not in md and "**met**" not in md
    assert md.count("| pebble |") == 2 and md.count("| sac_true_reward |") == 3  # every run
    # which runs exist, not what they gave (no return, no teacher's answers)
    assert "| arm | seed | steps | labels | wall (s) | command |" in md
    assert "| pebble | 20 | 1000 | 10 | 1 | `preflab bench bpref` |" in md
    rows.append(_row("main", "pebble", 22, 20.0))
    assert "0.2 [0.2, 0.2]" in bpref.report(rows, plan)  # complete: read


def test_an_entry_reusing_the_baseline_of_another_is_read_against_those_runs(tmp_path) -> None:
    plan = tmp_path / "plan.toml"
    plan.write_text(
        entry("oracle", eval_seeds="[20, 21]")
        + entry("mistake", eval_seeds="[20, 21]", reuse='{ sac_true_reward = "oracle" }')
    )
    rows = [_row("oracle", a, s, r) for s in (20, 21) for a, r in (("pebble", 60.0), ("sac_true_reward", 100.0))]  # fmt: skip
    rows.append(_row("mistake", "pebble", 20, 30.0))
    md = bpref.report(rows, plan)
    _, _oracle, mistake = md.split("## dm_control/walker-walk-v0 · plan entry ")
    assert "**incomplete**, 3 of 4 planned runs (missing: pebble 21)" in mistake
    assert "its sac_true_reward runs are those of `oracle`" in mistake
    rows.append(_row("mistake", "pebble", 21, 30.0))
    _, oracle, mistake = bpref.report(rows, plan).split(
        "## dm_control/walker-walk-v0 · plan entry "
    )
    assert "0.3 [0.3, 0.3]" in mistake and "**missed**" in mistake  # 30 / the oracle entry's 100
    assert "| sac_true_reward | 20 |" in mistake and "| sac_true_reward | 21 |" in mistake
    assert "0.6 [0.6, 0.6]" in oracle and "**met**" in oracle  # its own reading is unchanged


def test_a_success_rate_of_zero_leaves_the_ratio_undefined_and_the_verdict_not_shown(
    tmp_path,
) -> None:
    """Meta-World: SAC on the true reward succeeds on one seed of three, PEBBLE on two. Bootstrap
    samples without SAC's seed divide by 0, so the ratio has no interval: the entry's verdict is
    "not shown" (as bpref-button-press-sbx100k registers it), with the difference beside it."""
    plan = tmp_path / "plan.toml"
    plan.write_text(
        entry("mw", env='"metaworld/button-press-v3"', eval_seeds="[0, 1, 2]", tuning_seeds="[]")
    )
    rows = []
    for s, (peb, sac) in enumerate(((0.0, 0.0), (0.5, 0.0), (0.3, 0.9))):
        for arm, rate in (("pebble", peb), ("sac_true_reward", sac)):
            r = _row("mw", arm, s, 0.0) | {"env": "metaworld/button-press-v3", "success_rate": rate}
            rows.append(r)
    md = bpref.report(rows, plan)
    assert "the ratio is undefined" in md and "**not shown**" in md
    assert "IQM pebble − IQM sac_true_reward (paired by seed, no target)" in md
