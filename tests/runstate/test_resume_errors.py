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


@pytest.mark.parametrize("record", ["{", "[1, 2]"])
def test_an_unreadable_run_record_is_refused_not_taken_for_none(
    finished: Path, tmp_path: Path, record: str
) -> None:
    """checkpoints/run.json records what the run started with; one that is there but cannot be
    read must not turn off the check of an edited config.json (a run made before the record
    existed has no file at all)."""
    run = copy_run(finished, tmp_path)
    cfg = run / "config.json"
    cfg.write_text(cfg.read_text().replace('"seed": 0', '"seed": 5'))
    (run / "checkpoints" / "run.json").write_text(record)
    with pytest.raises(StoreError, match=r"run\.json"):
        resume(run)


@pytest.mark.parametrize(
    ("edit", "says"),
    [
        ("[1, 2]", "expected a JSON object"),
        ('{"fit": "x"}', "fit must be a table"),
        ('{"net_arch": null}', "net_arch must be an array"),
        ('{"net_arch": [-1]}', "net_arch must list layer widths"),
        ('{"env_id": 5}', "env_id must be a string"),
        ('{"total_steps": "lots"}', "total_steps must be an integer"),
    ],
)
def test_a_hand_edited_config_json_is_a_clear_error(edit: str, says: str) -> None:
    """config.json is read with the checks a TOML config file gets (every type, in one
    message), not built blindly and failing deep in the run."""
    import json

    base = json.loads(TrainConfig.smoke().to_json())
    change = json.loads(edit)
    text = json.dumps({**base, **change}) if isinstance(change, dict) else edit
    with pytest.raises(ConfigError, match=says):
        TrainConfig.from_json(text)
    assert TrainConfig.from_json(TrainConfig.smoke().to_json()) == TrainConfig.smoke()
