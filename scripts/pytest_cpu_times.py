"""A pytest plugin that writes each test's CPU seconds: the test process's own and those of every
process under it (children, grandchildren, reaped or not), with the wall seconds beside them.

On the shared 2-core machine the test run is bound by CPU, and a test's wall time there depends
on what else runs; its CPU time much less. Use it on one module at a time, before and after a
change (docs/guide/test-time.md):

    PYTHONPATH=scripts PREFLAB_CPU_TIMES=/tmp/cpu.txt \\
        .venv/bin/python -m pytest -q -p no:cacheprovider -n 0 -p pytest_cpu_times tests/x.py

Before the first test it starts the warm forkserver of ``tests/warm_python.py`` (a worker of the
full run has one), so that a test is charged for the processes it forks, not for the server's
start. The process becomes a child subreaper (Linux), so orphans (a studio's media workers once
the studio ends, a killed trainer's studio) stay its descendants and their CPU is counted.
"""

from __future__ import annotations

import ctypes
import os
import resource
import sys
import time
from collections.abc import Iterator
from typing import Any

import pytest

_TICK = os.sysconf("SC_CLK_TCK")
_OUT = open(os.environ.get("PREFLAB_CPU_TIMES", "cpu_times.txt"), "a")  # noqa: SIM115
_START: list[float] = []


def _cpu() -> float:
    """CPU seconds of this process, its reaped children and every live (or zombie) descendant
    with what each of them reaped."""
    own = resource.getrusage(resource.RUSAGE_SELF)
    reaped = resource.getrusage(resource.RUSAGE_CHILDREN)
    total = own.ru_utime + own.ru_stime + reaped.ru_utime + reaped.ru_stime
    parent: dict[int, int] = {}
    spent: dict[int, float] = {}
    for name in os.listdir("/proc"):
        if not name.isdigit():
            continue
        try:
            with open(f"/proc/{name}/stat") as f:
                fields = f.read().rsplit(")", 1)[1].split()
        except OSError:
            continue
        # fields[1]: ppid; fields[11:15]: utime, stime, cutime, cstime (in clock ticks)
        parent[int(name)] = int(fields[1])
        spent[int(name)] = sum(int(x) for x in fields[11:15]) / _TICK
    children: dict[int, list[int]] = {}
    for pid, ppid in parent.items():
        children.setdefault(ppid, []).append(pid)
    todo = list(children.get(os.getpid(), []))
    while todo:
        pid = todo.pop()
        total += spent[pid]
        todo += children.get(pid, [])
    return total


def pytest_sessionstart(session: pytest.Session) -> None:
    ctypes.CDLL(None).prctl(36, 1, 0, 0, 0)  # PR_SET_CHILD_SUBREAPER
    from tests import warm_python

    warm_python.run([sys.executable, "-c", "pass"], check=True)
    _START[:] = [time.monotonic(), _cpu()]


@pytest.hookimpl(hookwrapper=True)
def pytest_runtest_protocol(item: pytest.Item, nextitem: Any) -> Iterator[None]:
    wall, cpu = time.monotonic(), _cpu()
    yield
    _OUT.write(f"{time.monotonic() - wall:8.2f} wall {_cpu() - cpu:8.2f} cpu  {item.nodeid}\n")
    _OUT.flush()


def pytest_sessionfinish(session: pytest.Session) -> None:
    wall, cpu = _START
    _OUT.write(f"{time.monotonic() - wall:8.2f} wall {_cpu() - cpu:8.2f} cpu  TOTAL\n")
    _OUT.flush()
