"""Shared fixtures: single-threaded torch, a throwaway PostgreSQL cluster on loopback."""

from __future__ import annotations

import glob
import os
import shutil
import socket
import subprocess
import tempfile
from collections.abc import Iterator

import pytest
import torch

torch.set_num_threads(1)


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def _pg_bin() -> str | None:
    found = sorted(glob.glob("/usr/lib/postgresql/*/bin/initdb"))
    return os.path.dirname(found[-1]) if found else None


@pytest.fixture(scope="session")
def postgres_url() -> Iterator[str]:
    """URL of a fresh PostgreSQL database (scripts/setup.sh --dev installs the server)."""
    bindir = _pg_bin()
    if bindir is None:
        pytest.fail(
            "PostgreSQL server binaries not found; run `bash scripts/setup.sh --dev` (installs postgresql)"
        )
    root = tempfile.mkdtemp(prefix="preflab-pg-")
    data = os.path.join(root, "data")
    as_postgres: list[str] = []
    if os.geteuid() == 0:  # initdb refuses to run as root
        shutil.chown(root, "postgres", "postgres")
        as_postgres = ["runuser", "-u", "postgres", "--"]
    port = _free_port()
    subprocess.run(
        [
            *as_postgres,
            f"{bindir}/initdb",
            "-D",
            data,
            "-U",
            "postgres",
            "--auth=trust",
            "-E",
            "UTF8",
        ],
        check=True,
        capture_output=True,
    )
    subprocess.run(
        [
            *as_postgres,
            f"{bindir}/pg_ctl",
            "-D",
            data,
            "-o",
            f"-c listen_addresses=127.0.0.1 -p {port} -k {root}",
            "-w",
            "-l",
            os.path.join(root, "log"),
            "start",
        ],
        check=True,
        capture_output=True,
    )
    try:
        subprocess.run(
            [f"{bindir}/createdb", "-h", "127.0.0.1", "-p", str(port), "-U", "postgres", "preflab"],
            check=True,
            capture_output=True,
        )
        yield f"postgresql+psycopg://postgres@127.0.0.1:{port}/preflab"
    finally:
        subprocess.run(
            [*as_postgres, f"{bindir}/pg_ctl", "-D", data, "-m", "fast", "-w", "stop"],
            capture_output=True,
        )
        shutil.rmtree(root, ignore_errors=True)


# Property-based tests are deterministic: the same examples on every run (no flaky CI).
from hypothesis import settings as _hyp_settings  # noqa: E402

_hyp_settings.register_profile("preflab", derandomize=True, deadline=None, print_blob=True)
_hyp_settings.load_profile("preflab")
