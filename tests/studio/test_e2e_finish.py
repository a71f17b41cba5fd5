"""End to end: every answer counts when the run ends. A person answers two pairs in Debian's
Chromium (Playwright, at a person's pace) on a real trainer process paced by people (Pendulum,
unpaused); the owner presses Finish now while both answers are still inside their undo window
(``--undo-s 60``). The trainer closes undo, collects them and fits once more: the final table
counts both, and the person's page says undo is no longer possible because the run ended. The
Owner page's return chart reads distinct ticks. Screenshots (1280x800, 1920x1080) go to a
temporary directory, or to $PREFLAB_SHOTS_DIR when set."""

from __future__ import annotations

import json
import os
import textwrap
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from preflab.records import Annotator
from preflab.store import FeedbackStore
from tests.studio.e2e_support import start_trainer, stop, studio_browser, wait_until
from tests.studio.test_e2e import Shots, human_judgements, metrics_rows, playwright_sync, watch

expect = playwright_sync.expect
TOKENS = {"olivia": "tok-olivia-" + "o" * 24, "bob": "tok-bob-" + "b" * 24}
TRAINER = textwrap.dedent(
    """
    import sys
    from pathlib import Path
    from preflab.config import TrainConfig
    from preflab.runs import train
    from preflab.sources import StoreSource
    from preflab.store import FeedbackStore

    run = Path(sys.argv[1])
    config = TrainConfig(
        env_id="Pendulum-v1", algo="ppo", seed=2, selector="random", source="store",
        total_steps=328, initial_steps=200, steps_per_round=128, segment_length=25,
        total_labels=4, initial_label_frac=0.5, schedule="constant",
        eval_episodes=1, first_fit_epochs=5,
    )
    store = FeedbackStore(run / "feedback.db", array_dir=run / "segments")
    train(config, run_dir=run, source=StoreSource(store))
    """
)


@pytest.fixture(scope="module")
def studio(tmp_path_factory: pytest.TempPathFactory) -> Iterator[dict[str, Any]]:
    tmp = tmp_path_factory.mktemp("studio-finish")
    run = tmp / "run"
    run.mkdir()
    shots = Path(os.environ.get("PREFLAB_SHOTS_DIR") or tmp / "shots")
    shots.mkdir(parents=True, exist_ok=True)
    store = FeedbackStore(run / "feedback.db", array_dir=run / "segments")
    for who, token in TOKENS.items():
        role = "owner" if who == "olivia" else "annotator"
        store.annotators.add(
            Annotator(id=f"h-{who}", source="human", name=who, meta={"role": role}), token=token
        )
    trainer = start_trainer(TRAINER, run, tmp)
    try:
        with studio_browser(run, tmp / "studio.log", "--undo-s", "60") as (base, browser):
            yield {
                "run": run,
                "base": base,
                "store": store,
                "browser": browser,
                "shots": Shots(shots),
                "trainer": trainer,
            }
    finally:
        stop(trainer)
        store.close()


def page_of(s: dict[str, Any], who: str) -> Any:
    page = s["browser"].new_context(viewport={"width": 1280, "height": 800}).new_page()
    page.set_default_timeout(30_000)
    page.goto(f"{s['base']}/#token={TOKENS[who]}")
    expect(page.get_by_test_id("me")).to_have_text(who)
    return page


# first: it runs Playwright of its own, which must end before the module fixture starts one
def test_return_ticks_stay_distinct_over_a_narrow_range(tmp_path: Path) -> None:
    """Pendulum returns from −1,421 to −1,384: the y ticks read −1.42k … −1.38k (they all read
    −1.4k before)."""
    run = tmp_path / "run"
    run.mkdir()
    store = FeedbackStore(run / "feedback.db", array_dir=run / "segments")
    try:
        store.annotators.add(
            Annotator(id="h-olivia", source="human", name="olivia", meta={"role": "owner"}),
            token=TOKENS["olivia"],
        )
        for k, ret in enumerate((-1421.0, -1408.0, -1396.0, -1384.0)):
            steps = 2000 * (k + 1)
            store.rounds.publish(
                k,
                env_id="Pendulum-v1",
                env_steps=steps,
                total_steps=10_000,
                metrics={
                    "round": k,
                    "env_steps": steps,
                    "n_labels": 10 * (k + 1),
                    "eval_true_return": ret,
                },
            )
        # no clips in this run: no render workers (--no-media); the chart is the owner page's
        with studio_browser(run, tmp_path / "studio.log", "--no-media") as (base, browser):
            owner = page_of({"browser": browser, "base": base}, "olivia")
            owner.get_by_test_id("tab-owner").click()
            ticks = owner.locator("[data-testid=chart-return] .axis").nth(1).locator(".tick text")
            expect(ticks.first).to_be_visible()
            labels = ticks.all_text_contents()
    finally:
        store.close()
    assert labels == ["-1.42k", "-1.41k", "-1.40k", "-1.39k", "-1.38k"]


def test_answers_inside_the_undo_window_count_when_the_owner_finishes(
    studio: dict[str, Any],
) -> None:
    store, run = studio["store"], studio["run"]
    bob = page_of(studio, "bob")
    answered: list[str] = []
    for key in ("ArrowLeft", "ArrowRight"):
        pair = bob.locator("[data-testid=pair]")
        if answered:
            expect(pair).not_to_have_attribute("data-query-id", answered[-1], timeout=90_000)
        expect(pair).to_be_visible(timeout=120_000)
        qid = pair.get_attribute("data-query-id")
        watch(bob)
        bob.keyboard.press(key)
        answered.append(qid)
        wait_until(
            lambda q=qid: any(j.query_id == q for j in human_judgements(store, "h-bob")),
            30,
            f"bob's answer to {qid} to be stored",
        )
    expect(bob.locator(".toast")).to_contain_text("Saved")

    # the owner finishes at once: both answers are well inside their 60 s undo window
    owner = page_of(studio, "olivia")
    owner.get_by_test_id("tab-owner").click()
    owner.get_by_test_id("finish-now").click()
    owner.wait_for_timeout(400)
    owner.get_by_test_id("finish-now").click()
    expect(owner.get_by_test_id("finish-now")).to_have_text("Finishing…")
    wait_until(lambda: store.settings.get("undo_closed"), 120, "the trainer to close undo")

    # undo now is refused, and the page says why: the run has ended
    bob.keyboard.press("u")
    expect(bob.locator(".toast")).to_contain_text("The run has ended", timeout=15_000)
    studio["shots"].take(bob, "finish-person")

    summary = wait_until(
        lambda: (run / "summary.json").exists() and json.loads((run / "summary.json").read_text()),
        180,
        "the trainer to end the run",
    )
    assert summary["ended_by"] == "owner"
    assert summary["n_judgements"] == 2 and summary["n_labels"] == 2  # nothing lost
    assert int(metrics_rows(run)[-1]["n_labels"]) == 2  # the last fit saw both
    assert all(j.query_id in answered for j in human_judgements(store, "h-bob"))
    studio["trainer"].wait(timeout=60)

    owner.reload()
    owner.get_by_test_id("tab-owner").click()
    ticks = owner.locator("[data-testid=chart-return] .axis").nth(1).locator(".tick text")
    expect(ticks.first).to_be_visible()
    labels = ticks.all_text_contents()
    assert len(labels) >= 2 and len(set(labels)) == len(labels), labels
    studio["shots"].take(
        owner,
        "finish-owner",
        before=lambda: owner.evaluate(
            "document.querySelector('[data-testid=chart-return]').scrollIntoView({block: 'center'})"
        ),
    )
