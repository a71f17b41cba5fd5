"""Process lifecycle of ``preflab train --studio`` (issue #25): a busy port fails before the run
starts, the trainer only talks to its own studio, and SIGTERM / SIGKILL of the trainer stop the
studio and its render workers (the port is free again, no process is left)."""

from __future__ import annotations

import os
import signal
import socket
import stat
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import httpx
import pytest

from preflab.errors import ConfigError, SourceError
from preflab.store import FeedbackStore
from preflab.studio import launch
from preflab.studio.bootstrap import OWNER_TOKEN_FILE
from preflab.studio.heartbeat import HEARTBEAT_KEY
from preflab.studio.launch import check_port_free, start_studio_process, stop_studio_process
from tests import warm_python
from tests.studio.api_server import free_port, seed_run
from tests.studio.e2e_support import WarmSubprocess, e2e_env, wait_until


def port_free(port: int) -> bool:
    try:
        check_port_free("127.0.0.1", port)
    except ConfigError:
        return False
    return True


def group_of(pgid: int) -> list[int]:
    """Live processes (not zombies) in process group ``pgid``."""
    out = []
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit():
            continue
        try:
            fields = (entry / "stat").read_text().rsplit(")", 1)[1].split()
        except OSError:
            continue
        if fields[0] != "Z" and int(fields[2]) == pgid:
            out.append(int(entry.name))
    return out


def studio_pid(run: Path) -> int | None:
    """The pid of the `preflab studio RUN` process, if one runs."""
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit():
            continue
        try:
            cmd = (entry / "cmdline").read_bytes().split(b"\0")
        except OSError:
            continue
        if b"studio" in cmd and str(run).encode() in cmd and b"preflab.cli.main" in cmd:
            return int(entry.name)
    return None


def train_cmd(run: Path, port: int) -> list[str]:
    return [
        sys.executable,
        "-m",
        "preflab.cli.main",
        "train",
        "--studio",
        "--studio-port",
        str(port),
        "--run-dir",
        str(run),
        "--total-steps",
        "2000",
        "--wait-for-labels-s",
        "600",
    ]


# ----- a busy port ------------------------------------------------------------------------------
def test_port_clash_fails_before_training_with_one_line(tmp_path: Path) -> None:
    with socket.socket() as busy:
        busy.bind(("127.0.0.1", 0))
        busy.listen()
        port = busy.getsockname()[1]
        run = tmp_path / "run"
        r = warm_python.run(  # a real process, forked warm (tests/warm_python.py)
            train_cmd(run, port),
            capture_output=True,
            text=True,
            env=e2e_env(),
            timeout=300,
            cwd=tmp_path,
        )
    assert r.returncode == 1, r.stderr[-2000:]
    err = r.stderr.strip()
    assert "\n" not in err and "Traceback" not in err, err
    assert f"port {port}" in err and "--studio-port" in err, err
    assert not run.exists()  # nothing was trained or written
    assert not (tmp_path / "runs").exists()


def test_the_trainer_never_talks_to_another_runs_studio(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    # both studios forked warm (tests/warm_python.py): the instance check that tells them
    # apart is start_studio_process's own, in this process
    monkeypatch.setattr(launch, "subprocess", WarmSubprocess())
    runs = []
    for name in ("old", "new"):
        run = tmp_path / name
        run.mkdir()
        FeedbackStore(run / "feedback.db", array_dir=run / "segments").close()
        runs.append(run)
    port = free_port()
    old = start_studio_process(runs[0], "127.0.0.1", port, extra_args=("--no-media",))
    try:
        with pytest.raises(SourceError, match="another studio") as info:
            start_studio_process(runs[1], "127.0.0.1", port, extra_args=("--no-media",))
        assert "--studio-port" in str(info.value)
        assert old.poll() is None  # the old run's studio is left alone
    finally:
        stop_studio_process(old)
    assert port_free(port)


# ----- the trainer's end stops the studio and its workers ---------------------------------------
@pytest.fixture
def trainer(tmp_path: Path) -> Iterator[tuple[subprocess.Popen, Path, int]]:
    run = tmp_path / "run"
    port = free_port()
    log = (tmp_path / "trainer.log").open("wb")
    proc = warm_python.popen(  # a real process, forked warm (tests/warm_python.py)
        train_cmd(run, port), stdout=log, stderr=subprocess.STDOUT, env=e2e_env(), cwd=tmp_path
    )
    try:
        yield proc, run, port
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait(timeout=30)
        log.close()
        pid = studio_pid(run)
        if pid is not None:  # never leave a studio behind, whatever the test found
            os.killpg(pid, signal.SIGKILL)


def _studio_up(proc: subprocess.Popen, run: Path, port: int, tmp: Path) -> list[int]:
    def up() -> bool:
        if proc.poll() is not None:
            raise AssertionError((tmp / "trainer.log").read_text()[-3000:])
        try:
            r = httpx.get(f"http://127.0.0.1:{port}/api/instance", trust_env=False, timeout=2)
        except httpx.HTTPError:
            return False
        return r.status_code == 200 and (run / "studio.log").exists()

    wait_until(up, 300, "the trainer's studio to answer")

    def beating() -> bool:  # the trainer is past starting its studio (its handlers are set)
        store = FeedbackStore(run / "feedback.db", array_dir=run / "segments")
        try:
            return store.settings.get(HEARTBEAT_KEY) is not None
        finally:
            store.close()

    wait_until(beating, 120, "the trainer's heartbeat")
    pid = studio_pid(run)
    assert pid is not None
    procs = group_of(pid)
    assert pid in procs
    return procs


def test_sigterm_of_the_trainer_stops_the_studio_and_its_workers(
    trainer: tuple[subprocess.Popen, Path, int], tmp_path: Path
) -> None:
    proc, run, port = trainer
    procs = _studio_up(proc, run, port, tmp_path)
    proc.send_signal(signal.SIGTERM)
    proc.wait(timeout=120)
    wait_until(lambda: port_free(port), 60, f"port {port} to be free")
    wait_until(lambda: not group_of(procs[0]), 60, "the studio's processes to end")
    assert studio_pid(run) is None
    # the trainer said it stopped (pages show "trainer stopped" at once)
    store = FeedbackStore(run / "feedback.db", array_dir=run / "segments")
    assert store.settings.get(HEARTBEAT_KEY)["state"] == "stopped"
    store.close()
    # studio.log: the owner's eyes only, and no token in it
    log = run / "studio.log"
    assert stat.S_IMODE(log.stat().st_mode) == 0o600
    token = (run / OWNER_TOKEN_FILE).read_text().strip()
    assert token and token not in log.read_text()
    assert "#token=***" in log.read_text()


def test_sigkill_of_the_trainer_stops_the_studio_by_itself(
    trainer: tuple[subprocess.Popen, Path, int], tmp_path: Path
) -> None:
    proc, run, port = trainer
    procs = _studio_up(proc, run, port, tmp_path)
    proc.kill()  # no handler runs: the studio notices its parent is gone
    proc.wait(timeout=30)
    wait_until(lambda: port_free(port), 90, f"port {port} to be free")
    wait_until(lambda: not group_of(procs[0]), 90, "the studio's processes to end")


# ----- check_port_free ----------------------------------------------------------------------------
def test_check_port_free_names_the_port_and_the_flag() -> None:
    with socket.socket() as busy:
        busy.bind(("127.0.0.1", 0))
        busy.listen()
        port = busy.getsockname()[1]
        with pytest.raises(ConfigError) as info:
            check_port_free("127.0.0.1", port)
    msg = str(info.value)
    assert "\n" not in msg and f"port {port}" in msg and "--studio-port" in msg
    check_port_free("127.0.0.1", port)  # closed again: free
    with pytest.raises(ConfigError, match="--studio-port"):
        check_port_free("127.0.0.1", 70000)


def test_seeded_studio_serves_instance_and_liveness(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """GET /api/instance is public; /api/liveness needs a token and reads the heartbeat."""
    from preflab.studio.heartbeat import TrainerHeartbeat

    # the studio forked warm (tests/warm_python.py); tests/studio/test_api_cli.py starts a
    # fresh one with start_studio_process
    monkeypatch.setattr(launch, "subprocess", WarmSubprocess())

    run = tmp_path / "run"
    run.mkdir()
    store = FeedbackStore(run / "feedback.db", array_dir=run / "segments")
    tokens = seed_run(store)
    port = free_port()
    studio = start_studio_process(run, "127.0.0.1", port, extra_args=("--no-media",))
    try:
        with httpx.Client(base_url=f"http://127.0.0.1:{port}", trust_env=False) as c:
            assert len(c.get("/api/instance").json()["instance"]) == 32
            assert c.get("/api/liveness").status_code == 401
            auth = {"Authorization": f"Bearer {tokens['alice']}"}
            assert c.get("/api/liveness", headers=auth).json()["trainer"] == "unknown"
            beat = TrainerHeartbeat(store, every_s=0.2).start()
            assert c.get("/api/liveness", headers=auth).json()["trainer"] == "running"
            beat.stop()
            seen = c.get("/api/liveness", headers=auth).json()
            assert seen["trainer"] == "stopped" and seen["finished"] is False
    finally:
        stop_studio_process(studio)
        store.close()
