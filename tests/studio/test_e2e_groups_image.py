"""End to end (issue #25): the Groups view on an image env, recovering from a network drop;
task instructions above the clips; the Owner page's activity, revoke and 'Finish now'.

The real studio process serves a store holding a round's pool of image behaviours (the toy
bright-square env recorded like Atari: 4 stacked 84×84 grey frames, published with the
trainer's hook and a real convolutional reward ensemble). Debian's Chromium, driven by
Playwright at a person's pace, is the browser. Screenshots (1280x800, 1920x1080) go to a
temporary directory, or to $PREFLAB_SHOTS_DIR when set.
"""

from __future__ import annotations

import contextlib
import os
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from preflab.records import Annotator
from preflab.store import FeedbackStore
from preflab_bench._image_pool import publish_square_round
from tests.studio.e2e_support import studio_browser, wait_until
from tests.studio.test_e2e import Shots, playwright_sync
from tests.studio.test_e2e_groupwise import members

expect = playwright_sync.expect
N = 60
TASK = "Keep the bright square in the right half of the frame; prefer steady movement."


class Run:
    def __init__(
        self, run: Path, base: str, store: FeedbackStore, log: Path, browser: Any, shots: Shots
    ):
        self.run, self.base, self.store, self.log = run, base, store, log
        self.browser, self.shots = browser, shots
        self.tokens = {
            "olivia": "tok-olivia-" + "o" * 24,
            "bob": "tok-bob-" + "b" * 24,
        }
        self.pages: dict[str, Any] = {}
        self.errors: list[str] = []

    def page(self, who: str, size: tuple[int, int] = (1280, 800)) -> Any:
        ctx = self.browser.new_context(viewport={"width": size[0], "height": size[1]})
        page = ctx.new_page()
        page.set_default_timeout(30_000)
        page.on("pageerror", lambda exc: self.errors.append(str(exc)))
        page.goto(f"{self.base}/#token={self.tokens[who]}")
        expect(page.get_by_test_id("me")).to_have_text(who)
        self.pages[who] = page
        return page

    def tracebacks(self) -> int:
        return self.log.read_text(errors="replace").count("Traceback")


@pytest.fixture(scope="module")
def run(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Run]:
    tmp = tmp_path_factory.mktemp("studio-groups-image")
    rundir = tmp / "run"
    rundir.mkdir()
    shots_dir = Path(os.environ.get("PREFLAB_SHOTS_DIR") or tmp / "shots")
    shots_dir.mkdir(parents=True, exist_ok=True)
    store = FeedbackStore(rundir / "feedback.db", array_dir=rundir / "segments")
    publish_square_round(store, N, 0)
    store.rounds.publish(
        0, env_id="ALE/Pong-v5", env_steps=N * 12, total_steps=10_000, metrics={"n_labels": 0}
    )
    log_path = tmp / "studio.log"
    try:
        with studio_browser(rundir, log_path) as (base, browser):
            r = Run(rundir, base, store, log_path, browser, Shots(shots_dir))
            for who, token in r.tokens.items():
                role = "owner" if who == "olivia" else "annotator"
                store.annotators.add(
                    Annotator(id=f"h-{who}", source="human", name=who, meta={"role": role}),
                    token=token,
                )
            yield r
    finally:
        store.close()


def playing(page: Any, selector: str) -> bool:
    """Every video under ``selector`` has advanced past its first frame and is not paused."""
    return bool(
        page.evaluate(
            """(sel) => { const vs = [...document.querySelectorAll(sel + ' video')];
                return vs.length > 0 && vs.every(v => !v.paused && v.currentTime > 0); }""",
            selector,
        )
    )


def test_groups_draws_an_image_pool_with_a_legend_and_playing_previews(run: Run) -> None:
    page = run.page("bob")
    page.wait_for_timeout(800)
    page.get_by_test_id("tab-explore").click()
    expect(page.get_by_test_id("radial")).to_have_attribute("data-drawn", str(N), timeout=30_000)
    assert page.locator(".arc-leaf").count() == N
    assert page.locator(".edge-suggestion").count() > 0  # the CNN ensemble's disagreement
    legend = page.get_by_test_id("gw-legend")
    expect(legend).to_be_visible()
    for words in ("innermost ring", "suggested comparisons", "preferred (green end)"):
        expect(legend).to_contain_text(words)
    # the legend is in view with the chart, at a laptop's size
    box = legend.bounding_box()
    assert box is not None and box["y"] + box["height"] <= 800
    # hovering a group plays its representatives (not still frames)
    parent = page.locator(".arc-parent").first
    parent.hover()
    expect(page.get_by_test_id("preview")).to_be_visible()
    expect(page.locator("[data-testid=preview] video").first).to_be_attached()
    wait_until(lambda: playing(page, "[data-testid=preview]"), 60, "the group preview to play")
    page.wait_for_timeout(700)
    run.shots.take(page, "groups-legend")
    page.mouse.move(5, 5)
    assert run.tracebacks() == 0, run.log.read_text()[-3000:]


def test_groups_recovers_by_itself_after_a_network_drop(run: Run) -> None:
    page = run.page("bob")  # a fresh tab, on the Compare view
    ctx = page.context
    page.wait_for_timeout(500)
    ctx.set_offline(True)
    page.get_by_test_id("tab-explore").click()
    expect(page.get_by_test_id("explore-title")).to_contain_text("cannot be reached")
    page.wait_for_timeout(3000)  # a few seconds without a network
    ctx.set_offline(False)
    # no tab change, no reload: the tree comes by itself
    expect(page.get_by_test_id("radial")).to_have_attribute("data-drawn", str(N), timeout=20_000)
    expect(page.get_by_test_id("explore-title")).to_contain_text("Round 0")

    # the connection drops while the person composes groups: the clips come once it is back
    ctx.set_offline(True)
    page.keyboard.press("n")  # Suggest next
    a, b = members(page, "a"), members(page, "b")
    assert a and b
    page.wait_for_timeout(3000)
    ctx.set_offline(False)
    wait_until(
        lambda: playing(page, "[data-testid=group-a]") and playing(page, "[data-testid=group-b]"),
        60,
        "the group clips to play after the network came back",
    )
    # and an answer given right after goes through
    page.wait_for_timeout(1500)
    page.keyboard.press("ArrowLeft")
    # the studio stores the group query, then the judgement (two writes): wait for the second
    wait_until(
        lambda: (
            {
                q.id
                for q in run.store.queries.all()
                if q.kind == "group" and q.meta.get("annotator_id") == "h-bob"
            }
            & {j.query_id for _s, j in run.store.answers.judgements() if j.annotator_id == "h-bob"}
        ),
        20,
        "bob's group answer (its query and its judgement) to be stored",
    )
    assert run.tracebacks() == 0
    ctx.close()


def test_task_set_on_the_owner_page_reaches_every_view(run: Run) -> None:
    owner = run.page("olivia")
    owner.get_by_test_id("tab-owner").click()
    owner.wait_for_timeout(600)
    box = owner.get_by_test_id("task-input")
    box.fill("x" * 600)  # the field stops at the limit
    assert len(box.input_value()) == 500
    box.fill(TASK)
    owner.wait_for_timeout(400)
    owner.get_by_test_id("task-save").click()
    expect(owner.get_by_test_id("task-banner")).to_contain_text(TASK)
    assert run.store.settings.get("task")["text"] == TASK
    bob = run.page("bob")
    for view in ("compare", "explore", "rate"):
        bob.get_by_test_id(f"tab-{view}").click()
        banner = bob.get_by_test_id("task-banner")
        expect(banner).to_contain_text(TASK)
        expect(banner).to_be_visible()
        # above the clips: the banner ends before the view starts
        view_box = bob.get_by_test_id(f"view-{view}").bounding_box()
        b = banner.bounding_box()
        assert b is not None and view_box is not None and b["y"] + b["height"] <= view_box["y"]
    bob.get_by_test_id("tab-explore").click()
    expect(bob.get_by_test_id("radial")).to_have_attribute("data-drawn", str(N), timeout=30_000)
    bob.keyboard.press("n")
    bob.wait_for_timeout(1500)
    run.shots.take(bob, "groups-task")
    bob.get_by_test_id("tab-compare").click()
    run.shots.take(bob, "compare-task")


def test_owner_page_activity_revoke_and_finish(run: Run) -> None:
    owner = run.pages.get("olivia") or run.page("olivia")
    owner.get_by_test_id("tab-owner").click()
    row = owner.locator("[data-testid=activity-row][data-annotator=h-bob]")
    expect(row).to_be_visible()
    # bob answered one group comparison: one answer, a rate, a median response time
    expect(row).to_contain_text("1")
    expect(row.get_by_test_id("rate")).not_to_have_text("–")
    # nobody is asked a pair twice by default: no repeats, and the page says how to turn it on
    expect(row.get_by_test_id("repeats-agreed")).to_have_text("–")
    expect(owner.get_by_test_id("consistency-note")).to_contain_text("--repeat-share")
    run.store.rounds.publish(
        1,
        env_id="ALE/Pong-v5",
        env_steps=N * 24,
        total_steps=10_000,
        metrics={"n_labels": 1, "reward_accuracy": 0.75},
    )
    expect(owner.get_by_test_id("owner-accuracy")).to_contain_text("75 %", timeout=15_000)
    owner.wait_for_timeout(500)
    run.shots.take(owner, "owner", before=lambda: owner.evaluate("window.scrollTo(0, 0)"))

    # revoke bob: two clicks (the first arms the button), then his open tab is signed out
    bob = run.pages["bob"]
    row.get_by_test_id("revoke").click()
    expect(row.get_by_test_id("revoke")).to_have_text("Confirm revoke")
    owner.wait_for_timeout(500)
    row.get_by_test_id("revoke").click()
    expect(row.get_by_test_id("revoked")).to_be_visible()
    status = bob.evaluate("() => fetch('/api/status').then(r => r.status)")
    assert status == 401
    # his next request signs him out: his own action, or his page's background poll, which may
    # come first and take the tabs away
    explore = bob.get_by_test_id("tab-explore")
    if explore.is_visible():
        with contextlib.suppress(playwright_sync.TimeoutError):
            explore.click(timeout=5_000)
            bob.keyboard.press("n")
            bob.keyboard.press("ArrowLeft")
    expect(bob.get_by_test_id("unauthorized")).to_be_visible(timeout=20_000)

    # finish now: two clicks, then 'finishing…' and the setting the trainer reads
    owner.get_by_test_id("finish-now").click()
    assert run.store.settings.get("finish") is None
    owner.wait_for_timeout(400)
    owner.get_by_test_id("finish-now").click()
    expect(owner.get_by_test_id("finish-now")).to_have_text("Finishing…")
    expect(owner.get_by_test_id("finish-state")).to_contain_text("Finishing…")
    fin = run.store.settings.get("finish")
    assert fin["by"] == "h-olivia" and fin["at"] > 0
    owner.reload()
    owner.get_by_test_id("tab-owner").click()
    expect(owner.get_by_test_id("finish-now")).to_have_text("Finishing…")
    run.shots.take(owner, "owner-finishing", before=lambda: owner.evaluate("window.scrollTo(0, 0)"))
    assert run.errors == [] and run.tracebacks() == 0
