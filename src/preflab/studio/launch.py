"""Start the studio in its own process (``preflab train --studio`` uses this), make sure it is
*this* run's studio that answers, and stop it (with its render workers) with the trainer."""

from __future__ import annotations

import atexit
import contextlib
import json
import logging
import os
import secrets
import signal
import socket
import subprocess
import sys
import threading
import time
import urllib.error
import urllib.request
from pathlib import Path
from types import FrameType
from typing import Any

import preflab
from preflab.config.ports import check_port
from preflab.errors import ConfigError, SourceError

log = logging.getLogger(__name__)
ENV_INSTANCE = "PREFLAB_STUDIO_INSTANCE"
"""Environment variable carrying the studio's random instance id (GET /api/instance)."""
ENV_PARENT_PID = "PREFLAB_STUDIO_PARENT_PID"
"""Environment variable naming the process the studio must not outlive (the trainer)."""


def _shown(host: str) -> str:
    return f"[{host}]" if ":" in host else host


def check_port_free(
    host: str, port: int, *, port_flag: str = "--studio-port", host_flag: str = "--studio-host"
) -> None:
    """Raise ConfigError (a one-line message naming the port and ``port_flag``, the option that
    sets it) when the studio could not listen on ``host:port``: call it before a run starts."""
    check_port(port, flag=port_flag)
    try:
        infos = socket.getaddrinfo(host, port, type=socket.SOCK_STREAM)
    except socket.gaierror as exc:
        raise ConfigError(f"cannot resolve {host_flag} {host!r} ({exc.strerror})") from exc
    family, _t, _p, _c, addr = infos[0]
    with socket.socket(family, socket.SOCK_STREAM) as s:
        s.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        try:
            s.bind(addr)
        except OSError as exc:
            raise ConfigError(
                f"the studio port {port} on {host} is in use ({exc.strerror}; another studio or "
                f"program listens there): stop it, or pick a free port with {port_flag} PORT"
            ) from exc


def _open_log(path: Path) -> int:
    """RUN_DIR/studio.log for appending, readable by its owner only (mode 600)."""
    fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_APPEND, 0o600)
    os.fchmod(fd, 0o600)
    return fd


def _instance_on(url: str, opener: urllib.request.OpenerDirector) -> str | None:
    """The instance id the studio at ``url`` reports; "" when something else answers there,
    None when nothing answers (yet)."""
    try:
        with opener.open(url, timeout=2) as r:
            body = json.loads(r.read(4096) or b"{}")
    except urllib.error.HTTPError:
        return ""  # an older studio (no /api/instance) or another program
    except (urllib.error.URLError, OSError):
        return None
    except ValueError:
        return ""
    return str(body.get("instance", "")) if isinstance(body, dict) else ""


def start_studio_process(
    run_dir: str | Path,
    host: str = "127.0.0.1",
    port: int = 8765,
    *,
    store_url: str | None = None,
    timeout_s: float = 60.0,
    extra_args: tuple[str, ...] = (),
    exit_with_us: bool = True,
) -> subprocess.Popen:
    """Spawn ``python -m preflab.cli.main studio RUN_DIR`` and return once the studio on
    ``host:port`` answers GET /api/instance with the random id this call gave it: the studio
    serving *this* run, not another run's studio left on the same port.

    The studio runs in its own process group (so :func:`stop_studio_process` stops its render
    workers too) and, with ``exit_with_us``, stops by itself when this process is gone. Its
    output goes to RUN_DIR/studio.log (mode 600, tokens masked). Raises SourceError (and stops
    the process) when it exits or does not answer within ``timeout_s``."""
    run = Path(run_dir)
    cmd = [sys.executable, "-m", "preflab.cli.main", "studio", str(run)]
    cmd += ["--host", host, "--port", str(port), *extra_args]
    if store_url:
        cmd += ["--store-url", store_url]
    env = dict(os.environ)
    src = str(Path(preflab.__file__).resolve().parents[1])
    env["PYTHONPATH"] = os.pathsep.join(p for p in (src, env.get("PYTHONPATH")) if p)
    instance = secrets.token_hex(16)
    env[ENV_INSTANCE] = instance
    if exit_with_us:
        env[ENV_PARENT_PID] = str(os.getpid())
    else:
        env.pop(ENV_PARENT_PID, None)
    log_path = run / "studio.log"
    fd = _open_log(log_path)
    try:
        proc = subprocess.Popen(
            cmd, stdout=fd, stderr=subprocess.STDOUT, env=env, start_new_session=True
        )
    finally:
        os.close(fd)
    url = f"http://{_shown(host)}:{port}/api/instance"
    opener = urllib.request.build_opener(urllib.request.ProxyHandler({}))  # loopback: no proxy
    deadline = time.monotonic() + timeout_s
    other = False  # something else answered on the port
    while time.monotonic() < deadline:
        if proc.poll() is not None:
            if other:
                raise SourceError(
                    f"another studio (not this run's) answers on {_shown(host)}:{port} and this "
                    f"run's studio could not start there; stop the other one or pick a free "
                    f"port with --studio-port PORT (see {log_path})"
                )
            raise SourceError(
                f"the studio exited with code {proc.returncode} before answering; "
                f"see {log_path}: {_tail(log_path)}"
            )
        seen = _instance_on(url, opener)
        if seen == instance:
            return proc
        other = other or seen is not None
        time.sleep(0.1)
    stop_studio_process(proc)
    why = "another studio (not this run's) answers there" if other else "nothing answered"
    raise SourceError(
        f"this run's studio did not answer on {url} within {timeout_s:.0f} s ({why}); "
        f"see {log_path}"
    )


def stop_studio_process(proc: subprocess.Popen, timeout_s: float = 20.0) -> None:
    """Stop the studio (SIGTERM: it stops its render workers), SIGKILL its whole process group
    after ``timeout_s``, and SIGTERM whatever is left in the group. Idempotent."""
    group = None
    with contextlib.suppress(OSError):
        if os.getpgid(proc.pid) == proc.pid:  # its own group (start_new_session)
            group = proc.pid
    if proc.poll() is None:
        with contextlib.suppress(OSError):
            proc.terminate()
        try:
            proc.wait(timeout=timeout_s)
        except subprocess.TimeoutExpired:
            with contextlib.suppress(OSError):
                if group is not None:
                    os.killpg(group, signal.SIGKILL)
                else:
                    proc.kill()
            proc.wait(timeout=10)
    if group is not None:
        with contextlib.suppress(OSError):
            os.killpg(group, signal.SIGTERM)


def stop_studio_on_signals(proc: subprocess.Popen) -> None:
    """In the trainer: SIGTERM or SIGHUP stop the studio and its workers, then end the trainer
    (SystemExit, so its ``finally`` blocks and the heartbeat's "stopped" run); the studio is
    also stopped when the trainer exits any other way (atexit). Call from the main thread."""
    atexit.register(stop_studio_process, proc)
    if threading.current_thread() is not threading.main_thread():
        return

    def handler(signum: int, _frame: FrameType | None) -> None:
        signal.signal(signum, signal.SIG_DFL)  # a second signal ends the trainer at once
        log.warning(
            "%s: stopping the studio and the trainer; everything already stored is kept",
            signal.Signals(signum).name,
        )
        stop_studio_process(proc)
        raise SystemExit(128 + signum)

    for sig in (signal.SIGTERM, signal.SIGHUP):
        signal.signal(sig, handler)


def exit_with_parent(parent_pid: int, *, every_s: float = 0.5, grace_s: float = 30.0) -> None:
    """In the studio: when ``parent_pid`` (the trainer) is gone, shut down as on SIGTERM
    (uvicorn stops, then the render workers); if that takes longer than ``grace_s``, end the
    process group at once."""

    def watch() -> None:
        while os.getppid() == parent_pid:
            time.sleep(every_s)
        log.warning("the trainer (pid %d) is gone; stopping the studio", parent_pid)
        os.kill(os.getpid(), signal.SIGTERM)
        time.sleep(grace_s)
        with contextlib.suppress(OSError):
            if os.getpgid(0) == os.getpid():
                os.killpg(os.getpid(), signal.SIGKILL)
        os._exit(1)

    threading.Thread(target=watch, name="preflab-studio-parent-watch", daemon=True).start()


def log_config() -> dict[str, Any]:
    """uvicorn's logging configuration with tokens masked in every record."""
    import copy

    from uvicorn.config import LOGGING_CONFIG

    config = copy.deepcopy(LOGGING_CONFIG)
    config.setdefault("filters", {})["mask_tokens"] = {"()": "preflab.studio.auth.TokenMaskFilter"}
    for handler in config.get("handlers", {}).values():
        handler.setdefault("filters", []).append("mask_tokens")
    return config


def _tail(path: Path, n: int = 3) -> str:
    try:
        lines = path.read_text(errors="replace").strip().splitlines()
    except OSError:
        return ""
    return " | ".join(lines[-n:])
