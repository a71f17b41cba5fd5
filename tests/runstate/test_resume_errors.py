"""Resuming what is not a resumable run: one clear error, and the store is left untouched."""

from __future__ import annotations

import hashlib
import json
import re
import shutil
import sqlite3
import sys
from pathlib import Path

import pytest

from preflab.config import TrainConfig
from preflab.errors import ConfigError, StoreError
from preflab.reward.ensemble import RewardConfig
from preflab.runs import load_run, resume, train
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
    newest = sorted(p.name for p in (run / "checkpoints").glob("ckpt-*"))[-1]
    with pytest.raises(StoreError, match=rf"has no checkpoint .*write the name .* \({newest}\)"):
        resume(run)


def test_a_latest_pointer_that_is_not_text_is_named(finished: Path, tmp_path: Path) -> None:
    run = copy_run(finished, tmp_path)
    (run / "checkpoints" / "LATEST").write_bytes(b"\xff\xfe\x80")  # no UTF-8
    with pytest.raises(StoreError, match=r"checkpoints/LATEST in .* not a checkpoint directory"):
        resume(run)


def test_a_manifest_whose_files_are_no_object_is_unreadable(finished: Path, tmp_path: Path) -> None:
    run = copy_run(finished, tmp_path)
    manifest = run / "checkpoints" / (run / "checkpoints" / "LATEST").read_text() / "manifest.json"
    manifest.write_text(manifest.read_text().split('"files"')[0] + '"files": [1]}')
    with pytest.raises(StoreError, match=r"no readable manifest\.json \(\"files\" must map"):
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


@pytest.mark.parametrize(("part", "value"), [("env", "x"), ("source", [1]), ("config", "x")])
def test_a_run_record_part_of_the_wrong_type_is_refused_by_name(
    finished: Path, tmp_path: Path, part: str, value: object
) -> None:
    """checkpoints/run.json's env, source and config are JSON objects: another type is a clear
    error naming the file and the part, on resume and on load (eval, record), not a crash in
    the checks that read it (or, for config, the edited-config check silently turned off)."""
    run = copy_run(finished, tmp_path)
    path = run / "checkpoints" / "run.json"
    path.write_text(json.dumps(json.loads(path.read_text()) | {part: value}))
    says = rf"run\.json is not a run record .*\"{part}\": {re.escape(json.dumps(value))}"
    with pytest.raises(StoreError, match=says):
        load_run(run)
    with pytest.raises(StoreError, match=says):
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


@pytest.mark.parametrize("text", [b"\xff\xfe\x80", b"", b'{"seed": "x"}'])
def test_an_unreadable_config_json_names_its_path_and_the_kept_original(
    finished: Path, tmp_path: Path, text: bytes
) -> None:
    """Not UTF-8, not JSON or a wrong value: the error names the file's full path and where
    the run keeps the config it started with."""
    run = copy_run(finished, tmp_path)
    (run / "config.json").write_bytes(text)
    kept = re.escape(f'kept in {run / "checkpoints" / "run.json"} (under "config")')
    says = rf"{re.escape(str(run / 'config.json'))}:? .*{kept}"
    with pytest.raises(ConfigError, match=says):
        resume(run)
    with pytest.raises(ConfigError, match=says):
        load_run(run)


def test_a_config_json_outside_a_run_is_named_without_a_run_record(tmp_path: Path) -> None:
    path = tmp_path / "config.json"
    path.write_text("[1]")
    with pytest.raises(ConfigError, match=rf"^{re.escape(str(path))} is not a PrefLab config") as e:
        TrainConfig.load(path)
    assert "run.json" not in str(e.value)
