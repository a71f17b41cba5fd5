"""End to end: a real trainer process, the real studio process and Debian's Chromium (Playwright).

One run is shared by the tests of this module, in order:

1. ``test_pairwise_answers_train_the_reward``: Bob answers the trainer's first queries with the
   arrow keys; the trainer's next fit uses them (human judgements in the store, n_labels > 0).
2. ``test_undo_keeps_an_answer_out_of_training``: with the trainer paused (SIGSTOP between two of
   its writes, so it cannot collect and blocks no one's writes), Bob answers, undoes with U and
   with the toast's button, answers again; after SIGCONT the trainer's fit counts only the
   answers that stand.
3. ``test_rating_stream_becomes_ratings_and_window_labels``: Carol rates an episode with the
   slider and the mouse; the ratings are stored with the shown steps and give Pref-GUIDE labels.
4. ``test_second_annotator_sees_only_their_answers``: Dave never sees Bob's answers; an answer
   sent while the network fails is queued, shown in a banner and stored once after retry.
5. ``test_owner_page_and_invalid_link``: the owner's overview (D3 curves, annotators, invite,
   export) and the invalid-link screen.

Screenshots of every view (1280x800 and 1920x1080) go to a temporary directory, and to
``docs/screenshots/`` when ``PREFLAB_SCREENSHOTS=1``.
"""

from __future__ import annotations

import contextlib
import csv
import dataclasses
import json
import os
import shutil
import signal
import subprocess
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import numpy as np
import pytest
from playwright import sync_api as playwright_sync

from preflab.records import Annotator, Query, Segment
from preflab.store import FeedbackStore

from .e2e_support import (
    page_wait_until,
    pause_between_writes,
    start_trainer,
    stop,
    studio_browser,
    trainer_script,
    wait_until,
)

REPO = Path(__file__).resolve().parents[2]
SRC = REPO / "src"
STATIC = SRC / "preflab" / "studio" / "static" / "index.html"
SIZES = {"": (1280, 800), "-1920": (1920, 1080)}

assert STATIC.exists(), "the studio bundle is not built: run bash scripts/build_studio.sh"

expect = playwright_sync.expect

TRAINER = trainer_script(seed=0, total_labels=6, wait_for_labels_s=120.0)


# ----------------------------------------------------------------------------------------------
# helpers


def metrics_rows(run: Path) -> list[dict[str, str]]:
    path = run / "metrics.csv"
    if not path.exists():
        return []
    with path.open() as f:
        return list(csv.DictReader(f))


def human_judgements(store: FeedbackStore, annotator_id: str | None = None) -> list[Any]:
    return [
        j
        for _seq, j in store.answers.judgements(include_retracted=True)
        if j.source == "human" and (annotator_id is None or j.annotator_id == annotator_id)
    ]


class Shots:
    """Screenshots at both sizes into a temporary dir (and docs/screenshots on request)."""

    def __init__(self, tmp: Path) -> None:
        self.dir = tmp
        self.publish = os.environ.get("PREFLAB_SCREENSHOTS") == "1"

    def take(self, page: Any, name: str, before: Callable[[], None] | None = None) -> None:
        original = page.viewport_size
        for suffix, (w, h) in SIZES.items():
            page.set_viewport_size({"width": w, "height": h})
            if before is not None:
                before()
            page.wait_for_timeout(300)  # let layout and the D3 redraw settle (not an assertion)
            path = self.dir / f"{name}{suffix}.png"
            page.screenshot(path=str(path))
            if self.publish:
                out = REPO / "docs" / "screenshots"
                out.mkdir(parents=True, exist_ok=True)
                shutil.copy(path, out / path.name)
        page.set_viewport_size(original)


@dataclasses.dataclass
class Studio:
    run: Path
    base: str
    store: FeedbackStore
    trainer: subprocess.Popen
    tokens: dict[str, str]
    ids: dict[str, str]
    browser: Any
    shots: Shots
    state: dict[str, Any]

    def page(self, who: str | None, *, size: tuple[int, int] = (1280, 800)) -> Any:
        ctx = self.browser.new_context(viewport={"width": size[0], "height": size[1]})
        page = ctx.new_page()
        page.set_default_timeout(30_000)
        errors = self.state.setdefault("errors", [])
        page.on("pageerror", lambda exc: errors.append(f"page error: {exc}"))
        page.on(
            "console",
            lambda msg: (
                errors.append(f"console: {msg.text}")
                if msg.type == "error" and "Content Security Policy" in msg.text
                else None
            ),
        )
        if who is not None:
            page.goto(f"{self.base}/#token={self.tokens[who]}")
            expect(page.get_by_test_id("me")).to_have_text(who)
        return page

    def open_pairs(self, who: str) -> list[Query]:
        """What the studio will still ask ``who`` (each pair once)."""
        return self.store.people.queue(self.ids[who], kind="pair", limit=100)


@pytest.fixture(scope="module")
def studio(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Studio]:
    tmp = tmp_path_factory.mktemp("studio-e2e")
    run = tmp / "run"
    run.mkdir()
    shots_dir = tmp / "screenshots"
    shots_dir.mkdir()
    store = FeedbackStore(run / "feedback.db", array_dir=run / "segments")
    tokens = {
        "olivia": "tok-olivia-" + "o" * 24,
        "bob": "tok-bob-" + "b" * 24,
        "carol": "tok-carol-" + "c" * 24,
        "dave": "tok-dave-" + "d" * 24,
    }
    ids = {name: f"h-{name}" for name in tokens}
    for name, token in tokens.items():
        role = "owner" if name == "olivia" else "annotator"
        store.annotators.add(
            Annotator(id=ids[name], source="human", name=name, meta={"role": role}), token=token
        )
    trainer = start_trainer(TRAINER, run, tmp)
    try:
        with studio_browser(run, tmp / "studio.log") as (base, browser):
            yield Studio(
                run=run,
                base=base,
                store=store,
                trainer=trainer,
                tokens=tokens,
                ids=ids,
                browser=browser,
                shots=Shots(shots_dir),
                state={},
            )
    finally:
        stop(trainer)
        store.close()


def answer_all(
    studio: Studio, page: Any, who: str, keys: list[str], *, round: int | None = None
) -> list[tuple[str, str]]:
    """Answer the open pair queries of ``who`` (of one round, or all) with ``keys`` (cycled);
    returns [(query id, key)] in the order answered."""
    done: list[tuple[str, str]] = []
    while [q for q in studio.open_pairs(who) if round is None or q.round == round]:
        pair = page.locator("[data-testid=pair]")
        seen = {q for q, _ in done}
        if done:
            expect(pair).not_to_have_attribute("data-query-id", done[-1][0])
        expect(pair).to_be_visible()
        qid = pair.get_attribute("data-query-id")
        assert qid not in seen, f"query {qid} shown again after it was answered"
        key = keys[len(done) % len(keys)]
        watch(page)
        page.keyboard.press(key)
        done.append((qid, key))
        wait_until(
            lambda q=qid: any(
                j.query_id == q for j in human_judgements(studio.store, studio.ids[who])
            ),
            30,
            f"{who}'s answer to {qid} to be stored",
        )
    return done


def watch(page: Any) -> None:
    """Watch the pair on screen as a person does: until both clips have played once (the page
    takes no answer before; it says so with data-ready)."""
    expect(page.get_by_test_id("view-compare")).to_have_attribute(
        "data-ready", "true", timeout=90_000
    )


P_OF_KEY = {"ArrowLeft": 1.0, "ArrowRight": 0.0, "ArrowUp": 0.5, "ArrowDown": None}


def wait_videos(page: Any) -> None:
    """Wait (bounded) until every video on the page shows a frame, or give up quietly."""
    with contextlib.suppress(playwright_sync.TimeoutError):
        page.wait_for_function(
            "() => [...document.querySelectorAll('video')].every(v => v.readyState >= 2)"
            " || document.querySelectorAll('[data-testid=clip-missing]').length > 0",
            timeout=20_000,
        )


# ----------------------------------------------------------------------------------------------
# tests (in order; they share one run)


def test_pairwise_answers_train_the_reward(studio: Studio) -> None:
    bob = studio.ids["bob"]
    page = studio.page("bob")
    assert "token" not in page.url, "the token must leave the address bar after login"
    expect(page.get_by_test_id("view-compare")).to_be_visible()
    wait_until(lambda: len(studio.open_pairs("bob")) >= 3, 60, "the trainer's first queries")
    expect(page.locator("[data-testid=pair]")).to_be_visible()
    wait_videos(page)
    studio.shots.take(page, "pairwise", before=lambda: wait_videos(page))

    # the trainer waits for all of round 0 before it asks more, so these are round 0's queries
    done = answer_all(studio, page, "bob", ["ArrowLeft", "ArrowRight", "ArrowUp"], round=0)
    assert len(done) == 3
    expect(page.get_by_test_id("stat-answered_total")).to_have_text(str(len(done)))

    stored = {j.query_id: j for j in human_judgements(studio.store, bob)}
    for qid, key in done:
        j = stored[qid]
        assert j.p == P_OF_KEY[key]
        assert j.response_time_s is not None and j.response_time_s > 0
        assert j.meta.get("client_key")
    # the trainer's next fit used them
    rows = wait_until(
        lambda: [r for r in metrics_rows(studio.run) if r["n_labels"] and int(r["n_labels"]) > 0],
        120,
        "a metrics row with n_labels > 0",
    )
    assert int(rows[0]["n_labels"]) == sum(P_OF_KEY[k] is not None for _, k in done)
    page.context.close()


def test_undo_keeps_an_answer_out_of_training(studio: Studio) -> None:
    bob = studio.ids["bob"]
    wait_until(lambda: studio.open_pairs("bob"), 120, "the trainer's next round of queries")
    page = studio.page("bob")
    # the trainer cannot collect while stopped (and holds no write lock, or nothing is stored)
    pause_between_writes(studio.trainer, studio.run / "feedback.db")
    try:
        pair = page.locator("[data-testid=pair]")
        expect(pair).to_be_visible()

        # undo with the U key while the next pair is on its way (the server's answer is held
        # here): the undone pair stays on screen when the late answer arrives. The page asks
        # for the next pair (GET /api/queries/next), or shows the one it prefetched at once and
        # tells the server (GET /api/queries/ID): both are held.
        def next_pair(url: str) -> bool:
            path = url.split("?")[0]
            return "/api/queries/" in path and not path.endswith(("/ahead", "/skip"))

        asked: list[str] = []  # the page's requests, as it makes them
        held: list[tuple[playwright_sync.Route, playwright_sync.APIResponse]] = []

        def hold(route: playwright_sync.Route) -> None:
            asked.append(route.request.url)
            held.append((route, route.fetch(timeout=120_000)))

        page.route(next_pair, hold)
        watch(page)
        qid = pair.get_attribute("data-query-id")  # the pair the key answers (settled, watched)
        page.keyboard.press("ArrowRight")
        expect(page.locator(".toast")).to_contain_text("Saved")
        wait_until(
            lambda: any(j.query_id == qid for j in human_judgements(studio.store, bob)),
            30,
            "the answer to be stored",
        )
        first = next(j for j in human_judgements(studio.store, bob) if j.query_id == qid)
        expect(page.get_by_test_id("toast-undo")).to_be_enabled()
        page.keyboard.press("u")
        expect(page.locator(".toast")).to_contain_text("undone")
        page_wait_until(page, lambda: asked, 30, "the page to ask for the next pair")
        # the server's answer to it (slow only on a loaded machine: a limit, not a timing)
        page_wait_until(page, lambda: held, 120, "the studio to answer that request")
        with page.expect_response(lambda r: next_pair(r.url)):
            for route, response in held:
                route.fulfill(response=response)
        page.unroute(next_pair)
        page.evaluate("() => new Promise(r => setTimeout(r, 200))")  # let the late load land
        assert first.id in studio.store.answers.retracted_ids()
        expect(pair).to_have_attribute("data-query-id", qid)  # the same pair, to answer again
        mine = page.evaluate("() => fetch('/api/judgements/mine').then(r => r.json())")
        assert first.id not in {r["id"] for r in mine["judgements"]}

        # undo with the toast's button
        watch(page)
        page.keyboard.press("ArrowUp")
        wait_until(
            lambda: len([j for j in human_judgements(studio.store, bob) if j.query_id == qid]) == 2,
            30,
            "the second answer to be stored",
        )
        page.get_by_test_id("toast-undo").click()
        expect(page.locator(".toast")).to_contain_text("undone")
        expect(pair).to_have_attribute("data-query-id", qid)
        retracted = studio.store.answers.retracted_ids()
        assert len([j for j in human_judgements(studio.store, bob) if j.id in retracted]) == 2

        # the answer that stands, then the rest of the round
        done = answer_all(studio, page, "bob", ["ArrowLeft", "ArrowDown", "ArrowRight"])
        assert done[0] == (qid, "ArrowLeft")
        studio.shots.take(
            page,
            "pairwise-history",
            before=lambda: page.get_by_test_id("mine").scroll_into_view_if_needed(),
        )
    finally:
        studio.trainer.send_signal(signal.SIGCONT)
    assert studio.trainer.wait(timeout=180) == 0, "the trainer failed; see trainer.log"

    retracted = studio.store.answers.retracted_ids()
    standing = [j for j in human_judgements(studio.store) if j.id not in retracted]
    last = metrics_rows(studio.run)[-1]
    assert int(last["n_judgements"]) == len(standing), "the trainer counted an undone answer"
    assert int(last["n_labels"]) == sum(j.p is not None for j in standing)
    page.context.close()


def _record_stream(store: FeedbackStore, n_segments: int = 4, length: int = 50) -> Query:
    """One Pendulum episode cut into consecutive segments, published as a rating query."""
    import gymnasium as gym

    env = gym.make("Pendulum-v1")
    obs, _ = env.reset(seed=7)
    rng = np.random.default_rng(7)
    has_states = "states" in {f.name for f in dataclasses.fields(Segment)}
    segs = []
    for k in range(n_segments):
        o, a, r, s = [], [], [], []
        for _ in range(length):
            s.append(np.array(env.unwrapped.state, dtype=np.float64))
            act = rng.uniform(-2, 2, size=(1,)).astype(np.float32)
            o.append(obs)
            a.append(act)
            obs, rew, *_ = env.step(act)
            r.append(rew)
        o_arr, a_arr = np.array(o, np.float32), np.array(a, np.float32)
        extra = {"states": np.array(s)} if has_states else {}
        segs.append(
            Segment(
                id=Segment.content_id(o_arr, a_arr),
                obs=o_arr,
                acts=a_arr,
                true_rewards=np.array(r, np.float32),
                env_id="Pendulum-v1",
                episode=7,
                start=k * length,
                **extra,
            )
        )
    env.close()
    store.segments.add(segs)
    q = Query(id="stream-e2e-1", kind="rating", a=tuple(s.id for s in segs), round=0)
    store.queries.add([q])
    return q


def test_rating_stream_becomes_ratings_and_window_labels(studio: Studio) -> None:
    from preflab.kinds.rating_streams import stream_values
    from preflab.kinds.rating_windows import window_labels

    q = _record_stream(studio.store)
    n_steps = 4 * 50
    page = studio.page("carol")
    page.get_by_test_id("tab-rate").click()
    expect(page.get_by_test_id("view-rate")).to_be_visible()
    expect(page.get_by_test_id("rating-start")).to_be_enabled(timeout=60_000)
    for _ in range(6):
        page.keyboard.press("ArrowUp")  # +0.6 before the episode starts
    expect(page.get_by_test_id("rating-value")).to_have_text("+0.60")
    studio.shots.take(page, "rating", before=lambda: wait_videos(page))

    page.keyboard.press(" ")
    expect(page.get_by_test_id("rating-sent")).not_to_have_text("0")  # first batch stored

    def stored() -> list[Any]:
        return studio.store.ratings.all(stream_id=q.id, annotator_id=studio.ids["carol"])

    slider = page.get_by_test_id("rating-slider")
    slider.fill("-0.5")  # the slider itself
    expect(page.get_by_test_id("rating-value")).to_have_text("-0.50")
    # each value change is sampled before the next one (the final flush at the end sends it)
    wait_until(lambda: any(r.value == -0.5 for r in stored()), 60, "a stored rating of -0.5")
    page.get_by_test_id("mouse-mode").check()
    box = page.get_by_test_id("rating-panel").bounding_box()
    page.mouse.move(box["x"] + box["width"] / 2, box["y"] + box["height"] * 0.1)  # near the top
    expect(page.get_by_test_id("rating-done")).to_be_visible(timeout=60_000)

    wait_until(lambda: len(stored()) >= 10, 30, "the rating batches to be stored")
    n_shown = int(page.locator("[data-testid=rating-done] p").inner_text().split()[0])
    ratings = wait_until(lambda: (r := stored()) and len(r) == n_shown and r, 30, "all ratings")
    steps, times, values = stream_values(ratings)
    assert np.all(np.diff(times) > 0) and np.all(np.diff(steps) >= 0)
    assert steps.min() >= 0 and steps.max() < n_steps
    assert values[0] == pytest.approx(0.6)
    assert np.any(np.isclose(values, -0.5))
    assert values.max() > 0.6 or np.any(np.isclose(values, 0.6))
    labels = window_labels(values)
    assert len(labels.pairs) > 0
    assert 1.0 in labels.p  # +0.6 before -0.5 inside a window: the earlier step is preferred
    assert 0.5 in labels.p  # equal ratings
    page.context.close()


def test_second_annotator_sees_only_their_answers(studio: Studio) -> None:
    bob_ids = {j.id for j in human_judgements(studio.store, studio.ids["bob"])}
    bob_queries = {j.query_id for j in human_judgements(studio.store, studio.ids["bob"])}
    assert bob_ids
    page = studio.page("dave")
    mine = page.evaluate("() => fetch('/api/judgements/mine').then(r => r.json())")
    assert mine["judgements"] == []
    expect(page.locator("[data-testid=mine] .history-empty")).to_be_visible()
    # Bob's answers are not Dave's to undo
    some = next(iter(bob_ids))
    status = page.evaluate(
        "id => fetch('/api/judgements/' + id, {method: 'DELETE'}).then(r => r.status)", some
    )
    assert status == 404

    # Dave answers one query while the network fails: queued, banner, stored once on retry
    pair = page.locator("[data-testid=pair]")
    expect(pair).to_be_visible()
    qid = pair.get_attribute("data-query-id")
    watch(page)
    page.context.set_offline(True)
    page.keyboard.press("ArrowUp")
    expect(page.get_by_test_id("banner")).to_be_visible()
    expect(page.get_by_test_id("banner")).to_contain_text("1 answer is kept")
    studio.shots.take(page, "offline")
    expect(page.get_by_test_id("footer-keys")).to_contain_text("can't tell")
    page.get_by_test_id("tab-rate").click()  # the rate view says the same, with the same icon
    expect(page.get_by_test_id("rating-empty")).to_contain_text("Connection trouble")
    # the footer lists the rate view's keys, not the compare view's
    expect(page.get_by_test_id("footer-keys")).to_contain_text("±0.02")
    expect(page.get_by_test_id("footer-keys")).not_to_contain_text("can't tell")
    studio.shots.take(page, "rating-offline")
    page.get_by_test_id("tab-compare").click()
    page.context.set_offline(False)
    # "Retry now" (dispatched: the automatic retry may already have hidden the banner)
    page.get_by_test_id("retry").dispatch_event("click")
    expect(page.get_by_test_id("banner")).to_be_hidden()
    dave = wait_until(
        lambda: human_judgements(studio.store, studio.ids["dave"]), 30, "Dave's queued answer"
    )
    assert [(j.query_id, j.p) for j in dave] == [(qid, 0.5)]

    mine = page.evaluate("() => fetch('/api/judgements/mine').then(r => r.json())")
    assert [r["query_id"] for r in mine["judgements"]] == [qid]
    rows = page.get_by_test_id("mine-row")
    expect(rows).to_have_count(1)
    assert rows.first.get_attribute("data-query-id") == qid
    html = page.content()
    assert not any(j in html for j in bob_ids), "Bob's judgement ids reached Dave's page"
    shown = {r.get_attribute("data-query-id") for r in rows.all()}
    assert shown <= {qid} and (qid not in bob_queries or shown == {qid})
    page.context.close()


def test_owner_page_and_invalid_link(studio: Studio) -> None:
    page = studio.page("olivia", size=(1280, 800))
    page.get_by_test_id("tab-owner").click()
    expect(page.get_by_test_id("view-owner")).to_be_visible()
    table = page.get_by_test_id("annotators")
    for name in ("bob", "carol", "dave"):
        expect(table).to_contain_text(name)
    overview = page.evaluate("() => fetch('/api/owner/overview').then(r => r.json())")
    assert "true_rewards" not in json.dumps(overview)
    if overview["rounds"]:  # the trainer published its rounds: the curves are drawn
        expect(page.locator("[data-testid=chart-labels] svg rect.bar").first).to_be_attached()
        expect(page.locator("[data-testid=chart-accuracy] svg path.series")).to_have_count(1)
    # invite a new annotator and open their link
    page.get_by_test_id("invite-name").fill("erin")
    page.get_by_test_id("invite-submit").click()
    link = page.get_by_test_id("invite-link")
    expect(link).to_be_visible()
    url = link.input_value()
    assert "#token=" in url
    studio.shots.take(page, "owner", before=lambda: page.evaluate("window.scrollTo(0, 0)"))
    export = page.request.get(studio.base + "/api/owner/export")
    assert export.status == 200 and export.body()[:2] == b"PK"

    erin = studio.browser.new_context(viewport={"width": 1280, "height": 800}).new_page()
    erin.goto(studio.base + "/#token=" + url.split("#token=", 1)[1])
    expect(erin.get_by_test_id("me")).to_have_text("erin")
    expect(erin.get_by_test_id("tab-owner")).to_have_count(0)
    erin.context.close()

    bad = studio.browser.new_context(viewport={"width": 1280, "height": 800}).new_page()
    bad.goto(studio.base + "/#token=not-a-valid-token")
    expect(bad.get_by_test_id("unauthorized")).to_be_visible()
    assert "token" not in bad.url
    studio.shots.take(bad, "invalid-link")
    bad.context.close()
    page.context.close()
    # no script errors and no CSP violations on any page of this module
    assert studio.state.get("errors", []) == []
