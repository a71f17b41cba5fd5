"""The warm runner behaves as :mod:`subprocess` does for the commands the tests give it."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
from pathlib import Path

import pytest

from tests import warm_python

PY = sys.executable


def test_exit_status_output_environment_and_directory(tmp_path: Path) -> None:
    code = "import os, sys; print(os.getcwd(), os.environ['FOO'], sys.argv); sys.exit(3)"
    env = {"FOO": "bar", "PATH": os.environ.get("PATH", "")}
    r = warm_python.run(
        [PY, "-c", code, "a"], cwd=tmp_path, env=env, capture_output=True, text=True
    )
    assert r.returncode == 3
    assert r.stdout == f"{tmp_path} bar ['-c', 'a']\n" and r.stderr == ""


def test_an_exception_is_a_traceback_on_stderr_and_status_1() -> None:
    r = warm_python.run([PY, "-c", "raise ValueError('boom')"], capture_output=True, text=True)
    assert r.returncode == 1 and "ValueError: boom" in r.stderr


def test_the_cli_runs_as_the_console_script() -> None:
    r = warm_python.run(
        [PY, "-m", "preflab.cli.main", "train", "--env-id", "Nope-v9"],
        capture_output=True,
        text=True,
    )
    assert r.returncode == 1 and "unknown environment id 'Nope-v9'" in r.stderr
    assert "Traceback" not in r.stderr


def test_sigkill_and_sigint_end_it_as_they_end_a_process() -> None:
    killed = warm_python.run([PY, "-c", "import os, signal; os.kill(os.getpid(), signal.SIGKILL)"])
    assert killed.returncode == -signal.SIGKILL
    code = (
        "import time\ntry:\n    print('ready', flush=True)\n    time.sleep(60)\n"
        "except KeyboardInterrupt:\n    print('interrupted')\n    raise SystemExit(130)"
    )
    proc = warm_python.popen(
        [PY, "-c", code], stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True
    )
    assert proc.stdout.readline() == "ready\n"
    proc.send_signal(signal.SIGINT)
    out, _ = proc.communicate(timeout=30)
    assert out == "interrupted\n" and proc.returncode == 130


def test_a_timeout_kills_it() -> None:
    with pytest.raises(subprocess.TimeoutExpired):
        warm_python.run([PY, "-c", "import time; time.sleep(60)"], timeout=1)


def test_every_command_hashes_strings_alike() -> None:
    """PYTHONHASHSEED=0 for the forkserver, as the kill-and-resume tests ask of their runs."""
    code = "print(hash('preflab'))"
    a, b = (warm_python.run([PY, "-c", code], capture_output=True, text=True) for _ in range(2))
    fresh = subprocess.run(
        [PY, "-c", code],
        capture_output=True,
        text=True,
        env={**os.environ, "PYTHONHASHSEED": "0"},
    )
    assert a.stdout == b.stdout == fresh.stdout


def test_other_commands_go_to_subprocess() -> None:
    r = warm_python.run(["sh", "-c", "echo $$"], capture_output=True, text=True)
    assert r.returncode == 0 and int(r.stdout) > 0
