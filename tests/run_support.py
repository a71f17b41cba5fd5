"""Helpers for tests that change a run directory."""

from __future__ import annotations

import hashlib
import shutil
from pathlib import Path


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
