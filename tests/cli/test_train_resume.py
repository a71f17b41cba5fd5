"""`preflab train --resume` as a user runs it: Ctrl-C says how to continue, a finished run is
extended by raising its budgets, a run another process trains is refused at once."""

from __future__ import annotations

import json
import signal
import subprocess
import sys
import time
from pathlib import Path

from tests import warm_python

PREFLAB = [sys.executable, "-m", "preflab.cli.main"]
TINY = [
    "--algo",
    "ppo",
    "--initial-steps",
    "200",
    "--steps-per-round",
    "200",
    "--total-labels",
    "12",
    "--segment-length",
    "20",
    "--pool-size",
    "40",
    "--eval-episodes",
    "1",
]


def run(*args: str, cwd: Path) -> subprocess.CompletedProcess[str]:
    return warm_python.run([*PREFLAB, *args], cwd=cwd, capture_output=True, text=True, timeout=600)


def test_ctrl_c_says_how_to_continue(tmp_path: Path) -> None:
    proc = warm_python.popen(
        [*PREFLAB, "train", *TINY, "--total-steps", "200000", "--run-dir", "run"],
        cwd=tmp_path,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.PIPE,
        text=True,
    )
    deadline = time.monotonic() + 300
    while not (tmp_path / "run" / "metrics.csv").exists():  # the first round is stored
        assert proc.poll() is None and time.monotonic() < deadline
        time.sleep(0.2)
    proc.send_signal(signal.SIGINT)
    _out, err = proc.communicate(timeout=120)
    assert proc.returncode == 130, err[-2000:]
    assert (
        "preflab train: interrupted; everything already stored is kept; continue with: "
        "preflab train --resume run"
    ) in err
    assert "Traceback" not in err
    assert (tmp_path / "run" / "run.lock").read_text() == ""  # let go on the way out


def test_resume_extends_a_finished_run(tmp_path: Path) -> None:
    r = run("train", *TINY, "--total-steps", "600", "--run-dir", "run", cwd=tmp_path)
    assert r.returncode == 0, r.stderr[-2000:]
    r = run("train", "--resume", "run", "--total-steps", "400", cwd=tmp_path)
    assert r.returncode == 1 and "--total-steps" in r.stderr and "may grow" in r.stderr
    r = run("train", "--resume", "run", "--total-steps", "1000", cwd=tmp_path)
    assert r.returncode == 0, r.stderr[-2000:]
    assert "extending the run in run: --total-steps 600 -> 1000" in r.stderr
    summary = json.loads((tmp_path / "run" / "summary.json").read_text())
    assert summary["env_steps"] == 1000
