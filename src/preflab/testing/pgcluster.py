"""A throwaway PostgreSQL cluster on loopback for benchmarks (tests use tests/conftest.py)."""

from __future__ import annotations

import glob
import os
import shutil
import socket
import subprocess
import tempfile
import uuid
from dataclasses import dataclass

from preflab.errors import StoreError


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


@dataclass
class PostgresCluster:
    """initdb + pg_ctl in a temporary folder; ``new_database()`` gives a fresh URL."""

    root: str
    bindir: str
    port: int
    as_postgres: list[str]

    @staticmethod
    def start() -> PostgresCluster:
        found = sorted(glob.glob("/usr/lib/postgresql/*/bin/initdb"))
        if not found:
            raise StoreError("PostgreSQL server binaries not found (apt-get install postgresql)")
        bindir = os.path.dirname(found[-1])
        root = tempfile.mkdtemp(prefix="preflab-pg-")
        as_postgres: list[str] = []
        if os.geteuid() == 0:  # initdb refuses to run as root
            shutil.chown(root, "postgres", "postgres")
            as_postgres = ["runuser", "-u", "postgres", "--"]
        data = os.path.join(root, "data")
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
        return PostgresCluster(root=root, bindir=bindir, port=port, as_postgres=as_postgres)

    def new_database(self) -> str:
        name = "b_" + uuid.uuid4().hex[:10]
        subprocess.run(
            [
                f"{self.bindir}/createdb",
                "-h",
                "127.0.0.1",
                "-p",
                str(self.port),
                "-U",
                "postgres",
                name,
            ],
            check=True,
            capture_output=True,
        )
        return f"postgresql+psycopg://postgres@127.0.0.1:{self.port}/{name}"

    def stop(self) -> None:
        subprocess.run(
            [
                *self.as_postgres,
                f"{self.bindir}/pg_ctl",
                "-D",
                os.path.join(self.root, "data"),
                "-m",
                "fast",
                "-w",
                "stop",
            ],
            capture_output=True,
        )
        shutil.rmtree(self.root, ignore_errors=True)
