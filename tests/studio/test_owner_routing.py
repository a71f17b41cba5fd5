"""The Owner page's routing section (issue 58): ``GET /api/owner/routing`` reads what a router with
people in the studio published into the store (labels per answerer, the AI's accuracy against
people with its interval, the threshold, budgets, reasons); a run that does not route says so
and the page shows no section. A real router (simulated AI judge, people answering through the
store) feeds a real uvicorn studio; Chromium renders the section (screenshots to a temporary
dir, and to docs/screenshots/routing-owner*.png with PREFLAB_SCREENSHOTS=1)."""

from __future__ import annotations

import os
import shutil
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import numpy as np
import pytest
from playwright import sync_api as playwright_sync

from preflab.kinds import PAIR
from preflab.records import Judgement
from preflab.reward.batch import SegmentBatch
from preflab.sources.human import StoreSource
from preflab.sources.routing.config import RoutingConfig
from preflab.sources.routing.router import ROUTING_SETTING, RoutingSource
from preflab.sources.simulated_judge import SimulatedJudge, SimulatedJudgeConfig
from preflab.studio import routes_owner_routing
from preflab.studio.config import StudioConfig
from preflab.testing.browser import launch_chromium
from preflab.testing.factories import make_segment
from tests.studio.api_server import Studio, start_studio

REPO = Path(__file__).resolve().parents[2]
SIZES = {"": (1280, 800), "-1920": (1920, 1080)}


@pytest.fixture
def studio(tmp_path) -> Iterator[Studio]:
    s = start_studio(
        tmp_path,
        static_dir=REPO / "src" / "preflab" / "studio" / "static",
        config=StudioConfig(min_answer_s=0.0, undo_grace_s=0.0),
    )
    s.store.queries.withdraw([q.id for q in s.store.queries.all()])  # only this run's queries
    yield s
    s.stop()


class TableModel:
    """The RewardModel protocol with every member's return of each segment given by id."""

    def __init__(self, returns: dict[str, list[float]]) -> None:
        self.returns = returns

    def predict(self, obs: np.ndarray, acts: np.ndarray | None = None) -> np.ndarray:
        raise AssertionError("routing reads segment returns only")

    def segment_returns(self, batch: SegmentBatch) -> np.ndarray:
        return np.array([self.returns[i] for i in batch.ids], np.float64).T


def routed_run(studio: Studio, n: int = 60) -> RoutingSource:
    """A router (a reward model sure of the first sixth of the pairs, an AI that flips 25 %,
    people = the store, 20 % calibration, a people budget) routes ``n`` pairs; a person answers
    every query routed to people with the true order."""
    store = studio.store
    rng = np.random.default_rng(0)
    returns = {f"r{k}": float(v) for k, v in enumerate(rng.normal(0, 5, 2 * n))}
    segs = {k: make_segment(k, true_rewards=[v], env_id="Toy-v0") for k, v in returns.items()}
    ids = list(segs)
    qs = [PAIR.query(ids[2 * k], ids[2 * k + 1], round=1) for k in range(n)]
    store.segments.add(list(segs.values()))
    store.queries.add(qs)
    cfg = RoutingConfig(
        people="store",
        calibration_share=0.2,
        min_calibration=5,
        target_error=0.3,
        budget_people=45,
        judge=SimulatedJudgeConfig(flip_rate=0.25),
    )
    router = RoutingSource(
        cfg,
        np.random.default_rng(1),
        ai=SimulatedJudge(cfg.judge, np.random.default_rng(2)),
        people=StoreSource(store, grace_s=0.0),
        store=store,
    )
    sure = set(ids[: n // 3])  # members agree by far on these segments' pairs
    router.watch_model(
        lambda: TableModel(
            {k: [v * 100, v * 100] if k in sure else [v, -v] for k, v in returns.items()}
        )
    )
    for batch in (qs[: n // 2], qs[n // 2 :]):
        router.submit(batch, segs)
        theirs = [q for q in batch if router.routes[q.id]["answerer"] == "people"]
        store.answers.add(
            [
                Judgement(
                    id=f"j-{q.id}",
                    query_id=q.id,
                    annotator_id="alice",
                    source="human",
                    p=1.0 if returns[q.a[0]] > returns[q.b[0]] else 0.0,
                    response_time_s=2.0,
                )
                for q in theirs
            ]
        )
        time.sleep(0.05)
        router.collect()
    return router


def test_the_owner_reads_the_routers_split_live(studio: Studio) -> None:
    assert routes_owner_routing.ROUTING_SETTING == ROUTING_SETTING  # one name, two layers
    owner, alice = studio.client("owner"), studio.client("alice")
    assert owner.get("/api/owner/routing").json()["routes"] is False
    assert alice.get("/api/owner/routing").status_code == 403
    router = routed_run(studio)
    got = owner.get("/api/owner/routing").json()
    want = router.routing_report()
    assert got["routes"] is True
    assert got["labels"] == want["labels"] and sum(got["labels"].values()) == 60
    assert min(got["labels"].values()) > 0  # the model, the AI and people all answered
    assert got["asked"] == want["asked"] and got["budgets"]["people"] == 45
    assert got["reasons"] == want["reasons"]
    acc = want["ai_accuracy"]
    assert got["ai_accuracy"]["records"] == acc["records"] == router.calibration.n > 0
    assert got["ai_accuracy"]["accuracy"] == pytest.approx(acc["accuracy"])
    assert got["ai_accuracy"]["interval"] == pytest.approx(acc["interval"])
    assert got["ai_accuracy"]["threshold"] == acc["threshold"]
    assert got["ai_true_accuracy"] == pytest.approx(want["ai_true_accuracy"])
    # a report the studio cannot read still says the run routes (no 5xx)
    studio.store.settings.set(ROUTING_SETTING, {"labels": "garbage", "updated_at": 1.0})
    r = owner.get("/api/owner/routing")
    assert r.status_code == 200 and r.json()["routes"] is True and r.json()["labels"] == {}


@pytest.fixture
def browser() -> Iterator[Any]:
    pw = playwright_sync.sync_playwright().start()
    b = launch_chromium(pw)
    yield b
    b.close()
    pw.stop()


def test_the_owner_page_shows_the_routing_section_only_when_the_run_routes(
    studio: Studio, browser: Any, tmp_path: Path
) -> None:
    page = browser.new_context(viewport={"width": 1280, "height": 800}).new_page()
    page.goto(f"{studio.url}/#token={studio.tokens['owner']}")
    page.get_by_test_id("tab-owner").click()
    page.get_by_test_id("annotators").wait_for()
    playwright_sync.expect(page.get_by_test_id("routing-panel")).to_be_hidden()
    router = routed_run(studio)
    page.reload()
    page.get_by_test_id("tab-owner").click()
    panel = page.get_by_test_id("routing-panel")
    playwright_sync.expect(panel).to_be_visible()
    labels = router.routing_report()["labels"]
    share = round(100 * labels["ai"] / sum(labels.values()))
    playwright_sync.expect(page.get_by_test_id("routing-ai-share")).to_contain_text(f"{share}%")
    playwright_sync.expect(page.get_by_test_id("routing-row-people")).to_contain_text(
        f"{labels['people']}"
    )
    playwright_sync.expect(page.get_by_test_id("routing-records")).to_contain_text(
        f"of {router.calibration.n}"
    )
    panel.evaluate("el => el.scrollIntoView({block: 'start'})")
    page.evaluate("window.scrollBy(0, -140)")  # the sticky header would hide its title
    for suffix, (w, h) in SIZES.items():
        page.set_viewport_size({"width": w, "height": h})
        page.wait_for_timeout(300)  # layout settles (not an assertion)
        path = tmp_path / f"routing-owner{suffix}.png"
        page.screenshot(path=str(path))
        if os.environ.get("PREFLAB_SCREENSHOTS") == "1":
            out = REPO / "docs" / "screenshots"
            out.mkdir(parents=True, exist_ok=True)
            shutil.copy(path, out / path.name)
