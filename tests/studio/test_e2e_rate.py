"""The Rate view in a real run (issue #25, Pref-GUIDE): episodes the trainer's studio bridge
publishes are rated through the real UI, on the env steps shown.

For Hopper-v5 (MuJoCo, 125 steps per second of real time, no still padding) and ALE/Pong-v5
(the Atari's frames at 60 Hz, 4 frames per agent step: 15 steps per second), an episode is
recorded with PrefLab's own recorder, published with :meth:`StudioBridge.publish_episodes` and
rendered by the real studio process (real MuJoCo / real pixels, real ffmpeg). Debian's Chromium
(Playwright) opens the Rate view as a person would, raises the slider, starts the episode with
Space, lowers the slider half way through and watches it to the end. Then:

- the stored ratings follow the steps on screen: in order, from step 0 to step n − 1 (± 1),
  and the page says "n / n" at the end;
- the values change where the person changed them, at the step shown then;
- the run's aggregator for people (identity + Pref-GUIDE windows) turns them into labels.

Screenshots (1280x800, 1920x1080) go to a temporary folder (and to $PREFLAB_SHOTS_DIR).
"""

from __future__ import annotations

import os
import shutil
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import numpy as np
import pytest
from playwright import sync_api as playwright_sync

from preflab.aggregate import Feedback
from preflab.assemble import make_run_aggregator
from preflab.config import TrainConfig
from preflab.envs import make_vec_env
from preflab.media.timing import timing
from preflab.policy.reward_wrapper import SegmentRecorder
from preflab.records import Annotator, Query, Segment
from preflab.sources.studio_bridge import StudioBridge
from preflab.store import FeedbackStore

from .e2e_support import studio_browser, wait_until
from .test_e2e import STATIC

assert STATIC.exists(), "the studio bundle is not built: run bash scripts/build_studio.sh"

TOKEN = "tok-rita-" + "r" * 24
expect = playwright_sync.expect

ENVS = {
    # env id: (segment length, env kwargs, action scale): Hopper's episode ends at a time limit
    # of 400 steps (3.2 s at 125 steps/s; a standing Hopper would fall after ~140, 1.1 s, too
    # short for the person's ten key presses from the middle on when the machine is busy);
    # Pong's ends at a time limit of 360 emulator frames (90 agent steps)
    "Hopper-v5": (10, {"terminate_when_unhealthy": False, "max_episode_steps": 400}, 0.0),
    "ALE/Pong-v5": (10, {"max_episode_steps": 360}, 1.0),
}


def _episode(env_id: str, seed: int = 3) -> list[Segment]:
    """One whole episode (and the start of the next) as the trainer's recorder cuts it."""
    length, kwargs, scale = ENVS[env_id]
    venv = make_vec_env(env_id, 1, seed=seed, **kwargs)
    rec = SegmentRecorder(venv, length, env_id=env_id)
    rec.reset()
    rng = np.random.default_rng(seed)
    space = venv.action_space
    out: list[Segment] = []
    try:
        while not any(s.episode > 0 for s in out):
            if hasattr(space, "n"):
                act = np.array([rng.integers(space.n)]) if scale else np.zeros(1, np.int64)
            else:
                act = scale * rng.uniform(space.low, space.high, (1, *space.shape))
            rec.step(act.astype(space.dtype))
            out += rec.pop_segments()
    finally:
        venv.close()
    return out


@pytest.fixture(scope="module")
def studio(tmp_path_factory: pytest.TempPathFactory) -> Iterator[dict[str, Any]]:
    tmp = tmp_path_factory.mktemp("rate-e2e")
    run = tmp / "run"
    run.mkdir()
    store = FeedbackStore(run / "feedback.db", array_dir=run / "segments")
    store.annotators.add(
        Annotator(id="h-rita", source="human", name="rita", meta={"role": "annotator"}),
        token=TOKEN,
    )
    try:
        with studio_browser(run, tmp / "studio.log") as (base, browser):
            yield {"base": base, "browser": browser, "tmp": tmp, "store": store}
    finally:
        store.close()


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


def _shown(page: Any) -> tuple[int, int]:
    k, n = page.get_by_test_id("rating-step").inner_text().replace(",", "").split(" / ")
    return int(k), int(n)


@pytest.mark.parametrize("env_id", list(ENVS))
def test_a_person_rates_a_published_episode_on_the_steps_shown(
    studio: dict[str, Any], env_id: str
) -> None:
    store: FeedbackStore = studio["store"]
    recorded = _episode(env_id)
    (stream,) = StudioBridge(store).publish_episodes(0, recorded, 1)
    n = sum(s.length for s in recorded if s.id in stream.a)
    assert stream.kind == "rating" and stream.meta["n_steps"] == n
    assert [s.start for s in recorded if s.id in stream.a] == list(range(0, n, ENVS[env_id][0]))

    ctx = studio["browser"].new_context(viewport={"width": 1280, "height": 800})
    page = ctx.new_page()
    page.set_default_timeout(30_000)
    errors: list[str] = []
    page.on("pageerror", lambda exc: errors.append(str(exc)))
    page.goto(f"{studio['base']}/#token={TOKEN}")
    expect(page.get_by_test_id("me")).to_have_text("rita")
    expect(page.get_by_test_id("rate-badge")).to_have_text("1")  # the tab says one waits
    page.get_by_test_id("tab-rate").click()
    stage = page.locator(".rating-stage")
    expect(stage).to_have_attribute("data-query-id", stream.id, timeout=30_000)
    expect(page.get_by_test_id("rating-start")).to_be_enabled(timeout=90_000)
    for _ in range(5):
        page.keyboard.press("ArrowUp")  # +0.5 before the episode starts
    expect(page.get_by_test_id("rating-value")).to_have_text("+0.50")
    rate = round(timing(env_id).steps_per_s)  # Hopper 125, Pong 15 (60 Hz / 4 frames)
    expect(page.get_by_test_id("rating-speed")).to_contain_text(f"real time · {rate} steps/s")
    assert _shown(page) == (1, n)
    _shots(page, studio["tmp"], f"rate-{env_id.replace('/', '-')}-ready")

    seconds = n * timing(env_id).step_seconds  # the episode in real time
    page.keyboard.press(" ")
    wait_until(lambda: _shown(page)[0] >= n // 2, seconds + 30, "the middle of the episode")
    before = _shown(page)[0] - 1  # the page counts from 1, steps from 0
    for _ in range(10):
        page.keyboard.press("ArrowDown")  # −0.5 from the middle on
    after = _shown(page)[0] - 1
    expect(page.get_by_test_id("rating-done")).to_be_visible(timeout=(seconds + 30) * 1000)
    assert _shown(page) == (n, n)  # the last step shown, counted from 1
    _shots(page, studio["tmp"], f"rate-{env_id.replace('/', '-')}-done")

    n_sent = int(page.locator("[data-testid=rating-done] p").inner_text().split()[0])
    expect(page.get_by_test_id("rate-badge")).to_have_count(0, timeout=15_000)  # rated: gone
    ratings = wait_until(
        lambda: (r := store.ratings.all(stream_id=stream.id)) and len(r) == n_sent and r,
        30,
        "every rating to be stored",
    )
    steps = np.array([r.step for r in ratings])
    values = np.array([r.value for r in ratings])
    assert np.all(np.diff([r.t for r in ratings]) > 0)
    assert np.all(np.diff(steps) >= 0)  # in the order shown
    assert steps[0] <= 1 and abs(int(steps[-1]) - (n - 1)) <= 1  # step 0 … step n − 1
    assert steps.max() <= n - 1
    # one sample per displayed frame: the typical gap between rated steps is a frame's steps.
    # The largest gap is not asserted: a browser that stalls on a busy machine skips the steps
    # it did not show (a stall of 0.36 s, 45 Hopper steps, happened under the default test run),
    # and how long it stalls is a matter of time, which a test does not assert
    gaps = np.diff(np.unique(steps))
    per_frame = timing(env_id).steps_per_s / 60.0  # steps per displayed frame at 60 Hz
    assert np.median(gaps) <= max(3, 2 * per_frame), gaps
    assert values[0] == pytest.approx(0.5) and values[-1] == pytest.approx(-0.5)
    first_low = int(steps[np.argmax(values < 0.5)])
    tol = max(3, 3 * per_frame)  # the page's step is read between frames
    assert before - tol <= first_low <= after + tol  # tied to the step on screen then

    # the run's aggregator for people turns them into Pref-GUIDE window labels
    cfg = TrainConfig(env_id=env_id, source="store")
    agg = make_run_aggregator(cfg)
    segs = {s.id: s for s in store.segments.get(list(stream.a))}
    queries: dict[str, Query] = {stream.id: stream}
    labels = agg.labels(Feedback(queries=queries, judgements=(), ratings=ratings, segments=segs))
    assert labels and {lab.judgement_ids for lab in labels} == {(f"ratings:{stream.id}:h-rita",)}
    assert 1.0 in [lab.p for lab in labels]  # an early (+0.5) item over a late (−0.5) one
    if env_id == "Hopper-v5":  # the next episode: reopening the tab shows it, not the rated one
        (second,) = StudioBridge(store).publish_episodes(1, _episode(env_id, seed=4), 1)
        page.get_by_test_id("tab-compare").click()
        expect(page.get_by_test_id("rate-badge")).to_have_text("1", timeout=15_000)
        page.get_by_test_id("tab-rate").click()
        expect(stage).to_have_attribute("data-query-id", second.id, timeout=30_000)
        expect(page.get_by_test_id("rating-done")).to_have_count(0)
        expect(page.get_by_test_id("rating-start")).to_be_enabled(timeout=90_000)
        _shots(page, studio["tmp"], "rate-next-episode")
        page.keyboard.press(" ")  # rated too (about a second): the next test starts with none
        expect(page.get_by_test_id("rating-done")).to_be_visible(timeout=60_000)
        expect(page.get_by_test_id("rate-badge")).to_have_count(0, timeout=15_000)
    assert not errors, errors
    ctx.close()
