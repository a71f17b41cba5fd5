"""Start the studio in its own process (``preflab train --studio`` uses this)."""

from __future__ import annotations

import os
import subprocess
import sys
import time
import urllib.error
import urllib.request
from pathlib import Path

import preflab
from preflab.errors import SourceError


def start_studio_process(
    run_dir: str | Path,
    host: str = "127.0.0.1",
    port: int = 8765,
    *,
    store_url: str | None = None,
    timeout_s: float = 60.0,
    extra_args: tuple[str, ...] = (),
) -> subprocess.Popen:
    """Spawn ``python -m preflab.cli.main studio RUN_DIR`` and return once /api/health answers.

    Its output goes to RUN_DIR/studio.log (the owner link is printed there too). Raises
    SourceError (and stops the process) when it exits or does not answer within ``timeout_s``.
    """
    run = Path(run_dir)
    cmd = [sys.executable, "-m", "preflab.cli.main", "studio", str(run)]
    cmd += ["--host", host, "--port", str(port), *extra_args]
    if store_url:
        cmd += ["--store-url", store_url]
    env = dict(os.environ)
    src = str(Path(preflab.__file__).resolve().parents[1])
    env["PYTHONPATH"] = os.pathsep.join(p for p in (src, env.get("PYTHONPATH")) if p)
    log_path = run / "studio.log"
    with open(log_path, "ab") as log:
        proc = subprocess.Popen(cmd, stdout=log, stderr=subprocess.STDOUT, env=env)
    shown = f"[{host}]" if ":" in host else host
    url = f"http://{shown}:{port}/api/health"
    opener = urllib.request.build_opener(urllib.request.ProxyHandler({}))  # loopback: no proxy
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        if proc.poll() is not None:
            raise SourceError(
                f"the studio exited with code {proc.returncode} before answering; "
                f"see {log_path}: {_tail(log_path)}"
            )
        try:
            with opener.open(url, timeout=2) as r:
                if r.status == 200:
                    return proc
        except (urllib.error.URLError, OSError):
            pass
        time.sleep(0.1)
    proc.terminate()
    try:
        proc.wait(timeout=10)
    except subprocess.TimeoutExpired:
        proc.kill()
    raise SourceError(
        f"the studio did not answer on {url} within {timeout_s:.0f} s; see {log_path}"
    )


def _tail(path: Path, n: int = 3) -> str:
    try:
        lines = path.read_text(errors="replace").strip().splitlines()
    except OSError:
        return ""
    return " | ".join(lines[-n:])
