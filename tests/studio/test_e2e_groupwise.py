"""End to end, groupwise (issue #10): the real studio process over a store holding a round's
pool as the trainer's hook publishes it (200 Pendulum-v1 behaviours, a real reward ensemble),
and Debian's Chromium driven by Playwright. The tests share one studio and run in order:

1. the exploration view draws 200 leaves with their edges (Performance API timing recorded);
   clicking a parent selects exactly its leaves;
2. clicking a leaf toggles it; a member moves to the other side;
3. 'Suggest next' fills the pair of groups that group_score ranks first;
4. the ← key stores one studio group query + one judgement = max(m, n) labels, and the history
   edge appears coloured from the preferred to the unpreferred behaviour;
5. nothing the page holds or receives contains a true reward or a predicted return;
6. a new round rebuilds the tree; history edges of behaviours still in the pool stay;
7. bad groups get a clear 4xx and store nothing; two annotators answering the same suggestion
   at once are both stored, each with its own provenance.

Screenshots (1280x800, 1920x1080) go to a temporary directory, and to docs/screenshots/ when
PREFLAB_SCREENSHOTS=1.
"""

from __future__ import annotations

import dataclasses
import json
import threading
import urllib.error
import urllib.request
from collections.abc import Iterator
from pathlib import Path
from typing import Any
from urllib.parse import parse_qs, urlsplit

import numpy as np
import pytest

from preflab.kinds import answer_labels
from preflab.records import Annotator
from preflab.reward.protocol import pair_variance
from preflab.selection.features import behaviour_distances
from preflab.selection.scoring import group_score
from preflab.selection.tree import BehaviourTree
from preflab.store import FeedbackStore
from preflab_bench._studio_groupwise_data import publish_pendulum_round
from tests.studio.e2e_support import studio_browser, wait_until
from tests.studio.test_e2e import Shots, playwright_sync

expect = playwright_sync.expect
N = 200
PREFERRED = "#059669"
UNPREFERRED = "#e11d48"


@dataclasses.dataclass
class GW:
    run: Path
    base: str
    store: FeedbackStore
    tokens: dict[str, str]
    ids: dict[str, str]
    browser: Any
    shots: Shots
    state: dict[str, Any]
    page: Any = None
    responses: list[str] = dataclasses.field(default_factory=list)
    requests: list[str] = dataclasses.field(default_factory=list)

    def api(self, who: str, method: str, path: str, body: Any = None) -> tuple[int, Any]:
        data = None if body is None else json.dumps(body).encode()
        req = urllib.request.Request(self.base + path, data=data, method=method)
        req.add_header("Authorization", f"Bearer {self.tokens[who]}")
        if data is not None:
            req.add_header("Content-Type", "application/json")
        try:
            with urllib.request.urlopen(req, timeout=30) as r:
                return r.status, json.loads(r.read() or b"null")
        except urllib.error.HTTPError as e:
            return e.code, json.loads(e.read() or b"null")


@pytest.fixture(scope="module")
def gw(tmp_path_factory: pytest.TempPathFactory) -> Iterator[GW]:
    tmp = tmp_path_factory.mktemp("studio-groupwise")
    run = tmp / "run"
    run.mkdir()
    (tmp / "shots").mkdir()
    store = FeedbackStore(run / "feedback.db", array_dir=run / "segments")
    tokens = {"bob": "tok-bob-" + "b" * 24, "carol": "tok-carol-" + "c" * 24}
    ids = {name: f"h-{name}" for name in tokens}
    for name, token in tokens.items():
        store.annotators.add(
            Annotator(id=ids[name], source="human", name=name, meta={"role": "annotator"}),
            token=token,
        )
    segs = publish_pendulum_round(store, N, 0)
    store.rounds.publish(0, env_id="Pendulum-v1", env_steps=N * 25, total_steps=20_000, metrics={})
    try:
        with studio_browser(run, tmp / "studio.log") as (base, browser):
            yield GW(
                run, base, store, tokens, ids, browser, Shots(tmp / "shots"), {"segments": segs}
            )
    finally:
        store.close()


def round_view(gw: GW, who: str = "bob") -> dict[str, Any]:
    status, body = gw.api(who, "GET", "/api/groupwise/round")
    assert status == 200, body
    return body["view"]


def nodes(root: dict[str, Any]) -> Iterator[dict[str, Any]]:
    yield root
    for ch in root.get("children", []):
        yield from nodes(ch)


def click_arc(page: Any, selector: str) -> None:
    """A real pointer click at the arc's centroid (SVG → screen coordinates)."""
    xy = page.evaluate(
        """(sel) => {
            const el = document.querySelector(sel);
            const p = el.ownerSVGElement.createSVGPoint();
            p.x = +el.dataset.cx; p.y = +el.dataset.cy;
            const q = p.matrixTransform(el.getScreenCTM());
            return [q.x, q.y];
        }""",
        selector,
    )
    page.mouse.click(xy[0], xy[1])


def members(page: Any, side: str) -> list[str]:
    return page.locator(f"[data-testid=group-{side}] [data-testid=member]").evaluate_all(
        "els => els.map(e => e.dataset.segment)"
    )


def studio_queries(gw: GW, who: str) -> list[Any]:
    return [
        q
        for q in gw.store.queries.all()
        if q.meta.get("created_by") == "studio" and q.meta.get("annotator_id") == gw.ids[who]
    ]


# ----------------------------------------------------------------------------------------------


def test_draw_and_parent_selects_exactly_its_leaves(gw: GW) -> None:
    page = gw.browser.new_context(viewport={"width": 1280, "height": 800}).new_page()
    page.set_default_timeout(30_000)
    errors: list[str] = []
    page.on("pageerror", lambda exc: errors.append(str(exc)))
    page.on("response", lambda r: gw.responses.append(r.text()) if "/api/" in r.url else None)
    page.on("request", lambda r: gw.requests.append(r.url))
    gw.state["errors"] = errors
    gw.page = page
    page.goto(f"{gw.base}/#token={gw.tokens['bob']}")
    page.get_by_test_id("tab-explore").click()
    expect(page.get_by_test_id("radial")).to_have_attribute("data-drawn", str(N), timeout=30_000)
    draw = page.evaluate(
        "Object.fromEntries(performance.getEntriesByType('measure')"
        ".filter(m => m.name.startsWith('explore-draw')).map(m => [m.name, m.duration]))"
    )
    gw.state["draw_ms"] = draw
    print(f"\nexploration view, {N} leaves: {draw}")
    assert page.locator(".arc-leaf").count() == N
    view = round_view(gw)
    assert page.locator(".edge-suggestion").count() == len(view["suggestions"]) > 0
    levels = view["levels"]
    parent = next(
        n for n in nodes(view["root"]) if n["depth"] == levels - 1 and 3 <= n["size"] <= 8
    )
    click_arc(page, f".arc-parent[data-node='{parent['id']}']")
    expect(page.get_by_test_id("count-a")).to_have_text(f"{parent['size']} / 8")
    assert members(page, "a") == parent["segments"]
    assert members(page, "b") == []
    selected = page.locator(".arc-leaf[data-sel=a]").evaluate_all(
        "els => els.map(e => e.dataset.segment)"
    )
    assert sorted(selected) == sorted(parent["segments"])
    expect(page.get_by_test_id("spread-a")).to_contain_text("as far apart as a random pair")
    gw.state["parent"] = parent


def test_toggle_leaf_and_move_member(gw: GW) -> None:
    page = gw.page
    parent = gw.state["parent"]
    first = parent["segments"][0]
    click_arc(page, f".arc-leaf[data-segment='{first}']")  # in the left group: removed
    expect(page.get_by_test_id("count-a")).to_have_text(f"{parent['size'] - 1} / 8")
    assert first not in members(page, "a")
    expect(page.locator(f".arc-leaf[data-segment='{first}']")).not_to_have_attribute(
        "data-sel", "a"
    )
    # the target is now the (empty) right side: a leaf click adds to it
    other = next(s for s in round_view(gw)["leaf_order"] if s not in parent["segments"])
    click_arc(page, f".arc-leaf[data-segment='{other}']")
    expect(page.get_by_test_id("count-b")).to_have_text("1 / 8")
    assert members(page, "b") == [other]
    expect(page.locator(f".arc-leaf[data-segment='{other}']")).to_have_attribute("data-sel", "b")
    # move a left member to the right
    moved = members(page, "a")[0]
    page.locator(f"[data-testid=group-a] [data-segment='{moved}'] [data-testid=move]").click()
    expect(page.get_by_test_id("count-b")).to_have_text("2 / 8")
    assert members(page, "b") == [other, moved]
    assert moved not in members(page, "a")
    gw.shots.take(gw.page, "groupwise-edit")


def test_suggest_next_fills_the_top_group_pair(gw: GW) -> None:
    page = gw.page
    page.get_by_test_id("clear").click()
    page.keyboard.press("n")
    expect(page.get_by_test_id("count-a")).not_to_have_text("0 / 8")
    a, b = members(page, "a"), members(page, "b")
    # the server's ranking, recomputed here from what the trainer published
    pool = gw.store.rounds.pool(0)
    ids = pool["segment_ids"]
    segs = gw.store.segments.get(ids)
    v = pair_variance(np.asarray(pool["member_returns"]))
    tree = BehaviourTree.build(behaviour_distances(segs), ids)
    groups = tree.binary_groups(min_size=2, max_size=8)
    best = max(
        (
            (group_score(v, list(ga), list(gb)), ga, gb)
            for k, ga in enumerate(groups)
            for gb in groups[k + 1 :]
            if not set(ga) & set(gb)
        ),
        key=lambda t: t[0],
    )
    want = {frozenset(ids[r] for r in best[1]), frozenset(ids[r] for r in best[2])}
    assert {frozenset(a), frozenset(b)} == want
    gw.state["suggested"] = (a, b)
    page.wait_for_function(
        "() => [...document.querySelectorAll('.gw-tile video')].every(v => v.readyState >= 2)",
        timeout=30_000,
    )
    parent = next(
        n
        for n in nodes(round_view(gw)["root"])
        if n["depth"] == 1 and n["size"] > 8  # hover a big group: the representative strip
    )
    sel = f".arc-parent[data-node='{parent['id']}']"

    def hover_parent() -> None:
        page.mouse.move(0, 0)
        page.wait_for_timeout(250)
        xy = page.evaluate(
            """(sel) => { const el = document.querySelector(sel);
                const p = el.ownerSVGElement.createSVGPoint();
                p.x = +el.dataset.cx; p.y = +el.dataset.cy;
                const q = p.matrixTransform(el.getScreenCTM()); return [q.x, q.y]; }""",
            sel,
        )
        page.mouse.move(xy[0], xy[1])
        expect(page.get_by_test_id("preview")).to_have_attribute("data-node", parent["id"])
        expect(page.locator("[data-testid=preview] video")).to_have_count(3)
        page.wait_for_function(
            "() => [...document.querySelectorAll('[data-testid=preview] video')]"
            ".every(v => v.readyState >= 2)",
            timeout=30_000,
        )

    hover_parent()
    gw.shots.take(page, "groupwise-compare", before=hover_parent)


def test_the_next_suggestions_clips_are_rendered_while_the_person_watches(gw: GW) -> None:
    """#25: a suggestion's clips were rendered only once it was shown (a third of a Groups
    session went to loading them); the page asks for the next two suggestions' clips early."""
    sugg = round_view(gw)["group_suggestions"]
    assert [frozenset(x) for x in gw.state["suggested"]] == [frozenset(sugg[0][k]) for k in "ab"]
    upcoming = {s for g in sugg[1:3] for s in (*g["a"], *g["b"])} - {
        s for k in "ab" for s in sugg[0][k]
    }
    assert len(upcoming) > 3  # more than a hover preview's three clips could explain

    def prefetched() -> set[str]:
        asked: set[str] = set()
        for url in list(gw.requests):
            q = parse_qs(urlsplit(url).query)
            if urlsplit(url).path.endswith("/api/groupwise/clips") and q.get("priority") == ["1"]:
                asked |= set(q["ids"][0].split(","))
        return asked

    for _ in range(100):  # Playwright delivers the page's requests while it waits
        if upcoming <= prefetched():
            break
        gw.page.wait_for_timeout(200)
    assert upcoming <= prefetched(), f"never asked for {sorted(upcoming - prefetched())}"


def test_key_answer_is_one_group_judgement_and_a_history_edge(gw: GW) -> None:
    page = gw.page
    a, b = gw.state["suggested"]
    page.mouse.move(2, 2)
    page.keyboard.press("ArrowLeft")
    qs = wait_until(lambda: studio_queries(gw, "bob"), 20, "bob's group query")
    assert len(qs) == 1
    q = qs[0]
    assert q.kind == "group" and list(q.a) == a and list(q.b) == b
    assert q.meta["groups"] == {"a": a, "b": b}
    assert q.meta["suggestion"]["rank"] == 0 and q.meta["edited"] is False
    # the studio stores the query, then the judgement (two writes): wait for the second
    js = wait_until(
        lambda: [j for _s, j in gw.store.answers.judgements() if j.query_id == q.id],
        20,
        "bob's group judgement",
    )
    assert len(js) == 1 and js[0].p == 1.0 and js[0].annotator_id == gw.ids["bob"]
    labels = answer_labels(q, 1.0, (js[0].id,))
    assert len(labels) == max(len(a), len(b))
    edges = page.locator("[data-testid=history-edge]")
    expect(edges).to_have_count(len(labels))
    expect(page.get_by_test_id("count-a")).to_have_text("0 / 8")
    for k in range(edges.count()):
        e = edges.nth(k)
        frm, to = e.get_attribute("data-from"), e.get_attribute("data-to")
        assert frm in a and to in b  # left preferred: every edge runs a-member → b-member
        grad = page.evaluate(
            """(id) => { const g = document.getElementById(id);
                const s = g.querySelectorAll('stop');
                return {x1: +g.getAttribute('x1'), y1: +g.getAttribute('y1'),
                        x2: +g.getAttribute('x2'), y2: +g.getAttribute('y2'),
                        c0: s[0].getAttribute('stop-color'), c1: s[1].getAttribute('stop-color')}; }""",
            e.get_attribute("data-gradient"),
        )
        assert (grad["c0"], grad["c1"]) == (PREFERRED, UNPREFERRED)
        leaf = {
            s: page.locator(f".arc-leaf[data-segment='{s}']").evaluate(
                "el => [+el.dataset.cx, +el.dataset.cy]"
            )
            for s in (frm, to)
        }
        d_from = np.hypot(grad["x1"] - leaf[frm][0], grad["y1"] - leaf[frm][1])
        d_to = np.hypot(grad["x1"] - leaf[to][0], grad["y1"] - leaf[to][1])
        assert d_from < d_to  # the gradient starts (preferred colour) at the preferred leaf
    # two more answers (right preferred, equal) and a group being composed, for the picture
    n_edges = len(labels)
    for key in ("ArrowRight", "ArrowUp"):
        page.keyboard.press("n")
        expect(page.get_by_test_id("count-b")).not_to_have_text("0 / 8")
        m = max(len(members(page, "a")), len(members(page, "b")))
        page.keyboard.press(key)
        n_edges += m
        expect(edges).to_have_count(n_edges)
    assert page.locator(".edge-equal").count() > 0
    click_arc(page, f".arc-parent[data-node='{gw.state['parent']['id']}']")
    expect(page.get_by_test_id("count-a")).to_have_text(f"{gw.state['parent']['size']} / 8")
    page.mouse.move(2, 2)
    expect(page.get_by_test_id("preview")).to_be_hidden()
    page.wait_for_function(
        "() => [...document.querySelectorAll('.gw-tile video')].every(v => v.readyState >= 2)",
        timeout=30_000,
    )
    gw.shots.take(page, "groupwise-explore")
    page.get_by_test_id("clear").click()
    assert not gw.state["errors"], gw.state["errors"]


def _numbers(x: Any) -> Iterator[float]:
    if isinstance(x, bool):
        return
    if isinstance(x, int | float):
        yield float(x)
    elif isinstance(x, dict):
        for v in x.values():
            yield from _numbers(v)
    elif isinstance(x, list):
        for v in x:
            yield from _numbers(v)


GEOMETRY = ("d", "data-cx", "data-cy", "x1", "y1", "x2", "y2", "viewBox", "transform")


def test_no_reward_reaches_the_page(gw: GW) -> None:
    """No true reward or return and no predicted return in any API answer the page got, nor in
    the page's text or (non-geometry) attributes."""
    page = gw.page
    pool = gw.store.rounds.pool(0)
    segs = gw.state["segments"]
    secret = np.array(
        [s.true_return for s in segs]
        + [float(r) for s in segs for r in s.true_rewards]
        + [float(x) for row in pool["member_returns"] for x in row]
    )
    sent = []
    for body in gw.responses:
        try:
            sent += list(_numbers(json.loads(body)))
        except ValueError:
            continue
    sent_arr = np.array(sorted(set(sent)))
    assert len(sent_arr) > 100  # the tree view, edges and spreads were captured
    close = np.isclose(sent_arr[:, None], secret[None, :], rtol=1e-6, atol=0).any(1)
    assert not close.any(), f"reward-like values sent: {sent_arr[close][:5]}"
    shown = page.evaluate(
        """(geometry) => {
            const out = [document.body.innerText];
            for (const el of document.querySelectorAll('*'))
                for (const a of el.attributes) if (!geometry.includes(a.name)) out.push(a.value);
            return out.join('\\n'); }""",
        list(GEOMETRY),
    )
    for x in secret:
        if x <= -0.01 or x >= 1:  # (small positive numbers: spreads like "0.05×")
            assert f"{x:.2f}" not in shown, f"reward-like value {x:.2f} on the page"
    blob = "\n".join(gw.responses)
    assert "true_return" not in blob and "member_returns" not in blob and "reward" not in blob


def test_new_round_rebuilds_and_keeps_history_of_pooled_behaviours(gw: GW) -> None:
    page = gw.page
    mine = studio_queries(gw, "bob")
    keep = list(dict.fromkeys(s for q in mine for s in (*q.a, *q.b)))
    old = gw.store.rounds.pool(0)["segment_ids"]
    extra = [s for s in old if s not in keep][:40]
    new = publish_pendulum_round(gw.store, 60, 1)
    from preflab.sources.studio_bridge import publish_round_pool

    pool_segs = gw.store.segments.get(keep + extra) + new
    publish_round_pool(gw.store, 1, pool_segs, None)
    gw.store.rounds.publish(1, env_id="Pendulum-v1", env_steps=9000, total_steps=20_000, metrics={})
    expect(page.get_by_test_id("explore-title")).to_have_attribute(
        "data-round", "1", timeout=30_000
    )
    expect(page.get_by_test_id("radial")).to_have_attribute("data-drawn", str(len(pool_segs)))
    answered = {j.query_id for _s, j in gw.store.answers.judgements() if j.p is not None}
    n_edges = sum(max(len(q.a), len(q.b)) for q in mine if q.id in answered)
    expect(page.locator("[data-testid=history-edge]")).to_have_count(n_edges)
    expect(page.get_by_test_id("suggest")).to_be_disabled()  # no ensemble this round
    gw.state["round1_new"] = [s.id for s in new]
    gw.state["round0_only"] = [s for s in old if s not in keep + extra]


def test_bad_groups_are_refused_and_nothing_is_stored(gw: GW) -> None:
    pool = gw.store.rounds.pool(1)["segment_ids"]
    before = (gw.store.queries.count(), gw.store.answers.count())

    def post(a: list[str], b: list[str], rnd: int = 1) -> tuple[int, Any]:
        body = {"round": rnd, "a": a, "b": b, "p": 1.0, "client_key": "bad-input-0001"}
        return gw.api("bob", "POST", "/api/groupwise/judgements", body)

    cases = {
        "overlap": post(pool[:3], pool[2:5]),
        "empty": post([], pool[:2]),
        "too many": post(pool[:9], pool[9:11]),
        "other round": post(pool[:2] + gw.state["round0_only"][:1], pool[3:5]),
        # an earlier round still takes answers (tests/studio/test_groupwise_routes.py), but only
        # about its own behaviours: round 1's new ones named as round 0's are refused
        "old round, new behaviours": post(
            gw.state["round1_new"][:2], gw.state["round1_new"][2:4], rnd=0
        ),
        "duplicate": post([pool[0], pool[0]], pool[1:3]),
    }
    for name, (status, body) in cases.items():
        assert 400 <= status < 500, (name, status, body)
        assert isinstance(body["detail"], str) and len(body["detail"]) > 20, (name, body)
    assert "both groups" in cases["overlap"][1]["detail"]
    assert "at most 8" in cases["too many"][1]["detail"]
    assert "not in round 1" in cases["other round"][1]["detail"]
    assert (gw.store.queries.count(), gw.store.answers.count()) == before


def test_two_annotators_answer_the_same_groups_at_once(gw: GW) -> None:
    pool = gw.store.rounds.pool(1)["segment_ids"]
    a, b = pool[:3], pool[3:5]
    out: dict[str, tuple[int, Any]] = {}
    barrier = threading.Barrier(2)

    def answer(who: str, p: float) -> None:
        barrier.wait()
        body = {"round": 1, "a": a, "b": b, "p": p, "client_key": f"same-{who}-0001"}
        out[who] = gw.api(who, "POST", "/api/groupwise/judgements", body)

    ts = [threading.Thread(target=answer, args=(w, p)) for w, p in (("bob", 1.0), ("carol", 0.0))]
    for t in ts:
        t.start()
    for t in ts:
        t.join(30)
    assert out["bob"][0] == out["carol"][0] == 201, out
    assert out["bob"][1]["n_labels"] == out["carol"][1]["n_labels"] == 3
    qb, qc = (
        gw.store.queries.get(out["bob"][1]["query_id"]),
        gw.store.queries.get(out["carol"][1]["query_id"]),
    )
    assert qb.id != qc.id
    assert qb.meta["annotator_id"] == gw.ids["bob"] and qc.meta["annotator_id"] == gw.ids["carol"]
    jb = gw.store.answers.get(out["bob"][1]["judgement_id"])[1]
    jc = gw.store.answers.get(out["carol"][1]["judgement_id"])[1]
    assert (jb.annotator_id, jb.p, jb.query_id) == (gw.ids["bob"], 1.0, qb.id)
    assert (jc.annotator_id, jc.p, jc.query_id) == (gw.ids["carol"], 0.0, qc.id)
    # a resend with the same client key is the same row
    again = gw.api(
        "bob",
        "POST",
        "/api/groupwise/judgements",
        {"round": 1, "a": a, "b": b, "p": 1.0, "client_key": "same-bob-0001"},
    )
    assert again[0] == 201 and again[1]["duplicate"] is True
