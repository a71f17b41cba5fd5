"""A two-node Ray cluster on this machine for the slow tests: ``ray start --head`` and a second
``ray start --address`` on loopback, each in a process group of its own (``--block``), so that
the teardown ends exactly the processes the test started (never ``ray stop``, which would end
every Ray process of the user)."""

from __future__ import annotations

import contextlib
import os
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import time
from collections.abc import Iterator
from pathlib import Path

RAY = Path(sys.executable).with_name("ray")


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def _stop(proc: subprocess.Popen[bytes]) -> None:
    with contextlib.suppress(ProcessLookupError):
        os.killpg(proc.pid, signal.SIGTERM)
    try:
        proc.wait(timeout=30)
    except subprocess.TimeoutExpired:
        with contextlib.suppress(ProcessLookupError):
            os.killpg(proc.pid, signal.SIGKILL)
        proc.wait()


@contextlib.contextmanager
def two_node_cluster(cpus_per_node: int = 1) -> Iterator[str]:
    """Head and worker, ``cpus_per_node`` CPUs each, a ``worker_node`` resource on the second;
    yields the address ``127.0.0.1:PORT``; both are ended (by process group) afterwards. A start
    that fails (Ray's own start-up time-outs on a busy machine) is tried once more."""
    for attempt in (1, 2):
        procs: list[subprocess.Popen[bytes]] = []
        temp = tempfile.mkdtemp(prefix="pl-ray-", dir="/tmp")  # socket paths must stay short
        try:
            try:
                address = _start(cpus_per_node, temp, procs)
            except RuntimeError:
                if attempt == 2:
                    raise
                continue
            yield address
            return
        finally:
            for p in reversed(procs):
                _stop(p)
            shutil.rmtree(temp, ignore_errors=True)


def _start(cpus_per_node: int, temp: str, procs: list[subprocess.Popen[bytes]]) -> str:
    port = _free_port()
    env = dict(os.environ, RAY_USAGE_STATS_ENABLED="0", RAY_AUTH_MODE="disabled")
    common = ["--block", "--node-ip-address", "127.0.0.1", "--num-cpus", str(cpus_per_node)]
    common += ["--num-gpus", "0", "--disable-usage-stats"]
    head_args = ["start", "--head", "--port", str(port), "--include-dashboard", "false"]
    address = f"127.0.0.1:{port}"
    for args in (
        [*head_args, "--temp-dir", temp, *common],
        ["start", "--address", address, "--resources", '{"worker_node": 1}', *common],
    ):
        log = open(Path(temp) / f"start-{len(procs)}.log", "wb")  # noqa: SIM115
        procs.append(
            subprocess.Popen(
                [str(RAY), *args],
                env=env,
                stdout=log,
                stderr=subprocess.STDOUT,
                start_new_session=True,
            )
        )
        _wait_for_nodes(address, len(procs), procs, temp)
    return address


def _wait_for_nodes(
    address: str, n: int, procs: list[subprocess.Popen[bytes]], temp: str, timeout: float = 180
) -> None:
    """Until ``ray status`` at ``address`` lists ``n`` active nodes (or a start failed)."""
    deadline = time.monotonic() + timeout
    env = dict(os.environ, RAY_AUTH_MODE="disabled")
    while time.monotonic() < deadline:
        for p in procs:
            if p.poll() is not None:
                logs = "".join(
                    f.read_text(errors="replace")[-2000:] for f in Path(temp).glob("*.log")
                )
                raise RuntimeError(f"ray start ended early (rc={p.returncode}):\n{logs}")
        st = subprocess.run(
            [str(RAY), "status", "--address", address], env=env, capture_output=True, text=True
        )
        if st.returncode == 0 and st.stdout.count(" node_") >= n:
            return
        time.sleep(2)
    logs = "".join(f.read_text(errors="replace")[-2000:] for f in Path(temp).glob("*.log"))
    raise RuntimeError(
        f"the Ray cluster at {address} did not reach {n} nodes in {timeout:.0f} s:\n{logs}"
    )
