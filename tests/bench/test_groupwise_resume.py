"""``preflab bench groupwise`` runs that span invocations: each run in its directory under
``--run-root``, continued exactly from its last checkpoint after Ctrl-C or kill -9 (decision
makers and the PPO-on-the-true-reward reference), rows only for finished runs, with their plan
entry and command; ``--steps`` under a plan only at the entry's own budget."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
from dataclasses import replace
from pathlib import Path
from typing import Any

import pytest

from preflab.errors import ConfigError
from preflab.runstate.checkpointer import Checkpointer
from preflab.sources.deciders import DecisionMaker
from preflab_bench import groupwise
from preflab_bench._groupwise_envs import SPECS
from preflab_bench._groupwise_plan import planned_entry, verdict_section
from preflab_bench._groupwise_report import load_runs
from preflab_bench.groupwise import (
    ROW_FILE,
    RunSettings,
    main,
    run_dir_name,
    run_one,
    run_reference,
)
from tests.bench.test_plan import entry

SPEC = replace(
    SPECS["GridWorld"],
    total_steps=1_536,
    steps_per_round=512,
    comparisons=12,
    pool=40,
    agent_kwargs='{"n_steps": 512, "gamma": 0.95}',
)
"""GridWorld's run at a sixth of its steps: three rounds (the first after the initial 512
steps), each one PPO rollout of 512 steps, so a stop in the second round leaves one round to go,
and the reference arm checkpointed every round has three chunks. At 1,024 steps a round (one
rollout of 1,024) the same rounds, stops and checks ran with twice the PPO updates."""
SETTINGS = RunSettings(heldout_steps=200, eval_episodes=1)
VARIABLE = ("wall_s", "cpu_s", "date", "run_dir")
"""Fields of a row that say when and where, not what the run computed."""


def _same(a: dict[str, Any], b: dict[str, Any]) -> None:
    assert {k: v for k, v in a.items() if k not in VARIABLE} == {
        k: v for k, v in b.items() if k not in VARIABLE
    }


def test_a_decision_maker_run_stopped_in_its_second_round_continues_to_the_same_row(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    whole = run_one("GridWorld", SPEC, "interactive", 0, SETTINGS, tmp_path / "a", resumable=True)
    assert whole["dm_comparisons"] > 0 and whole["dm_labels"] > whole["dm_comparisons"]

    calls = {"n": 0}
    submit = DecisionMaker.submit

    def stop_in_the_second_round(self: DecisionMaker, *a: Any, **k: Any) -> None:
        calls["n"] += 1
        if calls["n"] == 2:
            raise KeyboardInterrupt
        submit(self, *a, **k)

    with monkeypatch.context() as m:
        m.setattr(DecisionMaker, "submit", stop_in_the_second_round)
        with pytest.raises(KeyboardInterrupt):
            run_one("GridWorld", SPEC, "interactive", 0, SETTINGS, tmp_path / "b", resumable=True)
    run_dir = tmp_path / "b" / run_dir_name("GridWorld", "interactive", 0, SPEC, SETTINGS)
    assert Checkpointer(run_dir).load().state["source"]["stats"]["comparisons"] > 0
    assert not (run_dir / ROW_FILE).exists()  # no record of an unfinished run
    split = run_one("GridWorld", SPEC, "interactive", 0, SETTINGS, tmp_path / "b", resumable=True)
    _same(split, whole)
    # finished: the same command reads its record back and runs nothing
    assert (
        run_one("GridWorld", SPEC, "interactive", 0, SETTINGS, tmp_path / "b", resumable=True)
        == split
    )


KILL_IN_SECOND_ROUND = """
import os, signal, sys
from pathlib import Path
from preflab.sources.deciders import DecisionMaker
from tests.bench.test_groupwise_resume import SETTINGS, SPEC
from preflab_bench.groupwise import run_one
calls = [0]
submit = DecisionMaker.submit
def killed(self, *a, **k):
    calls[0] += 1
    if calls[0] == 2:
        os.kill(os.getpid(), signal.SIGKILL)
    submit(self, *a, **k)
DecisionMaker.submit = killed
run_one("GridWorld", SPEC, "groupwise", 1, SETTINGS, Path(sys.argv[1]), resumable=True)
"""


@pytest.mark.slow
def test_a_run_killed_with_sigkill_continues_to_the_row_of_a_run_never_stopped(
    tmp_path: Path,
) -> None:
    whole = run_one("GridWorld", SPEC, "groupwise", 1, SETTINGS, tmp_path / "a", resumable=True)
    env = os.environ | {"PYTHONPATH": os.pathsep.join(sys.path)}
    done = subprocess.run(
        [sys.executable, "-c", KILL_IN_SECOND_ROUND, str(tmp_path / "b")],
        env=env,
        cwd=Path(__file__).parents[2],
        capture_output=True,
        check=False,
    )
    assert done.returncode == -signal.SIGKILL, done.stderr.decode()[-2000:]
    split = run_one("GridWorld", SPEC, "groupwise", 1, SETTINGS, tmp_path / "b", resumable=True)
    _same(split, whole)


def test_the_reference_arm_stopped_between_chunks_continues_to_the_same_return(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(groupwise, "REFERENCE_CHUNK_ROUNDS", 1)  # a checkpoint every round
    whole = run_reference("GridWorld", SPEC, 2, SETTINGS, tmp_path / "a")
    saves = {"n": 0}
    save = Checkpointer.save

    def stop_after_the_first(self: Checkpointer, *a: Any, **k: Any) -> None:
        save(self, *a, **k)
        saves["n"] += 1
        if saves["n"] == 1:
            raise KeyboardInterrupt

    with monkeypatch.context() as m:
        m.setattr(Checkpointer, "save", stop_after_the_first)
        with pytest.raises(KeyboardInterrupt):
            run_reference("GridWorld", SPEC, 2, SETTINGS, tmp_path / "b")
    split = run_reference("GridWorld", SPEC, 2, SETTINGS, tmp_path / "b")
    _same(split, whole)
    assert saves["n"] == 1 and split["wall_s"] > 0


def _plan(tmp_path: Path, steps: int = 3_072) -> Path:
    p = tmp_path / "plan.toml"
    text = entry(
        "gw",
        bench='"groupwise"',
        arms='["interactive", "groupwise", "pairwise", "true-reward"]',
        eval_seeds="[400, 401]",
        tuning_seeds="[]",
        budget=f'{{ skips = "count", comparisons = 400, ppo_steps = {{ GridWorld = {steps} }} }}',
        target='{ value = 0.0, direction = "above", kind = "difference" }',
    ).replace('env = "dm_control/walker-walk-v0"\n', 'envs = ["GridWorld"]\n')
    p.write_text(text)
    return p


def test_steps_under_a_plan_must_be_the_entry_budget(tmp_path: Path) -> None:
    plan = _plan(tmp_path)
    kw: dict[str, Any] = {"envs": ["GridWorld"], "dms": ["pairwise"], "seeds": [400]}
    assert planned_entry(plan, "gw", skips="count", overrides=[], steps=3_072, **kw).id == "gw"
    with pytest.raises(
        ConfigError, match=r"--steps 4096 is not its PPO budget \{'GridWorld': 3072\}"
    ):
        planned_entry(plan, "gw", skips="count", overrides=[], steps=4_096, **kw)


@pytest.mark.slow
def test_a_planned_reference_run_is_kept_in_the_run_root_and_logged_once_with_its_plan(
    tmp_path: Path,
) -> None:
    plan, out, root = _plan(tmp_path), tmp_path / "out", tmp_path / "runs"
    argv = ["--plan", "gw", "--plan-file", str(plan), "--envs", "GridWorld", "--dms",
            "true-reward", "--seeds", "400", "--steps", "3072", "--threads", "1",
            "--run-root", str(root), "--out", str(out)]  # fmt: skip
    assert main(argv) == 0
    (row,) = load_runs(out / "gw_runs.jsonl")
    assert row["plan"] == "gw" and "--run-root" in row["command"] and row["threads"] == 1
    assert row["budget"]["total_steps"] == 3_072
    assert (Path(row["run_dir"]) / ROW_FILE).is_file() and Path(row["run_dir"]).parent == root
    assert main(argv) == 0  # again: nothing run, nothing appended
    assert len((out / "gw_runs.jsonl").read_text().splitlines()) == 1
    with pytest.raises(ConfigError, match="--steps 2048 is not its PPO budget"):
        main([a if a != "3072" else "2048" for a in argv])


def test_the_verdict_compares_the_decision_makers_not_the_reference_arm(tmp_path: Path) -> None:
    plan = _plan(tmp_path)
    arms = {"interactive": 10.0, "groupwise": 5.0, "pairwise": 0.0, "true-reward": 100.0}
    rows = [
        {"env": "GridWorld", "dm": dm, "seed": s, "true_return": ret + s, "plan": "gw"}
        for dm, ret in arms.items()
        for s in (400, 401)
    ]
    md = "\n".join(verdict_section(rows, ["GridWorld"], plan))
    assert "IQM(interactive) − IQM(pairwise)" in md and "true-reward" not in md
    assert json.dumps(md).count("10 [10, 10]") == 1 and "**met**" in md
