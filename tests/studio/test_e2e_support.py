"""The browser tests' support: pausing a process between its writes to the store."""

from __future__ import annotations

import signal
import sqlite3
import subprocess
import sys
import textwrap
from pathlib import Path

from .e2e_support import pause_between_writes, stop, wait_until

# holds the write lock ~90 % of the time: 200 ms in a write transaction, then 20 ms without
WRITER = textwrap.dedent(
    """
    import sqlite3, sys, time
    db = sqlite3.connect(sys.argv[1], isolation_level=None)
    db.execute("PRAGMA journal_mode=WAL")
    db.execute("CREATE TABLE IF NOT EXISTS t (x INTEGER)")
    while True:
        db.execute("BEGIN IMMEDIATE")
        db.execute("INSERT INTO t VALUES (1)")
        time.sleep(0.2)
        db.execute("COMMIT")
        time.sleep(0.02)
    """
)


def locked(db: Path) -> bool:
    probe = sqlite3.connect(db, timeout=0, isolation_level=None)
    try:
        probe.execute("BEGIN IMMEDIATE")
        probe.execute("ROLLBACK")
        return False
    except sqlite3.OperationalError:
        return True
    finally:
        probe.close()


def test_a_paused_writer_holds_no_write_lock(tmp_path: Path) -> None:
    db = tmp_path / "store.db"
    writer = subprocess.Popen([sys.executable, "-c", WRITER, str(db)])
    try:
        wait_until(lambda: db.exists() and locked(db), 30, "the writer to hold the lock")
        for _ in range(3):
            pause_between_writes(writer, db)
            # stopped: others can write for as long as it stays stopped
            assert not locked(db)
            with sqlite3.connect(db, timeout=0) as other:
                other.execute("INSERT INTO t VALUES (2)")
            assert not locked(db)
            writer.send_signal(signal.SIGCONT)
            wait_until(lambda: locked(db), 30, "the writer to write again")
        assert writer.poll() is None
    finally:
        stop(writer)
