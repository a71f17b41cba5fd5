"""Experiment tracking (issue #29): --log tensorboard and --log wandb (offline)."""

import csv
from pathlib import Path

import pytest

from preflab.config import TrainConfig
from preflab.errors import ConfigError
from preflab.runs import train
from preflab.tracking import make_trackers, scalars


def _events(directory: Path) -> dict[str, list[tuple[int, float]]]:
    """Every scalar in the TensorBoard event files of ``directory``: tag → [(step, value)]."""
    from tensorboard.backend.event_processing.event_accumulator import EventAccumulator

    acc = EventAccumulator(str(directory))
    acc.Reload()
    return {tag: [(e.step, e.value) for e in acc.Scalars(tag)] for tag in acc.Tags()["scalars"]}


def test_scalars_keeps_finite_numbers_only() -> None:
    row = {"a": 1, "b": 2.5, "c": float("nan"), "d": "x", "e": True, "f": float("inf")}
    assert scalars(row) == {"a": 1.0, "b": 2.5}


def test_unknown_trackers_are_refused(tmp_path: Path) -> None:
    with pytest.raises(ConfigError, match="choose from tensorboard, wandb"):
        make_trackers(["mlflow"], tmp_path, {})


def test_a_run_logs_its_rounds_to_tensorboard_and_wandb_offline(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Every round's metrics.csv row is in TensorBoard at its env step (the same values); the
    policy's SB3 metrics are beside them; W&B keeps an offline run in the run directory with
    the final summary, and nothing is sent (no WANDB_MODE set: offline)."""
    monkeypatch.delenv("WANDB_MODE", raising=False)
    monkeypatch.setenv("WANDB_SILENT", "true")
    run = tmp_path / "run"
    cfg = TrainConfig.smoke(log=("tensorboard", "wandb"))
    result = train(cfg, run_dir=run)
    with (run / "metrics.csv").open() as f:
        rows = list(csv.DictReader(f))
    events = _events(run / "tensorboard")
    got = dict(events["preflab/n_labels"])
    assert got == {int(r["env_steps"]): float(r["n_labels"]) for r in rows}
    acc = dict(events["preflab/reward_accuracy"])
    for r in rows:
        if r["reward_accuracy"] not in ("", "nan"):
            assert acc[int(r["env_steps"])] == pytest.approx(float(r["reward_accuracy"]))
    assert dict(events["final/n_labels"]) == {result.env_steps: float(result.n_labels)}
    policy = _events(run / "tensorboard" / "policy")
    assert any(t.startswith(("train/", "rollout/", "time/")) for t in policy)
    (offline,) = run.glob("wandb/offline-run-*")  # offline: kept here, nothing sent
    (log,) = offline.glob("*.wandb")
    data = log.read_bytes()  # W&B's record log keeps the keys as plain strings
    assert b"preflab/n_labels" in data and b"preflab/reward_accuracy" in data
    assert b"true_return" in data  # the final summary
