"""What the studio's browser tests share: wait for a started studio process to answer, open
Chromium on it, and take everything down again."""

from __future__ import annotations

import contextlib
import signal
import subprocess
import urllib.request
from collections.abc import Iterator
from pathlib import Path
from typing import Any

from playwright import sync_api as playwright_sync

from preflab.testing.browser import launch_chromium

from .test_e2e import wait_until


@contextlib.contextmanager
def studio_browser(server: subprocess.Popen, base: str, log_path: Path) -> Iterator[Any]:
    """Chromium on the studio ``server`` (a started process serving ``base``) once it answers;
    the browser closes and the server gets SIGTERM (then SIGKILL) on the way out."""

    def up() -> bool:
        if server.poll() is not None:
            raise AssertionError(f"the studio exited: {log_path.read_text()[-2000:]}")
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
        yield browser
    finally:
        if browser is not None:
            browser.close()
        pw.stop()
        server.send_signal(signal.SIGTERM)
        try:
            server.wait(timeout=15)
        except subprocess.TimeoutExpired:
            server.kill()
