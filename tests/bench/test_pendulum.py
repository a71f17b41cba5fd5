"""The like-for-like Pendulum bench without imitation: exact step budgets and the report."""

from __future__ import annotations

import json

import pytest

from preflab.errors import ConfigError
from preflab_bench import pendulum


@pytest.mark.parametrize("steps", [88_832, 88_384, 4096, 6_152])
def test_preflab_ppo_takes_exactly_the_given_env_steps(steps):
    cfg = pendulum.ppo_config(100, steps, 200, segment_length=50, eval_episodes=1)
    assert cfg.total_steps == steps
    assert cfg.initial_steps >= 2 * cfg.segment_length
    assert (steps - cfg.initial_steps) % pendulum.PPO_ROLLOUT == 0  # whole PPO rollouts


def test_preflab_ppo_rejects_a_budget_it_cannot_hit():
    with pytest.raises(ConfigError, match="multiple of 8"):
        pendulum.ppo_config(0, 90_001, 100, segment_length=50, eval_episodes=1)


def _runs() -> list[dict]:
    rows = []
    for seed in range(3):
        for labels, imi, pl in ((100, -300.0, -180.0), (200, -250.0, -150.0)):
            common = {"arm": "ppo", "invocation": "x", "command": "c", "seed": seed}
            for lib, ret, wall in (("imitation", imi, 60.0), ("preflab", pl, 30.0 + seed)):
                rows.append(
                    common
                    | {"lib": lib, "labels": labels, "true_return": ret + seed}
                    | {"wall_s": wall, "cpu_s": wall, "env_steps": 88_832}
                )
        rows.append(
            {"arm": "ppo", "invocation": "x", "command": "c", "seed": seed, "lib": "sb3-true"}
            | {"labels": 0, "true_return": -200.0, "wall_s": 28.0, "cpu_s": 28.0}
            | {"env_steps": 90_112}
        )
    rows.append(
        {"arm": "sac", "invocation": "y", "command": "d", "seed": 0, "lib": "imitation"}
        | {"labels": 400, "error": "SourceError: below the fragment sampling"}
    )
    return rows


def test_report_has_the_targets_and_every_table_is_rectangular(tmp_path):
    runs = tmp_path / "runs.jsonl"
    runs.write_text("".join(json.dumps(r) + "\n" for r in _runs()))
    out = tmp_path / "pendulum.md"
    assert pendulum.main(["--report", "--runs", str(runs), "--out", str(out)]) == 0
    text = out.read_text()
    assert text.startswith("# Pendulum-v1")
    assert "`c`" in text and "`d`" in text  # the commands that made the runs
    assert "ppo: return PrefLab@100 − imitation@200 (paired by seed) | 70 ± 0 (n=3)" in text
    assert "≤ 0.6: met" in text  # 30..32 s vs 60 s
    # under the protocol: the same difference as an IQM difference; no plan entry, no verdict
    assert "(IQM difference) | 3 | 70 [70, 70] | ≥ 0: exploratory |" in text
    floor = (28.0 / 90_112) / (60.0 / 88_832)  # SB3 alone per env step over imitation's
    row = next(ln for ln in text.splitlines() if "ppo: floor of the wall ratio" in ln)
    assert f"| {floor:.3g} ± 0 (n=6) |" in row  # every imitation run, both label counts
    assert "Runs that could not be made" in text
    for block in text.split("\n\n"):
        table = [ln for ln in block.splitlines() if ln.startswith("|")]
        assert len({ln.count("|") for ln in table}) <= 1, block


def test_main_needs_an_arm_or_report(tmp_path):
    with pytest.raises(SystemExit):
        pendulum.main(["--runs", str(tmp_path / "r.jsonl")])


def test_report_without_runs_file_is_a_clear_error(tmp_path):
    with pytest.raises(ConfigError, match="no runs file"):
        pendulum.main(["--report", "--runs", str(tmp_path / "none.jsonl")])


def test_the_closing_summary_and_plot_are_left_out_of_the_training_cpu(tmp_path):
    from preflab.rundir.output import RunOutput

    original = RunOutput.finish
    history = [
        {"env_steps": 100 * i, "n_labels": 10 * i, "train_true_return": -1000.0 + i}
        for i in range(3)
    ]
    with pendulum._untimed_cpu() as untimed:
        assert untimed == [0.0]
        RunOutput(tmp_path).finish({"env_id": "Pendulum-v1"}, history)
        assert untimed[0] > 0.0  # the plot's CPU was counted as outside training
    assert (tmp_path / "learning_curves.png").exists()
    assert RunOutput.finish is original  # restored on exit
