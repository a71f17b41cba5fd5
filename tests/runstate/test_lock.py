"""The run lock: taken, let go, and put back as it was when a start or resume is refused."""

from __future__ import annotations

import json
import os
from pathlib import Path

import pytest

from preflab.errors import ConfigError
from preflab.runstate.lock import LOCK_FILE, RunLock, check_not_running, read_owner

STALE = b'{"pid": 999999, "host": "elsewhere", "started": "2020-01-01T00:00:00+0000"}\n'
"""A lock file a killed process left behind, naming it."""


def test_release_empties_the_lock_file_after_a_run(tmp_path: Path) -> None:
    lock = RunLock(tmp_path)
    lock.acquire()
    owner = read_owner(tmp_path)
    assert owner is not None and owner.pid == os.getpid()
    lock.release()
    assert (tmp_path / LOCK_FILE).read_bytes() == b""


def test_abandon_removes_a_lock_file_the_lock_made(tmp_path: Path) -> None:
    lock = RunLock(tmp_path)
    lock.acquire()
    assert (tmp_path / LOCK_FILE).is_file()
    lock.abandon()
    assert list(tmp_path.iterdir()) == []
    lock.abandon()  # a second time: nothing (not held)
    check_not_running(tmp_path)  # creates nothing either
    assert list(tmp_path.iterdir()) == []


@pytest.mark.parametrize("before", [b"", STALE], ids=["emptied", "stale-owner"])
def test_abandon_puts_back_the_lock_file_it_found(tmp_path: Path, before: bytes) -> None:
    (tmp_path / LOCK_FILE).write_bytes(before)
    lock = RunLock(tmp_path)
    lock.acquire()
    assert json.loads((tmp_path / LOCK_FILE).read_text())["pid"] == os.getpid()
    lock.abandon()
    assert (tmp_path / LOCK_FILE).read_bytes() == before


def test_an_abandoned_lock_can_be_taken_again(tmp_path: Path) -> None:
    first = RunLock(tmp_path)
    first.acquire()
    with pytest.raises(ConfigError, match=f"PID {os.getpid()}"):
        RunLock(tmp_path).acquire()
    first.abandon()
    again = RunLock(tmp_path)
    again.acquire()
    again.release()
    assert (tmp_path / LOCK_FILE).read_bytes() == b""
