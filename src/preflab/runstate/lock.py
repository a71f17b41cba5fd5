"""The run lock: one process at a time trains a run directory.

``RUN_DIR/run.lock`` is locked with the operating system's file lock (``flock``, through the
``filelock`` package) while a process trains the run, and holds the owner as strict JSON
(``{"pid": ..., "host": ..., "started": ...}``); it is emptied when the owner lets go. The kernel
releases the lock of a process that dies (SIGKILL, power loss), so a lock whose file still names
an owner but that can be taken is stale: it is taken over, with a warning naming the old owner.
A start or resume refused after the lock was taken lets go with :meth:`RunLock.abandon`, which
puts ``run.lock`` back as it was (removed when taking the lock made it). Reading a run
(:func:`preflab.runs.load_run`) takes no lock and writes nothing.
"""

from __future__ import annotations

import atexit
import contextlib
import json
import logging
import os
import socket
import time
from dataclasses import dataclass
from pathlib import Path

from filelock import Timeout, UnixFileLock

from preflab.errors import ConfigError

log = logging.getLogger(__name__)

LOCK_FILE = "run.lock"
"""The lock's file name inside a run directory."""


@dataclass(frozen=True, kw_only=True)
class LockOwner:
    """The process that holds (or last held) a run's lock, as ``run.lock`` names it."""

    pid: int
    """Its process id."""
    host: str
    """The machine it runs on (``socket.gethostname()``)."""
    started: str
    """When it took the lock (local time, ISO 8601)."""

    def describe(self) -> str:
        return f"PID {self.pid} on {self.host}, since {self.started}"


def read_owner(run_dir: str | Path) -> LockOwner | None:
    """The owner ``run.lock`` names (None when there is no lock file or it is empty or foreign);
    reads only."""
    try:
        data = json.loads((Path(run_dir) / LOCK_FILE).read_text())
        return LockOwner(pid=int(data["pid"]), host=str(data["host"]), started=str(data["started"]))
    except (OSError, ValueError, KeyError, TypeError):
        return None


class RunLock:
    """The lock of one run directory, taken by :meth:`acquire` and let go by :meth:`release`
    (also at interpreter exit)."""

    def __init__(self, run_dir: str | Path) -> None:
        self.run_dir = Path(run_dir)
        self.path = self.run_dir / LOCK_FILE
        self._lock = UnixFileLock(str(self.path), timeout=0)
        self.held = False
        self._before: bytes | None = None  # run.lock's bytes before acquire (None: no file)

    def acquire(self) -> LockOwner | None:
        """Take the lock or raise a :class:`ConfigError` naming the live owner. Returns the
        stale owner it took over from (a process that died holding it), else None."""
        self.run_dir.mkdir(parents=True, exist_ok=True)
        before = _contents(self.path)  # read first: an older filelock truncates it on opening
        try:
            self._lock.acquire()
        except Timeout:
            raise busy_error(self.run_dir, read_owner(self.run_dir)) from None
        self.held = True
        self._before = before
        stale = read_owner(self.run_dir)
        me = LockOwner(
            pid=os.getpid(),
            host=socket.gethostname(),
            started=time.strftime("%Y-%m-%dT%H:%M:%S%z"),
        )
        self.path.write_text(json.dumps(vars(me)) + "\n")
        atexit.register(self.release)
        if stale is not None:
            log.warning(
                "%s: took over the lock of %s, which no longer holds it (the process ended "
                "without finishing, e.g. it was killed); the run goes on from where it was saved",
                self.run_dir,
                stale.describe(),
            )
        return stale

    def release(self) -> None:
        """Empty ``run.lock`` and let go of the lock (nothing when not held)."""
        if not self.held:
            return
        with contextlib.suppress(OSError):  # the directory was removed (a failed start)
            self.path.write_text("")
        self._unlock()

    def abandon(self) -> None:
        """Let go after a start or resume that did not happen: ``run.lock`` is put back as it
        was before :meth:`acquire` (removed when acquire made it, else its old bytes), so a
        refused run leaves its directory as it found it (nothing when not held). The file is
        changed while the lock is still held: a process that opened it just before it was
        removed finds, once it has the lock, that the file is gone (filelock checks the file's
        link count) and does not take the lock through it."""
        if not self.held:
            return
        with contextlib.suppress(OSError):  # the directory was removed (a failed start)
            if self._before is None:
                self.path.unlink(missing_ok=True)
            else:
                self.path.write_bytes(self._before)
        self._unlock()

    def _unlock(self) -> None:
        self.held = False
        atexit.unregister(self.release)
        self._lock.release(force=True)


def _contents(path: Path) -> bytes | None:
    """The bytes of ``path``: None when there is no such file, empty when it cannot be read
    (:meth:`RunLock.abandon` then empties it, as :meth:`RunLock.release` does)."""
    try:
        return path.read_bytes()
    except FileNotFoundError:
        return None
    except OSError:
        return b""


def busy_error(run_dir: Path, owner: LockOwner | None) -> ConfigError:
    """The refusal for a run directory another process trains now."""
    who = owner.describe() if owner is not None else "another process"
    stop = f"stop it (kill {owner.pid}) or " if owner is not None else ""
    return ConfigError(
        f"{run_dir} is being trained right now by {who}; a second process would corrupt it. "
        f"Wait for it to finish, or {stop}let it end, then continue with "
        f"`preflab train --resume {run_dir}`"
    )


def check_not_running(run_dir: str | Path) -> None:
    """Raise :func:`busy_error` when a live process holds ``run_dir``'s lock; creates nothing."""
    d = Path(run_dir)
    if not (d / LOCK_FILE).is_file():
        return
    probe = UnixFileLock(str(d / LOCK_FILE), timeout=0)
    try:
        probe.acquire()
    except Timeout:
        raise busy_error(d, read_owner(d)) from None
    probe.release(force=True)
