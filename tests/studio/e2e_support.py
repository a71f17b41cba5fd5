"""What the studio's browser tests share: the environment of their subprocesses, a trainer script
paced by the store's answers, a started ``preflab studio`` with Chromium on it, and waiting for
something to happen (a limit, never a timing assertion)."""

from __future__ import annotations

import contextlib
import os
import signal
import sqlite3
import subprocess
import sys
import textwrap
import time
import urllib.request
from collections.abc import Callable, Iterator
from multiprocessing import forkserver
from pathlib import Path
from typing import Any

from playwright import sync_api as playwright_sync

from preflab.studio.launch import ENV_PARENT_PID
from preflab.testing.browser import launch_chromium
from tests import warm_python

from .api_server import free_port

SRC = Path(__file__).resolve().parents[2] / "src"


def spinner_watch(view: str, item: str) -> str:
    """A page init script that records in ``window.__spins`` every spinner shown over a clip of
    the ``view`` (e.g. 'compare') with the query id of its ``item`` element (data-testid)."""
    return f"""
window.__spins = [];
const check = () => {{
  const stage = document.querySelector('.view-{view} .stage');
  const s = stage && stage.querySelector('.clip-overlay .spinner');
  if (!s) return;
  const item = stage.querySelector('[data-testid={item}]');
  window.__spins.push({{ q: item ? item.dataset.queryId : null, text: s.parentElement.textContent }});
}};
new MutationObserver(check).observe(document, {{ subtree: true, childList: true }});
setInterval(check, 40);
"""


def wait_until(
    fn: Callable[[], Any],
    timeout: float,
    what: str,
    every: float = 0.2,
    sleep: Callable[[float], object] = time.sleep,
) -> Any:
    """Poll ``fn`` until it returns something truthy (a limit, not a timing assertion),
    waiting ``every`` seconds with ``sleep`` between calls."""
    deadline = time.monotonic() + timeout
    while True:
        value = fn()
        if value:
            return value
        if time.monotonic() > deadline:
            raise AssertionError(f"timed out after {timeout:.0f} s waiting for {what}")
        sleep(every)


def page_wait_until(page: Any, fn: Callable[[], Any], timeout: float, what: str) -> Any:
    """:func:`wait_until` for a condition the page's own event handlers (routes, console
    listeners) make true: it waits with ``page.wait_for_timeout``, which lets Playwright run
    them, where ``time.sleep`` would hold them back."""
    return wait_until(fn, timeout, what, every=0.1, sleep=lambda s: page.wait_for_timeout(s * 1000))


def e2e_env() -> dict[str, str]:
    """The environment of a test's trainer and studio processes: this checkout's sources first,
    headless rendering, one OpenMP thread."""
    env = dict(os.environ)
    env["PYTHONPATH"] = os.pathsep.join(p for p in (str(SRC), env.get("PYTHONPATH")) if p)
    env.setdefault("MUJOCO_GL", "egl")
    env["OMP_NUM_THREADS"] = "1"
    return env


def trainer_script(*, seed: int, total_labels: int, wait_for_labels_s: float) -> str:
    """A short PPO run on Pendulum (random pairs, a round every 128 steps) whose labels come from
    the store the studio writes: ``python script.py RUN_DIR``."""
    return textwrap.dedent(
        f"""
        import sys
        from pathlib import Path
        from preflab.config import TrainConfig
        from preflab.runs import train
        from preflab.sources import StoreSource
        from preflab.store import FeedbackStore

        run = Path(sys.argv[1])
        config = TrainConfig(
            env_id="Pendulum-v1", algo="ppo", seed={seed}, selector="random",
            total_steps=328, initial_steps=200, steps_per_round=128, segment_length=25,
            total_labels={total_labels}, initial_label_frac=0.5, schedule="constant",
            eval_episodes=1, first_fit_epochs=5, wait_for_labels_s={wait_for_labels_s!r},
        )
        store = FeedbackStore(run / "feedback.db", array_dir=run / "segments")
        train(config, run_dir=run, source=StoreSource(store))
        """
    )


def start_trainer(script: str, run_dir: Path, tmp: Path) -> Any:
    """``python -c SCRIPT RUN_DIR`` of :func:`trainer_script`'s ``script`` (kept as
    tmp/trainer.py to read), its output in tmp/trainer.log: a real process, forked from the
    warm interpreter of :mod:`tests.warm_python` (a fresh one spends ~5 s of CPU importing
    torch, Stable-Baselines3 and PrefLab before its first step)."""
    (tmp / "trainer.py").write_text(script)
    with (tmp / "trainer.log").open("wb") as log:
        return warm_python.popen(
            [sys.executable, "-c", script, str(run_dir)],
            stdout=log,
            stderr=subprocess.STDOUT,
            env=e2e_env(),
        )


class WarmSubprocess:
    """:mod:`subprocess` for :mod:`preflab.studio.launch` in a test (``monkeypatch.setattr(
    launch, "subprocess", WarmSubprocess())``): :func:`~preflab.studio.launch.start_studio_process`
    runs its own command (``python -m preflab.cli.main studio RUN_DIR ...``, its environment,
    log and instance check) in a process forked from the warm interpreter of
    :mod:`tests.warm_python` instead of a fresh one (~1.5 s of CPU importing before it serves).
    The fork is not a session leader, so use it where the studio renders nothing (``--no-media``:
    no workers in its process group to stop). Its parent is the forkserver, which ends with the
    test process: the studio watches that pid to stop by itself (``exit_with_us``)."""

    def __getattr__(self, name: str) -> Any:
        return getattr(subprocess, name)

    @staticmethod
    def Popen(  # noqa: N802
        args: list[str], *, env: dict[str, str], start_new_session: bool = False, **kwargs: Any
    ) -> Any:
        assert "--no-media" in args, "a warm studio has no process group for its workers"
        warm_python._context()  # the forkserver is running
        if ENV_PARENT_PID in env:
            server = forkserver._forkserver._forkserver_pid  # type: ignore[attr-defined]
            env = {**env, ENV_PARENT_PID: str(server)}
        return warm_python.popen(args, env=env, **kwargs)


def stop(proc: Any) -> None:
    """End ``proc`` (a :class:`subprocess.Popen` or a warm process; continued first, should a
    test have paused it): SIGTERM, then SIGKILL."""
    if proc.poll() is not None:
        return
    proc.send_signal(signal.SIGCONT)
    proc.terminate()
    try:
        proc.wait(timeout=15)
    except subprocess.TimeoutExpired:
        proc.kill()


def pause_between_writes(proc: Any, db: Path, timeout: float = 60.0) -> None:
    """Stop ``proc`` (SIGSTOP) at a moment it holds no write lock on the SQLite store ``db``.

    A process stopped inside a write transaction keeps SQLite's write lock, so nobody else can
    write until it is continued (the studio could not store an answer). After each stop this
    tries to take the lock (``BEGIN IMMEDIATE``, no waiting); if it is held, ``proc`` goes on
    for a moment and is stopped again, until the lock is free or ``timeout`` (s) passes."""
    deadline = time.monotonic() + timeout
    while True:
        proc.send_signal(signal.SIGSTOP)
        probe = sqlite3.connect(db, timeout=0, isolation_level=None)
        try:
            probe.execute("BEGIN IMMEDIATE")
            probe.execute("ROLLBACK")
            return
        except sqlite3.OperationalError as exc:
            if "locked" not in str(exc) and "busy" not in str(exc):
                proc.send_signal(signal.SIGCONT)
                raise
        finally:
            probe.close()
        proc.send_signal(signal.SIGCONT)
        if time.monotonic() > deadline:
            raise AssertionError(f"{db} stayed write-locked for {timeout:.0f} s")
        time.sleep(0.02)


@contextlib.contextmanager
def studio_browser(run_dir: Path, log_path: Path, *options: str) -> Iterator[tuple[str, Any]]:
    """``preflab studio RUN_DIR [OPTIONS]`` on a free port (output to ``log_path``) and Chromium
    on it once it answers: yields (base URL, browser); the browser closes and the studio stops on
    the way out."""
    port = free_port()
    base = f"http://127.0.0.1:{port}"
    with log_path.open("wb") as log:
        server = warm_python.popen(  # a real process, forked warm (tests/warm_python.py)
            [
                sys.executable,
                "-m",
                "preflab.cli.main",
                "studio",
                str(run_dir),
                "--port",
                str(port),
                *options,
            ],
            stdout=log,
            stderr=subprocess.STDOUT,
            env=e2e_env(),
        )

        def up() -> bool:
            if server.poll() is not None:
                raise AssertionError(
                    f"the studio exited ({server.returncode}): {log_path.read_text()[-2000:]}"
                )
            try:
                with urllib.request.urlopen(base + "/", timeout=2) as r:
                    return bool(r.status == 200)
            except OSError:
                return False

        pw = playwright_sync.sync_playwright().start()
        browser = None
        try:
            wait_until(up, 60, "the studio to answer")
            browser = launch_chromium(pw)
            yield base, browser
        finally:
            if browser is not None:
                browser.close()
            pw.stop()
            stop(server)
