"""The console script as a user runs it: train, bad input, export and read back."""

import json
import subprocess
import sys
from pathlib import Path

import pytest

from preflab.cli import train as train_cli
from tests import warm_python

PREFLAB = [sys.executable, "-m", "preflab.cli.main"]


def run(*args: str, cwd: Path) -> subprocess.CompletedProcess[str]:
    return warm_python.run([*PREFLAB, *args], cwd=cwd, capture_output=True, text=True, timeout=600)


def test_train_export_and_read_back(tmp_path: Path) -> None:
    r = run(
        "train",
        "--algo",
        "ppo",
        "--n-envs",
        "2",
        "--total-steps",
        "1200",
        "--initial-steps",
        "400",
        "--steps-per-round",
        "400",
        "--total-labels",
        "12",
        "--segment-length",
        "20",
        "--eval-episodes",
        "1",
        "--run-dir",
        "run",
        cwd=tmp_path,
    )
    assert r.returncode == 0, r.stderr[-2000:]
    assert "true_return" in r.stdout and "n_labels" in r.stdout
    summary = json.loads((tmp_path / "run" / "summary.json").read_text())
    assert summary["n_labels"] == 12 and summary["env_steps"] == 1200
    r = run("export", "run", "--out", "exp", cwd=tmp_path)
    assert r.returncode == 0, r.stderr[-2000:]
    r = run("export", "--check", "exp", cwd=tmp_path)
    assert r.returncode == 0 and "12 judgements, 12 answers, 12 labels trained on" in r.stdout


def test_bad_env_id_is_a_clear_error(tmp_path: Path) -> None:
    r = run("train", "--env-id", "Pendulm-v1", "--run-dir", "x", cwd=tmp_path)
    assert r.returncode == 1
    assert (
        "unknown environment id 'Pendulm-v1'" in r.stderr and "Did you mean Pendulum-v1" in r.stderr
    )
    assert "Traceback" not in r.stderr


def test_unknown_command_and_help(tmp_path: Path) -> None:
    assert run("fly", cwd=tmp_path).returncode == 2
    r = run("--help", cwd=tmp_path)
    assert r.returncode == 0 and "train" in r.stdout and "bench" in r.stdout


@pytest.mark.parametrize(
    ("env_id", "labels", "algo", "steps", "segment"),
    [
        ("Hopper-v5", 200, "ppo", 300_000, 125),  # 8 ms steps: 1 s clips
        ("dm_control/walker-walk-v0", 150, "sac", 50_000, 40),  # 25 ms control steps
        ("Pendulum-v1", 150, "sac", 50_000, 30),  # rendered at 30 fps
    ],
)
def test_studio_defaults_follow_the_env_family(
    env_id: str, labels: int, algo: str, steps: int, segment: int
) -> None:
    cfg = train_cli.studio_defaults(env_id)
    assert (cfg.source, cfg.total_labels, cfg.algo) == ("store", labels, algo)
    assert (cfg.total_steps, cfg.segment_length) == (steps, segment)


class _Clock:
    """A clock the test moves by hand (tqdm reads tqdm.std.time)."""

    def __init__(self) -> None:
        self.t = 1000.0

    def __call__(self) -> float:
        return self.t


def _shown_rate(bar) -> float | None:
    """The rate the bar shows: tqdm's smoothed rate, else its average since it started."""
    d = bar.format_dict
    if d["rate"] is not None:
        return float(d["rate"])
    return (d["n"] - d["initial"]) / d["elapsed"] if d["elapsed"] else None


@pytest.mark.parametrize("start", [6000, 0])  # resumed at 6000 steps; a fresh run
def test_progress_rate_counts_only_this_process_steps(
    start: int, monkeypatch: pytest.MonkeyPatch
) -> None:
    import tqdm.std

    clock = _Clock()
    monkeypatch.setattr(tqdm.std, "time", clock)
    bar = train_cli._Progress(20000)
    bar.start(start)  # the loop starts its first round here
    clock.t += 2.0  # a round of 1000 steps in 2 s
    bar.update({"env_steps": start + 1000, "n_labels": 10})
    assert bar.bar is not None and bar.bar.n == start + 1000
    assert _shown_rate(bar.bar) == pytest.approx(500.0)
    clock.t += 4.0  # the next 1000 in 4 s
    bar.update({"env_steps": start + 2000, "n_labels": 20})
    assert 250.0 <= _shown_rate(bar.bar) <= 500.0  # smoothed between the rounds' rates
    bar.close()
