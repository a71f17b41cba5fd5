"""Groupwise studio benchmark (issue #10), everything in one invocation:

1. Round readiness: a round's pool (200, then 1,000 Pendulum-v1 behaviours and a real reward
   ensemble) is published through the trainer's hook; how long until the running studio serves
   its tree and suggestions, and until the first previews' clips are rendered.
2. Drawing: the exploration view in headless Chromium, 200 and 1,000 leaves with their edges,
   timed with the Performance API (script, and through the next frame); selection feedback.
3. A user-study stand-in: a scripted user drives the real UI with Playwright, answering from
   the true returns with Eq. 1 noise (paper 000): the pairwise view (the studio's Compare tab,
   max-disagreement pairs) against the groupwise view ('Suggest next', or tree groups).

Usage: ``python -m preflab_bench.studio_groupwise [--answers 15] [--out PATH]``.
Writes benchmarks/results/studio_groupwise.md.
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import statistics
import subprocess
import sys
import tempfile
import time
import urllib.request
from pathlib import Path
from typing import Any

import numpy as np

from preflab.kinds import answer_labels
from preflab.records import Annotator
from preflab.selection.selectors import DisagreementSelector
from preflab.sources.deciders import DecisionConfig, decide
from preflab.sources.studio_bridge import publish_round_pool
from preflab.store import FeedbackStore
from preflab.testing.browser import launch_chromium
from preflab_bench import _paths
from preflab_bench._report import RESULTS
from preflab_bench._studio_groupwise_data import ENV, ensemble_for, pendulum_segments

TOKEN = "tok-bench-" + "x" * 24
# Keystroke-level model of a person (Card, Moran & Newell): seconds per operator.
KLM = {"K": 0.28, "P": 1.1, "M": 1.35}
WATCH_S = 2.0
"""Seconds a person watches a comparison of two clips before answering."""
WATCH_EXTRA_S = 0.5
"""Extra seconds per clip beyond two (a group comparison shows up to 16)."""


def _free_port() -> int:
    import socket

    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def _get(base: str, path: str) -> Any:
    req = urllib.request.Request(base + path, headers={"Authorization": f"Bearer {TOKEN}"})
    with urllib.request.urlopen(req, timeout=120) as r:
        return json.loads(r.read())


def _wait(fn: Any, timeout: float, every: float = 0.05) -> float:
    t0 = time.perf_counter()
    while time.perf_counter() - t0 < timeout:
        if fn():
            return time.perf_counter() - t0
        time.sleep(every)
    raise TimeoutError(f"not done after {timeout} s")


class Studio:
    def __init__(self, run: Path) -> None:
        self.port = _free_port()
        self.base = f"http://127.0.0.1:{self.port}"
        env = dict(os.environ)
        env["PYTHONPATH"] = _paths.pythonpath(env)
        env.setdefault("MUJOCO_GL", "egl")
        self.log = (run / "studio.log").open("wb")
        self.proc = subprocess.Popen(
            [
                sys.executable,
                "-m",
                "preflab.cli.main",
                "studio",
                str(run),
                "--port",
                str(self.port),
            ],
            stdout=self.log,
            stderr=subprocess.STDOUT,
            env=env,
        )

        def up() -> bool:
            try:
                with urllib.request.urlopen(self.base + "/", timeout=2):
                    return True
            except OSError:
                return False

        _wait(up, 60, 0.2)

    def close(self) -> None:
        self.proc.terminate()
        self.proc.wait(timeout=20)
        self.log.close()


def round_ready(store: FeedbackStore, studio: Studio, n: int, rnd: int) -> dict[str, Any]:
    """Publish a round of n behaviours through the hook; time tree + suggestions + previews."""
    segs = pendulum_segments(n, 25, 100 + rnd, round=rnd)
    ens = ensemble_for(segs, seed=rnd)
    t0 = time.perf_counter()
    publish_round_pool(store, rnd, segs, ens)
    t_pub = time.perf_counter() - t0
    store.rounds.publish(rnd, env_id=ENV, env_steps=rnd * 1000, total_steps=10**6, metrics={})
    t0 = time.perf_counter()
    view: dict[str, Any] = {}

    def served() -> bool:
        v = _get(studio.base, "/api/groupwise/round")["view"]
        if v and v["round"] == rnd:
            view.update(v)
            return True
        return False

    t_tree = _wait(served, 600, 0.1)
    firsts = view.get("first_previews") or []
    keys: set[str] = set()

    def previews() -> bool:
        if not firsts:
            return True
        clips = _get(studio.base, "/api/groupwise/clips?ids=" + ",".join(firsts[:12]))["clips"]
        keys.update(c["media_key"] for c in clips)
        return all(c["status"] in ("ready", "failed", "unavailable") for c in clips)

    t_prev = _wait(previews, 600, 0.2) + t_tree
    return {
        "n": n,
        "publish_s": t_pub,
        "tree_s": t_tree,
        "previews_s": t_prev,
        "n_previews": len(firsts),
        "n_suggestions": len(view.get("suggestions", [])),
        "n_group_suggestions": len(view.get("group_suggestions", [])),
        "segments": segs,
    }


def new_page(browser: Any) -> Any:
    page = browser.new_context(viewport={"width": 1280, "height": 800}).new_page()
    page.set_default_timeout(60_000)
    return page


def draw_times(browser: Any, base: str, n: int, repeats: int = 5) -> dict[str, float]:
    """Open the Groups tab (fresh page), then redraw ``repeats`` times; median of each."""
    page = new_page(browser)
    page.goto(f"{base}/#token={TOKEN}")
    page.get_by_test_id("tab-explore").click()
    page.wait_for_selector(f"[data-drawn='{n}']", timeout=120_000)
    first = page.evaluate(
        "Object.fromEntries(performance.getEntriesByType('measure').map(m => [m.name, m.duration]))"
    )
    script, frame = [], []
    for _ in range(repeats):
        page.evaluate("performance.clearMeasures(); window.dispatchEvent(new Event('resize'))")
        page.wait_for_function(
            "() => performance.getEntriesByName('explore-draw').length > 0", timeout=60_000
        )
        m = page.evaluate(
            "Object.fromEntries(performance.getEntriesByType('measure')"
            ".map(m => [m.name, m.duration]))"
        )
        script.append(m["explore-draw-script"])
        frame.append(m["explore-draw"])
    # selection feedback: click a leaf → attributes updated → next frame
    sel, sel_script = [], []
    for k in range(5):
        page.evaluate("performance.clearMeasures()")
        page.locator(".arc-leaf, .arc-bundle").nth(3 * k).dispatch_event("click")
        page.wait_for_function("() => performance.getEntriesByName('explore-select').length > 0")
        sel.append(page.evaluate("performance.getEntriesByName('explore-select')[0].duration"))
        sel_script.append(
            page.evaluate("performance.getEntriesByName('explore-select-script')[0].duration")
        )
    out = {
        "first_script_ms": first.get("explore-draw-script", float("nan")),
        "first_frame_ms": first.get("explore-draw", float("nan")),
        "script_ms": statistics.median(script),
        "frame_ms": statistics.median(frame),
        "select_ms": statistics.median(sel),
        "select_script_ms": statistics.median(sel_script),
        "leaves": page.locator(".arc-leaf:not(.arc-bundle)").count(),
        "bundles": page.locator(".arc-bundle").count(),
        "edges": page.locator(".edge").count(),
    }
    page.context.close()
    return out


def _modelled(n_clips: int, pointing: int, keys: int) -> float:
    watch = WATCH_S + WATCH_EXTRA_S * max(0, n_clips - 2)
    return watch + KLM["M"] + pointing * KLM["P"] + keys * KLM["K"]


def user_study(
    page: Any,
    store: FeedbackStore,
    base: str,
    annotator: str,
    returns: dict[str, float],
    answers: int,
    cfg: DecisionConfig,
    rng: np.random.Generator,
) -> dict[str, dict[str, float]]:
    """The scripted user in both views; label counts and errors from the stored answers."""
    out: dict[str, dict[str, float]] = {}
    keyof = {1.0: "ArrowLeft", 0.0: "ArrowRight", 0.5: "ArrowUp", None: "ArrowDown"}

    def score(qids: list[str]) -> tuple[int, int, int]:
        labels = errors = skipped = 0
        judg = {
            j.query_id: j for _s, j in store.answers.judgements() if j.annotator_id == annotator
        }
        for qid in qids:
            j = judg[qid]
            if j.p is None:
                skipped += 1
                continue
            query = store.queries.get(qid)
            assert query is not None  # answered, so stored
            for lab in answer_labels(query, j.p, (j.id,)):
                labels += 1
                d = returns[lab.a] - returns[lab.b]
                errors += (lab.p > 0.5 and d < 0) or (lab.p < 0.5 and d > 0)
        return labels, errors, skipped

    # --- pairwise: the Compare tab over max-disagreement pair queries
    page.goto(f"{base}/#token={TOKEN}")
    page.get_by_test_id("tab-compare").click()
    done: list[str] = []
    model_s = 0.0
    t0 = time.perf_counter()
    for _ in range(answers):
        pair = page.locator("[data-testid=pair]")
        if done:
            page.wait_for_function(
                "(q) => { const p = document.querySelector('[data-testid=pair]');"
                " return p && p.dataset.queryId && p.dataset.queryId !== q; }",
                arg=done[-1],
                timeout=60_000,
            )
        pair.wait_for(timeout=60_000)
        # a person watches both clips first: the page takes answers once it says it is ready
        page.wait_for_function(
            "() => document.querySelector('[data-testid=view-compare]')?.dataset.ready === 'true'",
            timeout=90_000,
        )
        qid = pair.get_attribute("data-query-id")
        q = store.queries.get(qid)
        assert q is not None  # shown in the Compare tab, so stored
        p, _disc = decide(np.array([returns[q.a[0]]]), np.array([returns[q.b[0]]]), cfg, rng)
        page.keyboard.press(keyof[p])
        done.append(qid)
        model_s += _modelled(2, 0, 1)
    _wait(
        lambda: (
            len({j.query_id for _s, j in store.answers.judgements() if j.annotator_id == annotator})
            >= len(done)
        ),
        60,
    )
    wall = time.perf_counter() - t0
    labels, errors, skipped = score(done)
    out["pairwise view"] = {
        "answers": len(done),
        "skipped": skipped,
        "labels": labels,
        "errors": errors,
        "wall_s": wall,
        "model_s": model_s,
    }

    # --- groupwise: 'Suggest next' (N), else two tree groups clicked on the ring
    before = {q.id for q in store.queries.all()}
    page.get_by_test_id("tab-explore").click()
    page.wait_for_selector("[data-drawn]", timeout=120_000)
    view = _get(base, "/api/groupwise/round")["view"]
    parents = [
        n
        for n in _nodes(view["root"])
        if n["depth"] == view["levels"] - 1 and 2 <= n["size"] <= view["max_group"]
    ]
    model_s = 0.0
    answered = 0
    t0 = time.perf_counter()
    while answered < answers:
        page.keyboard.press("n")
        time.sleep(0.05)
        a = _members(page, "a")
        pointing, keys = 0, 2
        if not a:  # no suggestion left: compose from the tree
            ga, gb = (
                parents[(2 * answered) % len(parents)],
                parents[(2 * answered + 1) % len(parents)],
            )
            for g in (ga, gb):
                page.locator(f".arc-parent[data-node='{g['id']}']").dispatch_event("click")
            pointing, keys = 2, 1
        page.wait_for_function(
            "() => document.querySelectorAll('[data-testid=group-b] [data-testid=member]')"
            ".length > 0"
        )
        a, b = _members(page, "a"), _members(page, "b")
        p, _disc = decide(
            np.array([returns[s] for s in a]), np.array([returns[s] for s in b]), cfg, rng
        )
        page.keyboard.press(keyof[p])
        page.wait_for_function(
            "() => document.querySelectorAll('[data-testid=group-a] [data-testid=member]')"
            ".length == 0",
            timeout=60_000,
        )
        model_s += _modelled(len(a) + len(b), pointing, keys)
        answered += 1
    wall = time.perf_counter() - t0
    qids = [q.id for q in store.queries.all() if q.id not in before]
    labels, errors, skipped = score(qids)
    out["groupwise view"] = {
        "answers": len(qids),
        "skipped": skipped,
        "labels": labels,
        "errors": errors,
        "wall_s": wall,
        "model_s": model_s,
    }
    return out


def _nodes(root: dict[str, Any]) -> list[dict[str, Any]]:
    out = [root]
    for ch in root.get("children", []):
        out += _nodes(ch)
    return out


def _members(page: Any, side: str) -> list[str]:
    return page.locator(f"[data-testid=group-{side}] [data-testid=member]").evaluate_all(
        "els => els.map(e => e.dataset.segment)"
    )


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--answers", type=int, default=24, help="answers per view in the user study")
    ap.add_argument("--noise", type=float, default=0.5, help="Eq. 1 σ as a share of return std")
    ap.add_argument("--out", type=Path, default=RESULTS / "studio_groupwise.md")
    args = ap.parse_args(argv)
    from playwright.sync_api import sync_playwright

    tmp = Path(tempfile.mkdtemp(prefix="preflab-gw-bench-"))
    run = tmp / "run"
    run.mkdir()
    store = FeedbackStore(run / "feedback.db", array_dir=run / "segments")
    store.annotators.add(
        Annotator(id="h-bench", source="human", name="bench", meta={"role": "annotator"}),
        token=TOKEN,
    )
    studio = Studio(run)
    rows: dict[str, Any] = {}
    try:
        with sync_playwright() as pw:
            browser = launch_chromium(pw)
            r1000 = round_ready(store, studio, 1000, 0)
            rows["draw_1000"] = draw_times(browser, studio.base, 1000)
            r200 = round_ready(store, studio, 200, 1)
            rows["draw_200"] = draw_times(browser, studio.base, 200)
            page = new_page(browser)
            rows["ready"] = [r200, r1000]
            # user study on the 200-behaviour round
            segs = r200["segments"]
            returns = {s.id: float(s.true_return) for s in segs}
            ens = ensemble_for(segs, seed=1)
            pairs = DisagreementSelector().select(
                segs, ens, 4 * args.answers, np.random.default_rng(0), round=1
            )
            store.queries.add(pairs)
            sigma = args.noise * float(np.std(list(returns.values())))
            cfg = DecisionConfig(noise_std=sigma)
            rows["study"] = user_study(
                page,
                store,
                studio.base,
                "h-bench",
                returns,
                args.answers,
                cfg,
                np.random.default_rng(7),
            )
            rows["sigma"] = sigma
            browser.close()
    finally:
        studio.close()
        store.close()
    write(args.out, rows, args)
    print(args.out.read_text())
    return 0


def write(path: Path, rows: dict[str, Any], args: argparse.Namespace) -> None:
    lines = [
        "# Studio: groupwise exploration and comparison (paper 000, issue #10)",
        "",
        "Command: `python -m preflab_bench.studio_groupwise"
        f" --answers {args.answers} --noise {args.noise}`",
        "",
        f"Date {time.strftime('%Y-%m-%d %H:%M UTC', time.gmtime())} · {platform.node()} · "
        f"{os.cpu_count()} cores · Python {platform.python_version()} · headless Chromium "
        "(Playwright) · Pendulum-v1 behaviours of 25 steps, a real 3-member reward ensemble. "
        "The studio runs as its own process (real uvicorn, SQLite store, media workers); the "
        "machine is shared with other agents, timings vary ±30%.",
        "",
        "## A new round is ready (trainer publishes → studio serves)",
        "",
        "| behaviours | trainer hook (store pool + ensemble returns) | tree + suggestions served "
        "| + first previews rendered | previews | suggestion edges / group pairs | target |",
        "|---|---|---|---|---|---|---|",
    ]
    for r in rows["ready"]:
        target = "≤ 10 s: " + ("yes" if r["previews_s"] <= 10 else "no") if r["n"] == 200 else "–"
        lines.append(
            f"| {r['n']} | {r['publish_s']:.2f} s | {r['tree_s']:.2f} s | {r['previews_s']:.2f} s "
            f"| {r['n_previews']} | {r['n_suggestions']} / {r['n_group_suggestions']} | {target} |"
        )
    lines += [
        "",
        "Served = `GET /api/groupwise/round` returns the new round (DTW on the observations, "
        "tree, representatives, spreads, suggestion edges and ranked group pairs, all computed "
        "once by the studio's watcher thread and cached). First previews = the clips of the "
        "outer ring's representatives and of the first suggested pair, rendered by the media "
        "workers. The studio's timings of the build are in its log.",
        "",
        "## Drawing the exploration view (headless Chromium, Performance API)",
        "",
        "| behaviours | first draw: script / through next frame | redraw (median of 5): script / "
        "frame | selection: handler / until its frame is shown | arcs drawn | edges | target |",
        "|---|---|---|---|---|---|---|",
    ]
    for n in (200, 1000):
        d = rows[f"draw_{n}"]
        target = "< 200 ms: " + ("yes" if d["first_frame_ms"] < 200 else "no") if n == 200 else "–"
        lines.append(
            f"| {n} | {d['first_script_ms']:.0f} / {d['first_frame_ms']:.0f} ms "
            f"| {d['script_ms']:.0f} / {d['frame_ms']:.0f} ms "
            f"| {d['select_script_ms']:.1f} / {d['select_ms']:.1f} ms "
            f"| {d['leaves']} leaf arcs + {d['bundles']} aggregated arcs | {d['edges']} "
            f"| {target} |"
        )
    lines += [
        "",
        "Through next frame = from the start of drawing to the second `requestAnimationFrame` "
        "after it, i.e. once the first frame showing the new SVG (style, layout, paint) has "
        "been produced. Selection: handler = the click's synchronous work (both groups, the "
        "arcs' colours and the comparison tiles updated), well inside one 16.7 ms frame; the "
        "second number waits the same two animation frames from the click, so it includes up "
        "to two frame intervals of idle waiting. Above 400 "
        "behaviours the inner ring shows each leaf's parent as one aggregated arc; the single "
        "behaviours' arcs are drawn too (counted above) and appear when zoomed in 3× or more.",
        "",
        "## User-study stand-in: the scripted user in the real UI",
        "",
        f"Both views on the round of 200. The scripted user answers from the true returns with "
        f"Eq. 1 noise σ = {rows['sigma']:.2f} ({args.noise} × the std of the returns) and the "
        "overlap rule of the simulated decision makers (skip = ↓ can't tell when more than 25% "
        "of the cross pairs disagree). Pairwise view: the Compare tab over max-disagreement pair "
        "queries. Groupwise view: `N` (Suggest next) then the answer key; when suggestions run "
        "out, two tree groups clicked on the ring. Label errors: labels whose preferred side has "
        "the lower true return.",
        "",
        "Modelled time = a person's time by the keystroke-level model: per answer watching "
        f"{WATCH_S:.1f} s (+{WATCH_EXTRA_S} s per clip beyond two), one mental decision "
        f"{KLM['M']} s, {KLM['K']} s per key, {KLM['P']} s per pointing click. Wall = the UI's "
        "own time under Playwright (server, rendering and video loading included, no person).",
        "",
        "| view | answers | skipped | labels | label error | labels / min (modelled) "
        "| labels / min (wall, UI only) |",
        "|---|---|---|---|---|---|---|",
    ]
    for name, s in rows["study"].items():
        err = s["errors"] / s["labels"] if s["labels"] else float("nan")
        lines.append(
            f"| {name} | {s['answers']} | {s['skipped']} | {s['labels']} | {err:.1%} "
            f"| {60 * s['labels'] / s['model_s']:.1f} | {60 * s['labels'] / s['wall_s']:.1f} |"
        )
    pw_, gw_ = rows["study"]["pairwise view"], rows["study"]["groupwise view"]
    ratio = (gw_["labels"] / gw_["model_s"]) / (pw_["labels"] / pw_["model_s"])
    lines += [
        "",
        f"Groupwise / pairwise labels per modelled minute: {ratio:.2f}×.",
        "",
    ]
    path.write_text("\n".join(lines))


if __name__ == "__main__":
    raise SystemExit(main())
