"""The clip player through the real UI (issue #25, "clips that tell the truth").

A real studio process renders two recorded Hopper-v5 segments (real MuJoCo, real ffmpeg) for a
pair query; Debian's Chromium (Playwright) opens the Compare view as a person would and:
sees the caption say real time at Hopper's own step rate, waits until both clips played once
(the tiles' "clip-played" event), pauses with K, steps one env step forward and back with . and
",", scrubs with the mouse, switches to 0.5× slow motion and back with the buttons and keys, and
sees the caption, the step counter and the video's position and rate follow.

Screenshots of the Compare view go to a temporary folder (and to ``PREFLAB_SHOTS_DIR`` when set).
"""

from __future__ import annotations

import os
import shutil
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import gymnasium as gym
import numpy as np
import pytest
from playwright import sync_api as playwright_sync

from preflab.envs import make_vec_env
from preflab.policy.reward_wrapper import SegmentRecorder
from preflab.records import Annotator, Query, Segment
from preflab.store import FeedbackStore

from .e2e_support import studio_browser, wait_until
from .test_e2e import STATIC

assert STATIC.exists(), "the studio bundle is not built: run bash scripts/build_studio.sh"

REPO = Path(__file__).resolve().parents[2]
SRC = REPO / "src"
T = 25
ENV_ID = "Hopper-v5"
TOKEN = "tok-paula-" + "p" * 24
expect = playwright_sync.expect


def _segments(n: int) -> list[Segment]:
    venv = make_vec_env(ENV_ID, 1, seed=5)
    rec = SegmentRecorder(venv, T, env_id=ENV_ID)
    rec.reset()
    rng = np.random.default_rng(5)
    space = venv.action_space
    while len(rec._done) < n:
        rec.step(rng.uniform(space.low, space.high, (1, *space.shape)).astype(np.float32))
    return rec.pop_segments()[:n]


@pytest.fixture(scope="module")
def studio(tmp_path_factory: pytest.TempPathFactory) -> Iterator[dict[str, Any]]:
    tmp = tmp_path_factory.mktemp("player-e2e")
    run = tmp / "run"
    run.mkdir()
    store = FeedbackStore(run / "feedback.db", array_dir=run / "segments")
    a, b = _segments(2)
    store.segments.add([a, b])
    store.queries.add([Query(id="q-player", kind="pair", a=(a.id,), b=(b.id,), round=0)])
    store.annotators.add(
        Annotator(id="h-paula", source="human", name="paula", meta={"role": "annotator"}),
        token=TOKEN,
    )
    try:
        with studio_browser(run, tmp / "studio.log") as (base, browser):
            yield {"base": base, "browser": browser, "tmp": tmp, "store": store}
    finally:
        store.close()


def _steps_per_s() -> float:
    env = gym.make(ENV_ID)
    try:
        return float(env.unwrapped.metadata["render_fps"])
    finally:
        env.close()


def _step_of(page: Any) -> int:
    text = page.get_by_test_id("player-step").first.text_content()
    k, n = text.removeprefix("step ").split(" / ")
    assert int(n) == T
    return int(k)


def _video(page: Any, prop: str) -> Any:
    return page.evaluate(f"document.querySelector('[data-testid=video-left]').{prop}")


def _until(page: Any, js: str, what: str, timeout: float = 30.0) -> None:
    """Poll a JS expression (wait_for_function would eval a string, which the CSP forbids)."""
    wait_until(lambda: page.evaluate(js), timeout, what, every=0.1)


def _shots(page: Any, tmp: Path, name: str) -> None:
    out = os.environ.get("PREFLAB_SHOTS_DIR")
    for w, h in ((1280, 800), (1920, 1080)):
        page.set_viewport_size({"width": w, "height": h})
        page.wait_for_timeout(400)  # layout settles (not an assertion)
        path = tmp / f"{name}-{w}x{h}.png"
        page.screenshot(path=str(path))
        if out:
            Path(out).mkdir(parents=True, exist_ok=True)
            shutil.copy(path, Path(out) / path.name)
    page.set_viewport_size({"width": 1280, "height": 800})


def test_person_pauses_steps_scrubs_and_slows_a_clip(studio: dict[str, Any]) -> None:
    ctx = studio["browser"].new_context(viewport={"width": 1280, "height": 800})
    page = ctx.new_page()
    page.set_default_timeout(120_000)  # the first clips render while the page waits
    errors: list[str] = []
    page.on("pageerror", lambda exc: errors.append(str(exc)))
    page.add_init_script(
        "window.__played = [];"
        "document.addEventListener('clip-played', e => window.__played.push("
        "e.target.dataset.side));"
    )
    page.goto(f"{studio['base']}/#token={TOKEN}")
    expect(page.get_by_test_id("me")).to_have_text("paula")
    left, right = page.get_by_test_id("player-left"), page.get_by_test_id("player-right")
    # the first clips render while the page waits (expect's own limit is 5 s, not the page's)
    expect(left).to_have_class("clip-player clip-loaded", timeout=120_000)
    expect(right).to_have_class("clip-player clip-loaded", timeout=120_000)

    # the caption tells the truth: Hopper's own step rate, 25 steps = 25 / rate seconds
    rate = _steps_per_s()
    caption = page.get_by_test_id("player-caption").first
    seconds = T / rate
    expect(caption).to_have_text(
        f"real time · {rate:g} steps/s · {T} steps = {seconds:.2f} s", timeout=10_000
    )
    assert _video(page, "playbackRate") == pytest.approx(1.0)
    # the encoded clip is the steps plus a still at both ends, at one frame per step
    duration = _video(page, "duration")
    assert duration > seconds and abs(duration - (seconds + 2 * 0.3)) < 2.5 / rate

    # both clips play once to their end (the event the pairwise view can wait for)
    _until(page, "window.__played.length >= 2", "both clips to play once")
    assert sorted(page.evaluate("window.__played")) == ["left", "right"]
    page.wait_for_timeout(600)  # a person watches a little longer (pacing, not an assertion)

    # K pauses both clips at once. K toggles: pressed in the instant between two laps, when
    # neither clip plays, it starts them, and a person presses it again (the key's handler
    # runs before press() returns, so the state is read after it)
    all_paused = "[...document.querySelectorAll('video')].every(v => v.paused || v.ended)"
    for _ in range(3):
        page.keyboard.press("k")
        if page.evaluate(all_paused):
            break
    _until(page, all_paused, "both clips to pause")
    expect(left).to_have_class("clip-player clip-loaded clip-paused")
    page.wait_for_timeout(400)

    # one step forward with '.', one back with ','; the counter and the video follow
    page.keyboard.press(",")
    page.wait_for_timeout(300)
    k0 = _step_of(page)
    page.keyboard.press(".")
    expect(page.get_by_test_id("player-step").first).to_have_text(f"step {k0 + 1} / {T}")
    frame = _video(page, "currentTime") * rate
    assert int(frame) - 38 == k0  # still frames first (0.3 s × 125), then step k0 (0-based)
    page.wait_for_timeout(300)
    page.get_by_test_id("player-back").first.click()
    expect(page.get_by_test_id("player-step").first).to_have_text(f"step {k0} / {T}")
    # both clips show the same step; mid-clip there is no start/end mark
    expect(page.get_by_test_id("player-step").nth(1)).to_have_text(f"step {k0} / {T}")
    if 1 < k0 < T:
        expect(page.get_by_test_id("clip-phase").first).to_be_hidden()
    _shots(page, studio["tmp"], "compare-player-paused")

    # scrub: a click a fifth of the way along the bar, or four fifths when the clip was paused
    # in the first half (where it paused depends on when K was pressed)
    frac = 0.2 if k0 > T // 2 else 0.8
    box = page.get_by_test_id("player-scrub").first.bounding_box()
    page.mouse.click(box["x"] + box["width"] * frac, box["y"] + box["height"] / 2)
    page.wait_for_timeout(300)
    k1 = _step_of(page)
    assert frac * T - 2 <= k1 <= frac * T + 4 and k1 != k0, (frac, k0, k1)
    assert page.evaluate("document.activeElement.tagName") != "INPUT"  # arrows still answer
    assert abs(_video(page, "currentTime") * rate - (38 + k1 - 0.5)) < 1.0

    # 0.5× slow motion: the caption and the playback rate change, for both clips
    page.get_by_test_id("player-speed-0.5").first.click()
    expect(caption).to_have_text(
        f"0.5× slow motion · {rate:g} steps/s · {T} steps = {seconds:.2f} s "
        f"(plays in {2 * seconds:.2f} s)"
    )
    assert _video(page, "playbackRate") == pytest.approx(0.5)
    assert page.evaluate(
        "document.querySelector('[data-testid=video-right]').playbackRate"
    ) == pytest.approx(0.5)
    page.keyboard.press("k")  # play on in slow motion
    _until(page, "!document.querySelector('[data-testid=video-left]').paused", "playing again")
    page.wait_for_timeout(500)
    _shots(page, studio["tmp"], "compare-player-slow")
    page.keyboard.press("<")
    expect(caption).to_contain_text("0.25× slow motion")
    page.keyboard.press(">")
    page.keyboard.press(">")
    expect(caption).to_have_text(f"real time · {rate:g} steps/s · {T} steps = {seconds:.2f} s")
    assert _video(page, "playbackRate") == pytest.approx(1.0)
    expect(page.get_by_test_id("player-keys")).to_have_count(1)
    _shots(page, studio["tmp"], "compare-player")
    # the answer keys still answer (the player took none of them)
    page.keyboard.press("ArrowLeft")
    wait_until(
        lambda: any(True for _ in studio["store"].answers.judgements(include_retracted=True)),
        30,
        "the answer to be stored",
    )
    assert not errors, errors
    ctx.close()
