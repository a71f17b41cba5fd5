"""Helpers for tests that change a run directory."""

from __future__ import annotations

import hashlib
import os
import shutil
import signal
import subprocess
import sys
from collections.abc import Mapping
from pathlib import Path

from tests import warm_python


def copy_run(run: Path, tmp_path: Path) -> Path:
    """A copy of ``run`` under ``tmp_path`` (the session's shared run stays untouched)."""
    dst = tmp_path / "copy"
    shutil.copytree(run, dst)
    return dst


def digest_run(run_dir: Path) -> dict[str, str]:
    """SHA-256 of every file of ``run_dir`` by relative path (to show nothing was written)."""
    return {
        str(p.relative_to(run_dir)): hashlib.sha256(p.read_bytes()).hexdigest()
        for p in sorted(run_dir.rglob("*"))
        if p.is_file()
    }


def run_killable(
    code: str,
    *args: str,
    failpoint: str | None = None,
    env: Mapping[str, str] | None = None,
    timeout: float = 240,
) -> subprocess.CompletedProcess[str]:
    """``python -c CODE ARGS...`` in a process forked from the warm interpreter
    (:mod:`tests.warm_python`), hash seed 0, killed at ``failpoint`` when given
    (``PREFLAB_FAILPOINT``; :mod:`preflab.testing.failpoints`), with ``env`` added; the finished
    process (output captured). It must end normally or by that SIGKILL: anything else fails the
    test with its stderr."""
    full = dict(os.environ, PYTHONHASHSEED="0", **(env or {}))
    full.pop("PREFLAB_FAILPOINT", None)
    if failpoint:
        full["PREFLAB_FAILPOINT"] = failpoint
    proc = warm_python.run(
        [sys.executable, "-c", code, *args],
        env=full,
        capture_output=True,
        text=True,
        timeout=timeout,
    )
    if proc.returncode not in (0, -signal.SIGKILL):
        raise AssertionError(proc.stderr[-3000:])
    return proc
