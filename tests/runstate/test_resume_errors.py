"""Resuming what is not a resumable run: one clear error, and the store is left untouched."""

from __future__ import annotations

import hashlib
import shutil
import sqlite3
import sys
from pathlib import Path

import pytest

from preflab.config import TrainConfig
from preflab.errors import ConfigError, StoreError
from preflab.reward.ensemble import RewardConfig
from preflab.runs import resume, train
from tests import warm_python
from tests.run_support import copy_run


def _digest(path: Path) -> str:
    return hashlib.sha256(path.read_bytes()).hexdigest()


def test_not_a_run_directory(tmp_path: Path) -> None:
    with pytest.raises(ConfigError, match="does not exist"):
        resume(tmp_path / "nope")
    (tmp_path / "file").write_text("x")
    with pytest.raises(ConfigError, match="is a file"):
        resume(tmp_path / "file")
    (tmp_path / "empty").mkdir()
    with pytest.raises(ConfigError, match=r"not a PrefLab run directory.*without --resume"):
        resume(tmp_path / "empty")


def test_store_of_another_schema_version(finished: Path, tmp_path: Path) -> None:
    run = copy_run(finished, tmp_path)
    with sqlite3.connect(run / "feedback.db") as db:
        db.execute("UPDATE preflab_info SET value = '99' WHERE key = 'schema_version'")
    with pytest.raises(StoreError, match="schema version 99"):
        resume(run)


@pytest.mark.parametrize("victim", ["tensors.pt", "arrays.npz", "state.json"])
def test_truncated_or_tampered_checkpoint(finished: Path, tmp_path: Path, victim: str) -> None:
    run = copy_run(finished, tmp_path)
    ckpt = run / "checkpoints" / (run / "checkpoints" / "LATEST").read_text()
    data = (ckpt / victim).read_bytes()
    (ckpt / victim).write_bytes(data[: len(data) // 2] if victim != "state.json" else data + b" ")
    before = _digest(run / "feedback.db")
    with pytest.raises(StoreError, match="truncated or altered"):
        resume(run)
    assert _digest(run / "feedback.db") == before


def test_missing_latest_pointer(finished: Path, tmp_path: Path) -> None:
    run = copy_run(finished, tmp_path)
    (run / "checkpoints" / "LATEST").unlink()
    with pytest.raises(StoreError, match="has no checkpoint"):
        resume(run)


def test_checkpoint_of_another_reward_network(finished: Path, tmp_path: Path) -> None:
    other = tmp_path / "other"
    train(TrainConfig.smoke(reward=RewardConfig(members=2, hidden=(32,))), run_dir=other)
    run = copy_run(finished, tmp_path)
    shutil.rmtree(run / "checkpoints")
    shutil.copytree(other / "checkpoints", run / "checkpoints")
    (run / "checkpoints" / "run.json").unlink()  # as in a run made before run.json existed
    with pytest.raises(StoreError, match="does not fit this run's config"):
        resume(run)


def test_resume_refuses_flags_that_change_the_run(finished: Path, tmp_path: Path) -> None:
    run = copy_run(finished, tmp_path)
    with pytest.raises(ConfigError, match="--seed, --total-labels"):
        resume(run, config=TrainConfig.smoke(seed=3, total_labels=5))  # budgets may only grow
    r = warm_python.run(
        [sys.executable, "-m", "preflab.cli.main", "train", "--resume", str(run), "--seed", "3"],
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert r.returncode == 1
    assert "--seed" in r.stderr and "Traceback" not in r.stderr
