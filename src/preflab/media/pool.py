"""A priority pool of render worker processes.

Jobs wait in one heap ordered by (priority, arrival); lower priority numbers run sooner. Each
of N slots is a thread in this process that owns one worker process
(``python -m preflab.media.worker``, MuJoCo with its own EGL context) and feeds it one job at a
time over a pipe (JSON lines; no pickle), so the heap decides the order right up to the moment
a worker becomes free. Re-submitting a waiting job with a smaller priority number moves it
forward. A worker that dies or exceeds the time limit is killed and restarted; its job is
reported as failed. Workers are started eagerly, so the first job does not pay for the imports.
"""

from __future__ import annotations

import contextlib
import heapq
import itertools
import json
import logging
import os
import subprocess
import sys
import threading
from collections.abc import Callable, Mapping
from pathlib import Path
from typing import IO, Any

log = logging.getLogger("preflab.media")

DoneFn = Callable[[str, dict[str, Any]], None]
"""on_done(job key, result dict) — called from a pool thread."""


class WorkerPool:
    """N worker processes fed from one priority heap."""

    def __init__(
        self,
        n_workers: int,
        *,
        on_done: DoneFn,
        log_dir: str | Path,
        timeout_s: float = 300.0,
        env: Mapping[str, str] | None = None,
    ) -> None:
        if n_workers < 1:
            raise ValueError(f"n_workers must be ≥ 1, got {n_workers}")
        self.n_workers = n_workers
        self.on_done = on_done
        self.log_dir = Path(log_dir)
        self.log_dir.mkdir(parents=True, exist_ok=True)
        self.timeout_s = timeout_s
        self._env = _worker_env(env, n_workers)
        self._cond = threading.Condition()
        self._heap: list[tuple[int, int, str]] = []
        self._waiting: dict[str, tuple[int, int, dict[str, Any]]] = {}  # key -> (prio, seq, job)
        self._running: set[str] = set()
        self._seq = itertools.count()
        self._closing = False
        self._procs: list[subprocess.Popen[bytes] | None] = [None] * n_workers
        self.started = 0  # worker processes started so far (restarts included)
        self._threads = [
            threading.Thread(target=self._slot, args=(i,), name=f"preflab-media-{i}", daemon=True)
            for i in range(n_workers)
        ]
        for t in self._threads:
            t.start()

    # ----- queue ------------------------------------------------------------------------------
    def submit(self, key: str, priority: int, job: dict[str, Any] | None) -> bool:
        """Queue ``job`` under ``key``; a waiting job with this key only moves forward
        (``job=None``: only move forward). Returns True when a new job was queued."""
        with self._cond:
            if self._closing:
                raise RuntimeError("the media worker pool is closed")
            if key in self._running:
                return False
            old = self._waiting.get(key)
            if (old is not None and old[0] <= priority) or (old is None and job is None):
                return False
            seq = next(self._seq) if old is None else old[1]
            queued = old[2] if old is not None else job
            assert queued is not None
            self._waiting[key] = (priority, seq, queued)
            heapq.heappush(self._heap, (priority, seq, key))
            self._cond.notify()
            return old is None

    def _pop(self) -> tuple[str, dict[str, Any]] | None:
        """Next job (blocks); None when closing."""
        with self._cond:
            while True:
                if self._closing:
                    return None
                while self._heap:
                    prio, seq, key = heapq.heappop(self._heap)
                    cur = self._waiting.get(key)
                    if cur is not None and cur[0] == prio and cur[1] == seq:
                        del self._waiting[key]
                        self._running.add(key)
                        return key, cur[2]
                self._cond.wait()

    def waiting(self) -> int:
        """Jobs not yet started."""
        with self._cond:
            return len(self._waiting)

    def busy(self) -> int:
        """Jobs waiting or running."""
        with self._cond:
            return len(self._waiting) + len(self._running)

    # ----- workers ----------------------------------------------------------------------------
    def _spawn(self, slot: int) -> subprocess.Popen[bytes]:
        logf = open(self.log_dir / f"worker-{slot}.log", "ab")  # noqa: SIM115 (owned by child)
        try:
            proc = subprocess.Popen(
                [sys.executable, "-u", "-m", "preflab.media.worker"],
                stdin=subprocess.PIPE,
                stdout=subprocess.PIPE,
                stderr=logf,
                env=self._env,
                close_fds=True,
            )
        finally:
            logf.close()
        self.started += 1
        assert proc.stdout is not None
        hello = _read_line(proc, proc.stdout, self.timeout_s)
        if not hello.get("ready"):
            proc.kill()
            raise RuntimeError(f"render worker did not start: {hello}")
        return proc

    def _slot(self, slot: int) -> None:
        proc: subprocess.Popen[bytes] | None = None
        try:
            proc = self._spawn(slot)
        except Exception as exc:
            log.error("render worker %d failed to start: %s", slot, exc)
        self._procs[slot] = proc
        while True:
            item = self._pop()
            if item is None:
                break
            key, job = item
            try:
                if proc is None or proc.poll() is not None:
                    proc = self._procs[slot] = self._spawn(slot)
                res = self._call(proc, job)
            except Exception as exc:
                log_path = self.log_dir / f"worker-{slot}.log"
                res = {"job": key, "status": "failed", "error": f"{exc} (log: {log_path})"}
                log.warning("render worker %d lost job %s: %s; restarting it", slot, key, exc)
                if proc is not None:
                    with contextlib.suppress(OSError):
                        proc.kill()
                    proc.wait()
                proc = self._procs[slot] = None
            with self._cond:
                self._running.discard(key)
            try:
                self.on_done(key, res)
            except Exception:
                log.exception("media pool callback failed for %s", key)
        if proc is not None:
            _stop(proc)

    def _call(self, proc: subprocess.Popen[bytes], job: dict[str, Any]) -> dict[str, Any]:
        assert proc.stdin is not None and proc.stdout is not None
        proc.stdin.write((json.dumps(job) + "\n").encode())
        proc.stdin.flush()
        return _read_line(proc, proc.stdout, self.timeout_s)

    def close(self, timeout: float = 10.0) -> None:
        """Stop taking jobs, let running ones finish (up to ``timeout``), stop the workers."""
        with self._cond:
            self._closing = True
            self._waiting.clear()
            self._heap.clear()
            self._cond.notify_all()
        for t in self._threads:
            t.join(timeout)
        for p in self._procs:
            if p is not None and p.poll() is None:
                _stop(p)


def _read_line(
    proc: subprocess.Popen[bytes], stream: IO[bytes], timeout_s: float
) -> dict[str, Any]:
    """One JSON line from the worker; kills it after ``timeout_s`` (then the read ends)."""
    timer = threading.Timer(timeout_s, proc.kill)
    timer.daemon = True
    timer.start()
    try:
        line = stream.readline()
    finally:
        timer.cancel()
    if not line:
        code = proc.wait()
        why = f"timed out after {timeout_s:.0f} s" if code == -9 else f"exited with code {code}"
        raise RuntimeError(f"render worker {why}")
    out = json.loads(line)
    if not isinstance(out, dict):
        raise RuntimeError(f"render worker sent {line[:200]!r}")
    return out


def _stop(proc: subprocess.Popen[bytes]) -> None:
    with contextlib.suppress(OSError):
        if proc.stdin is not None:
            proc.stdin.close()
    try:
        proc.wait(timeout=5)
    except subprocess.TimeoutExpired:
        proc.kill()
        proc.wait()


def _worker_env(extra: Mapping[str, str] | None, n_workers: int) -> dict[str, str]:
    """This process's environment, with this preflab importable, headless rendering, and each
    worker's software GL (Mesa llvmpipe, when there is no GPU) held to its share of the cores."""
    env = dict(os.environ)
    src = str(Path(__file__).resolve().parents[2])  # the folder that holds preflab/
    parts = [p for p in env.get("PYTHONPATH", "").split(os.pathsep) if p]
    if src not in parts:
        parts.insert(0, src)
    env["PYTHONPATH"] = os.pathsep.join(parts)
    env.setdefault("MUJOCO_GL", "egl")
    env.setdefault("PYOPENGL_PLATFORM", env["MUJOCO_GL"])
    env.setdefault("SDL_VIDEODRIVER", "dummy")
    env.setdefault("OMP_NUM_THREADS", "1")
    env.setdefault("LP_NUM_THREADS", str(max(1, (os.cpu_count() or 1) // n_workers)))
    env.update(extra or {})
    return env
