"""A refused resume, start or branch leaves its directory as it found it: byte for byte (no
run.lock, hyperparams.json or SQLite -wal/-shm made, a stale lock file put back), and a new
run directory (with the parent folders made for it) is removed again."""

from __future__ import annotations

import dataclasses
import hashlib
import json
from collections.abc import Callable
from pathlib import Path

import pytest

from preflab.cli.main import main
from preflab.config import TrainConfig
from preflab.errors import StoreError
from preflab.reward.ensemble import RewardConfig
from preflab.runs import branch_run, resume
from tests.cli.test_bad_input import assert_one_line
from tests.run_support import copy_run

STALE_LOCK = b'{"pid": 999999, "host": "elsewhere", "started": "2020-01-01T00:00:00+0000"}\n'
"""run.lock as a killed process left it."""


def _snapshot(d: Path) -> dict[str, str]:
    """Every file (by its bytes' SHA-256) and folder under ``d``, by relative path."""
    return {
        str(p.relative_to(d)): hashlib.sha256(p.read_bytes()).hexdigest() if p.is_file() else "/"
        for p in sorted(d.rglob("*"))
    }


def _tamper_checkpoint(run: Path) -> None:
    state = run / "checkpoints" / (run / "checkpoints" / "LATEST").read_text() / "state.json"
    state.write_bytes(state.read_bytes() + b" ")


def _lose_store(run: Path) -> None:
    for name in ("feedback.db", "feedback.db-wal", "feedback.db-shm"):
        (run / name).unlink(missing_ok=True)


def _other_reward_network(run: Path) -> None:
    """config.json and checkpoints/run.json agree on a reward network the checkpoint does not
    hold: only restoring the checkpoint finds out (after the lock is taken)."""
    for path in (run / "config.json", run / "checkpoints" / "run.json"):
        data = json.loads(path.read_text())
        (data if path.name == "config.json" else data["config"])["reward"]["hidden"] = [7]
        path.write_text(json.dumps(data))


def _edit_config(run: Path) -> None:
    data = json.loads((run / "config.json").read_text())
    data["seed"] = 3
    (run / "config.json").write_text(json.dumps(data))


@pytest.mark.parametrize(
    ("damage", "lock", "says"),
    [
        (_tamper_checkpoint, None, "truncated or altered"),
        (_tamper_checkpoint, STALE_LOCK, "truncated or altered"),
        (_lose_store, None, "no PrefLab store"),
        (_lose_store, STALE_LOCK, "no PrefLab store"),
        (_other_reward_network, None, "does not fit this run's config"),
        (_edit_config, None, "was edited after the run started"),
    ],
    ids=[
        "tampered-checkpoint",
        "tampered-checkpoint-stale-lock",
        "lost-store",
        "lost-store-stale-lock",
        "other-reward-network",
        "edited-config",
    ],
)
def test_a_refused_resume_leaves_the_run_directory_byte_for_byte(
    capsys: pytest.CaptureFixture[str],
    finished: Path,
    tmp_path: Path,
    damage: Callable[[Path], None],
    lock: bytes | None,
    says: str,
) -> None:
    """The run has no run.lock (copied without it) or a stale one, and no hyperparams.json (made
    before it existed): a refused `preflab train --resume` makes neither, and opens no store
    it leaves -wal/-shm files of."""
    run = copy_run(finished, tmp_path)
    (run / "hyperparams.json").unlink()
    (run / "run.lock").unlink()
    if lock is not None:
        (run / "run.lock").write_bytes(lock)
    damage(run)
    before = _snapshot(run)
    code = main(["train", "--resume", str(run)])
    assert_one_line(code, capsys.readouterr().err, says)
    assert _snapshot(run) == before


def test_a_resume_refused_by_the_library_leaves_the_run_as_it_was(
    finished: Path, tmp_path: Path
) -> None:
    run = copy_run(finished, tmp_path)
    (run / "run.lock").unlink()
    _other_reward_network(run)
    before = _snapshot(run)
    with pytest.raises(StoreError, match="does not fit this run's config"):
        resume(run)
    assert _snapshot(run) == before
    _other_reward_network(run)  # the same again: nothing of the first try is in the way
    with pytest.raises(StoreError, match="does not fit this run's config"):
        resume(run)
    assert _snapshot(run) == before


SMOKE = [
    "--total-steps", "600", "--initial-steps", "200", "--steps-per-round", "200",
    "--total-labels", "12", "--segment-length", "20",
]  # fmt: skip


@pytest.mark.parametrize(
    ("bad", "says"),
    [
        # refused before any folder is made
        (["--algo", "ppo", "--agent-kwargs", '{"batch_size": 7}'], "does not divide"),
        # refused while the run's parts are built, in the folders just made for it
        (["--teacher.score", "no_such_module_here:score"], "no_such_module_here"),
    ],
    ids=["bad-batch-size", "missing-score-module"],
)
def test_a_refused_train_leaves_no_folder_it_made(
    capsys: pytest.CaptureFixture[str], tmp_path: Path, bad: list[str], says: str
) -> None:
    (tmp_path / "kept").mkdir()
    code = main(["train", *SMOKE, *bad, "--run-dir", str(tmp_path / "new" / "deeper" / "run")])
    assert_one_line(code, capsys.readouterr().err, says)
    assert _snapshot(tmp_path) == {"kept": "/"}  # the parents made for the run went too


def test_a_refused_branch_leaves_no_copy(finished: Path, tmp_path: Path) -> None:
    before = _snapshot(finished)
    other = dataclasses.replace(TrainConfig.smoke(), reward=RewardConfig(members=2, hidden=(7,)))
    with pytest.raises(StoreError, match="does not fit this run's config"):
        branch_run(finished, tmp_path / "new" / "branch", other)
    assert list(tmp_path.iterdir()) == []
    assert _snapshot(finished) == before
