"""The page says when a side is gone (issue #25), in Debian's Chromium (Playwright): a real
trainer process beats its heartbeat into the store, the real studio process serves the page;
when the trainer is killed the page shows "Trainer stopped", when the studio is stopped it shows
"Studio unreachable". Screenshots (1280x800 and 1920x1080) go to PREFLAB_SHOTS_DIR when set."""

from __future__ import annotations

import os
import subprocess
import sys
import textwrap
from collections.abc import Iterator
from pathlib import Path

import pytest
from playwright import sync_api as playwright_sync

from preflab.store import FeedbackStore
from preflab.studio import launch
from preflab.studio.launch import start_studio_process, stop_studio_process
from preflab.testing.browser import launch_chromium
from tests import warm_python
from tests.studio.api_server import free_port, seed_run
from tests.studio.e2e_support import WarmSubprocess

REPO = Path(__file__).resolve().parents[2]
STATIC = REPO / "src" / "preflab" / "studio" / "static" / "index.html"
SIZES = {"": (1280, 800), "-1920": (1920, 1080)}
expect = playwright_sync.expect

assert STATIC.exists(), "the studio bundle is not built: run bash scripts/build_studio.sh"

TRAINER = textwrap.dedent(
    """
    import sys, time
    from pathlib import Path
    from preflab.store import FeedbackStore
    from preflab.studio.heartbeat import start_trainer_heartbeat

    run = Path(sys.argv[1])
    store = FeedbackStore(run / "feedback.db", array_dir=run / "segments")
    store.rounds.publish(
        2, env_id="Pendulum-v1", env_steps=1200, total_steps=4000, metrics={"n_labels": 14}
    )
    start_trainer_heartbeat(store, every_s=1.0)
    print("beating", flush=True)
    time.sleep(3600)
    """
)


@pytest.fixture
def shots(tmp_path: Path) -> Path:
    out = Path(os.environ.get("PREFLAB_SHOTS_DIR") or tmp_path / "shots")
    out.mkdir(parents=True, exist_ok=True)
    return out


@pytest.fixture
def browser() -> Iterator[object]:
    pw = playwright_sync.sync_playwright().start()
    b = launch_chromium(pw)
    try:
        yield b
    finally:
        b.close()
        pw.stop()


def _take(page: object, shots: Path, name: str) -> None:
    for suffix, (w, h) in SIZES.items():
        page.set_viewport_size({"width": w, "height": h})  # type: ignore[attr-defined]
        page.wait_for_timeout(300)  # type: ignore[attr-defined]  # let layout settle
        page.screenshot(path=str(shots / f"{name}{suffix}.png"))  # type: ignore[attr-defined]


def test_page_says_trainer_stopped_then_studio_unreachable(
    tmp_path: Path, browser: object, shots: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    # the trainer and start_studio_process's studio: real processes, forked from the warm
    # interpreter of tests/warm_python.py (each fresh one spent ~1-1.5 s of CPU importing)
    monkeypatch.setattr(launch, "subprocess", WarmSubprocess())
    run = tmp_path / "run"
    run.mkdir()
    store = FeedbackStore(run / "feedback.db", array_dir=run / "segments")
    tokens = seed_run(store)
    store.close()
    env = dict(os.environ)
    env["PYTHONPATH"] = os.pathsep.join(p for p in (str(REPO / "src"), env.get("PYTHONPATH")) if p)
    (tmp_path / "trainer.py").write_text(TRAINER)
    trainer = warm_python.popen(
        [sys.executable, "-c", TRAINER, str(run)],
        stdout=subprocess.PIPE,
        env=env,
    )
    port = free_port()
    studio = None
    try:
        assert trainer.stdout is not None and trainer.stdout.readline().strip() == b"beating"
        studio = start_studio_process(run, "127.0.0.1", port, extra_args=("--no-media",))
        ctx = browser.new_context(viewport={"width": 1280, "height": 800})  # type: ignore[attr-defined]
        page = ctx.new_page()
        page.set_default_timeout(30_000)
        page.goto(f"http://127.0.0.1:{port}/#token={tokens['owner']}")
        expect(page.get_by_test_id("me")).to_have_text("owner")
        banner = page.get_by_test_id("lifecycle-banner")
        trainer_cell = page.get_by_test_id("progress").locator("[data-state]").last
        expect(trainer_cell).to_contain_text("running")
        page.wait_for_timeout(2500)  # two liveness polls of a live trainer (not an assertion)
        expect(banner).to_be_hidden()

        trainer.kill()  # no goodbye: the heartbeat goes stale
        trainer.wait(timeout=30)
        expect(banner).to_be_visible(timeout=30_000)
        expect(banner).to_contain_text("Trainer stopped")
        expect(banner).to_have_attribute("data-state", "stopped")
        expect(trainer_cell).to_have_text("stopped")
        _take(page, shots, "trainer-stopped")

        stop_studio_process(studio)
        expect(banner).to_contain_text("Studio unreachable", timeout=30_000)
        expect(banner).to_have_attribute("data-state", "unreachable")
        expect(trainer_cell).to_have_text("studio unreachable")
        _take(page, shots, "studio-unreachable")
        ctx.close()  # type: ignore[attr-defined]
    finally:
        if trainer.poll() is None:
            trainer.kill()
            trainer.wait(timeout=30)
        if studio is not None:
            stop_studio_process(studio)
