"""A study participant in Chromium (issue #61), at a person's pace: the Prolific link, the
consent page, instructions and a practice pair with feedback, two answers in the studio with
the study's progress shown (and only the tabs a study asks for), then the completion page with
the code; the owner's study section on the Owner page; the page a revoked participant's link
shows. Screenshots (1280x800 and 1920x1080) of the consent, practice, studio, completion, Owner
and revoked views go to a temporary dir, and to
docs/screenshots/study-*.png with PREFLAB_SCREENSHOTS=1."""

from __future__ import annotations

import os
import shutil
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import numpy as np
import pytest
from playwright import sync_api as playwright_sync

from preflab.records import Judgement, Query
from preflab.store import FeedbackStore
from preflab.studio import study as S
from preflab.studio.config import StudioConfig
from preflab.studio.study_config import StudyConfig
from preflab.testing.browser import launch_chromium
from tests.studio.api_server import Studio, start_studio

expect = playwright_sync.expect
REPO = Path(__file__).resolve().parents[2]
SIZES = {"": (1280, 800), "-1920": (1920, 1080)}
PROLIFIC = "PROLIFIC_PID=5f3c1e2d9a8b7c6d5e4f3a2b&STUDY_ID=st-1&SESSION_ID=se-9"


def shoot(page: Any, tmp: Path, name: str) -> None:
    original = page.viewport_size
    for suffix, (w, h) in SIZES.items():
        page.set_viewport_size({"width": w, "height": h})
        page.wait_for_timeout(300)  # layout settles (not an assertion)
        path = tmp / f"study-{name}{suffix}.png"
        page.screenshot(path=str(path))
        if os.environ.get("PREFLAB_SCREENSHOTS") == "1":
            out = REPO / "docs" / "screenshots"
            out.mkdir(parents=True, exist_ok=True)
            shutil.copy(path, out / path.name)
    page.set_viewport_size(original)


def seed_crowd(store: FeedbackStore) -> dict[str, str]:
    """Eight more people answer 24 pairs through the store as the API would store them: five
    careful, one careless (random and fast), one adversary (flips), one who always picks left."""
    segs = sorted(store.segments.info([s.id for s in store.segments.all()]))
    rets = store.studies.true_returns(segs)
    pairs = [(a, b) for i, a in enumerate(segs) for b in segs[i + 1 :]][:24]
    store.queries.add(
        [
            Query(id=f"c{k:02d}", kind="pair", a=(a,), b=(b,), round=2)
            for k, (a, b) in enumerate(pairs)
        ]
    )
    gaps = sorted(range(len(pairs)), key=lambda k: -abs(rets[pairs[k][0]] - rets[pairs[k][1]]))
    store.studies.add_gold(
        (f"c{k:02d}", 1.0 if rets[pairs[k][0]] > rets[pairs[k][1]] else 0.0, "oracle")
        for k in gaps[:8]
    )
    loaded = S.load(store)
    assert loaded is not None
    study, config = loaded
    rng = np.random.default_rng(4)
    kinds = ["careful"] * 5 + ["careless", "adversary", "lefty"]
    ids: dict[str, str] = {}
    for n, kind in enumerate(kinds):
        j = S.join(
            store,
            study,
            config,
            {"PROLIFIC_PID": f"60a1b2c3d4e5f60718293a{n:02d}"},
            cookie_key=None,
        )
        aid = j.participant.annotator_id
        ids[aid] = kind
        store.studies.consent(aid, consent_sha256=S.consent_sha256(config), token_hash=f"x{n}")
        store.studies.practice_done(aid)
        rows = []
        for k, (a, b) in enumerate(pairs):
            truth = 1.0 if rets[a] > rets[b] else 0.0
            p = {
                "careful": truth if rng.random() < 0.9 else 1.0 - truth,
                "careless": float(rng.integers(0, 2)),
                "adversary": 1.0 - truth,
                "lefty": 1.0,
            }[kind]
            rt = float(rng.uniform(0.4, 0.9) if kind == "careless" else rng.uniform(3.0, 7.0))
            rows.append(
                Judgement(
                    id=f"s-{n}-{k}",
                    query_id=f"c{k:02d}",
                    annotator_id=aid,
                    source="human",
                    p=p,
                    response_time_s=rt,
                )
            )
        store.answers.add(rows)
    return ids


@pytest.fixture
def studio(tmp_path) -> Iterator[Studio]:
    s = start_studio(
        tmp_path,
        static_dir=REPO / "src" / "preflab" / "studio" / "static",
        config=StudioConfig(min_answer_s=0.5),
    )
    s.store.settings.set("task", {"text": "Make the agent move forward without falling."})
    yield s
    s.stop()


@pytest.fixture
def browser() -> Iterator[Any]:
    pw = playwright_sync.sync_playwright().start()
    b = launch_chromium(pw)
    yield b
    b.close()
    pw.stop()


def test_a_participant_goes_from_the_link_to_the_completion_code(studio, browser, tmp_path) -> None:
    secret = S.create(
        studio.store,
        StudyConfig(
            title="Which clip moves better?",
            practice_pairs=1,
            quota_answers=2,
            completion_code="C1A2B3C4",
            redirect_url="https://app.prolific.com/submissions/complete?cc=C1A2B3C4",
            clip_s=2.0,
        ),
    )
    page = browser.new_context(viewport={"width": 1280, "height": 800}).new_page()
    page.set_default_timeout(30_000)
    errors: list[str] = []
    page.on("pageerror", lambda exc: errors.append(str(exc)))
    page.goto(f"{studio.url}/s/{secret}?{PROLIFIC}")
    expect(page.get_by_role("button", name="I agree — continue")).to_be_visible()
    shoot(page, tmp_path, "consent")
    page.get_by_role("button", name="I agree — continue").click()
    expect(page.get_by_role("link", name="Start the practice (1 pairs)")).to_be_visible()
    page.get_by_role("link", name="Start the practice (1 pairs)").click()
    expect(page.locator("video")).to_have_count(2)
    shoot(page, tmp_path, "practice")
    page.wait_for_timeout(1500)  # watching the practice pair
    page.get_by_role("button", name="Left is better").click()  # the oracle's best is left
    expect(page.get_by_text("Correct")).to_be_visible()
    shoot(page, tmp_path, "practice-feedback")
    page.get_by_role("link", name="Start the study").click()
    expect(page.get_by_test_id("study-progress")).to_have_text("Study progress: 0 of 2 answers")
    # a study asks only its pairs: no Groups or Rate tab for a participant
    expect(page.get_by_test_id("tab-explore")).to_have_count(0)
    expect(page.get_by_test_id("tab-rate")).to_have_count(0)
    expect(page.get_by_test_id("tab-compare")).to_be_visible()
    for k in range(2):
        expect(page.get_by_test_id("view-compare")).to_have_attribute(
            "data-ready", "true", timeout=60_000
        )
        if k == 0:
            shoot(page, tmp_path, "studio")
        page.wait_for_timeout(1200)  # deciding
        page.keyboard.press("ArrowLeft")
        page.wait_for_timeout(600)
    expect(page.get_by_text("C1A2B3C4")).to_be_visible(timeout=30_000)  # sent there on its own
    assert page.url.endswith("/study/done")
    shoot(page, tmp_path, "completion")
    (p,) = studio.store.studies.participants(S.STUDY_ID)
    assert p.completed_at is not None and p.platform["SESSION_ID"] == "se-9"
    assert len(studio.store.answers.by_annotator(p.annotator_id)) == 2
    crowd = seed_crowd(studio.store)
    # the owner sees them on the Owner page's study section, with the flagged people
    owner = browser.new_context(viewport={"width": 1280, "height": 800}).new_page()
    owner.goto(f"{studio.url}/#token={studio.tokens['owner']}")
    owner.get_by_test_id("tab-owner").click()
    row = owner.get_by_test_id(f"study-row-{p.annotator_id}")
    expect(row).to_contain_text("5f3c1e2d9a8b7c6d5e4f3a2b")
    for aid, kind in crowd.items():  # the careless, the adversary and the lefty are flagged
        flags = owner.get_by_test_id(f"study-row-{aid}").locator(".flag")
        if kind == "careful":
            expect(flags).to_have_count(0)
        else:
            expect(flags.first).to_be_visible()
    owner.get_by_test_id("study-panel").scroll_into_view_if_needed()
    owner.evaluate("window.scrollBy(0, -140)")  # the sticky header would hide its title
    shoot(owner, tmp_path, "owner")
    # the owner revokes them: their study link, opened again in a new browser, says why
    revoked = owner.evaluate(
        "([id, token]) => fetch(`/api/owner/annotators/${id}/revoke`, {method: 'POST', "
        "headers: {authorization: `Bearer ${token}`}}).then(r => r.status)",
        [p.annotator_id, studio.tokens["owner"]],
    )
    assert revoked == 200
    again = browser.new_context(viewport={"width": 1280, "height": 800}).new_page()
    again.goto(f"{studio.url}/s/{secret}?{PROLIFIC}")
    expect(again.get_by_text("ended by the researcher")).to_be_visible()
    expect(again.get_by_role("button", name="I agree — continue")).to_have_count(0)
    shoot(again, tmp_path, "revoked")
    assert errors == []
