"""The scripted person of ``preflab bench studio_session``: headless Chromium on the studio's
owner link, answering at a person's pace, and what the page made them wait for.

The person never sees a reward: the page shows query ids and clips; the bench reads the true
returns (or a target the env's reward does not hold) of the two segments from the run's store
by the query id on screen.
"""

from __future__ import annotations

import contextlib
import dataclasses
import time
from collections.abc import Callable
from typing import Any

import numpy as np

from preflab.store import FeedbackStore

MONITOR = """
window.__mon = [];
(() => {
  let last = '';
  const tick = () => {
    const view = document.querySelector('[data-testid=view-compare]');
    const pair = view && view.querySelector('[data-testid=pair]');
    const s = {
      q: pair ? pair.dataset.queryId : null,
      ready: view ? view.dataset.ready === 'true' : false,
      spin: !!(view && view.querySelector('.stage .clip-overlay .spinner')),
      empty: !!(view && view.querySelector('[data-testid=empty]')),
    };
    const key = JSON.stringify(s);
    if (key !== last) {
      last = key;
      window.__mon.push({ t: performance.now(), ...s });
    }
  };
  const start = () => {
    new MutationObserver(tick).observe(document, {
      subtree: true, childList: true, attributes: true,
      attributeFilter: ['data-ready', 'data-query-id'],
    });
    setInterval(tick, 30);
  };
  if (document.readyState === 'loading') document.addEventListener('DOMContentLoaded', start);
  else start();
})();
"""
"""Records every change of the Compare view's state (pair on screen, answer gate open, a clip
spinner, the empty state) with ``performance.now()``."""

X_VELOCITY = {"Hopper": 5, "Walker2d": 8, "HalfCheetah": 8, "Swimmer": 3, "Ant": 13}
"""Index of the torso's x velocity in the default observation of MuJoCo envs (positions first,
without the x position; then velocities, x first)."""

STATE = """() => {
  const view = document.querySelector('[data-testid=view-compare]');
  const pair = view && view.querySelector('[data-testid=pair]');
  const vids = pair ? [...pair.querySelectorAll('video')].map(v => v.duration || 0) : [];
  return {
    t: performance.now(),
    q: pair ? pair.dataset.queryId : null,
    ready: view ? view.dataset.ready === 'true' : false,
    empty: !!(view && view.querySelector('[data-testid=empty]')),
    durations: vids,
  };
}"""


@dataclasses.dataclass(frozen=True, kw_only=True)
class PersonConfig:
    """How the scripted person behaves."""

    think_s: tuple[float, float] = (1.5, 4.0)
    """Seconds of deciding after both clips have played once (uniform)."""
    skip_p: float = 0.05
    """Share of pairs skipped for now (N)."""
    undo_p: float = 0.03
    """Share of answers undone (U) shortly after answering."""
    undo_after_s: tuple[float, float] = (1.0, 4.0)
    """When an undo comes after its answer, seconds (uniform; inside the 5 s the issue sets)."""
    error_p: float = 0.05
    """Share of answers that pick the worse clip."""
    prefer: str = "true"
    """'true': the env's true return; 'backwards': the negative mean x velocity (a target the
    env's reward does not hold)."""
    rate: bool = True
    """Rate one episode per round in the Rate view when the page offers one."""
    rate_wait_s: float = 10.0
    """Seconds the person waits in the Rate view for an episode to be offered and its clip to
    load (the view looks for one every 4 s) before going back to comparing."""
    rate_retry_s: float = 5.0
    """When the Rate view had nothing ready (its episode's clip still rendering), seconds before
    the person looks again (the round stays unrated until one is rated)."""


def segment_score(store: FeedbackStore, seg_id: str, prefer: str, env_id: str) -> float:
    """What the person judges a segment by: its true return, or its backwards speed."""
    (seg,) = store.segments.get([seg_id])
    if prefer == "true":
        return float(np.sum(seg.true_rewards))
    if prefer == "backwards":
        idx = X_VELOCITY.get(env_id.split("-")[0])
        if idx is None:
            raise ValueError(f"no x velocity index known for {env_id}; use --prefer true")
        return -float(np.mean(seg.obs[:, idx]))
    raise ValueError(f"prefer must be 'true' or 'backwards', got {prefer!r}")


def label_errors(store: FeedbackStore, prefer: str, env_id: str, kind: str) -> tuple[int, int]:
    """(wrong, labels) over the people's answers of ``kind`` ('pair' or 'group') that the store
    keeps (not undone, not "can't tell"), each expanded into its labels (one per pair, max(m, n)
    per group): a label is wrong when its preferred segment scores lower (a tie is no error)."""
    from preflab.kinds import answer_labels

    queries = {q.id: q for q in store.queries.all()}
    scores: dict[str, float] = {}

    def score(seg: str) -> float:
        if seg not in scores:
            scores[seg] = segment_score(store, seg, prefer, env_id)
        return scores[seg]

    labels = [
        lab
        for _s, j in store.answers.judgements(source="human")
        if j.p is not None and j.query_id in queries and queries[j.query_id].kind == kind
        for lab in answer_labels(queries[j.query_id], j.p, (j.id,))
    ]
    wrong = sum((score(lab.a) - score(lab.b)) * (2 * lab.p - 1) < 0 for lab in labels)
    return int(wrong), len(labels)


@dataclasses.dataclass(kw_only=True)
class SessionLog:
    """What the person did, in page time (``performance.now()`` ms)."""

    answers: list[dict[str, Any]] = dataclasses.field(default_factory=list)
    """Every answer key pressed: query id, p, page time, whether it was a mistake."""
    skips: list[dict[str, Any]] = dataclasses.field(default_factory=list)
    """Every N pressed."""
    undos: list[dict[str, Any]] = dataclasses.field(default_factory=list)
    """Every U pressed: query id, seconds after the answer, whether the store retracted it."""
    ratings: list[dict[str, Any]] = dataclasses.field(default_factory=list)
    """Episodes rated: query id, round, samples sent."""
    visits: list[dict[str, Any]] = dataclasses.field(default_factory=list)
    """Each pair on screen: query id, shown/ready page times, clip durations."""
    t_open: float = 0.0
    """Page time at which the owner link was opened."""
    t_end: float = 0.0
    """Page time at which the person stopped (budget met, run ended, or time up)."""
    monitor: list[dict[str, Any]] = dataclasses.field(default_factory=list)
    """The page's state changes (see MONITOR)."""
    errors: list[str] = dataclasses.field(default_factory=list)
    """Page errors."""


class Person:
    """Drives one browser page through a studio session."""

    def __init__(
        self,
        page: Any,
        store: FeedbackStore,
        *,
        env_id: str,
        config: PersonConfig,
        rng: np.random.Generator,
        done: Callable[[], bool],
    ) -> None:
        self.page = page
        self.store = store
        self.env_id = env_id
        self.c = config
        self.rng = rng
        self.done = done
        self.log = SessionLog()
        self.rated_rounds: set[int] = set()
        self.next_rate_try = 0.0
        self.rate_offered = True

    def now(self) -> float:
        return float(self.page.evaluate("performance.now()"))

    def state(self) -> dict[str, Any]:
        return dict(self.page.evaluate(STATE))

    def sleep(self, s: float) -> None:
        self.page.wait_for_timeout(int(1000 * s))

    def run(self, link: str) -> SessionLog:
        page = self.page
        page.on("pageerror", lambda exc: self.log.errors.append(str(exc)))
        page.goto(link)
        self.log.t_open = self.now()
        page.get_by_test_id("tab-compare").wait_for(timeout=60_000)
        while not self.done():
            s = self.state()
            if s["q"] is None:
                if self.c.rate:
                    self.maybe_rate()
                self.sleep(0.3)
                continue
            visit = {"q": s["q"], "t_show": s["t"], "t_ready": None, "durations": []}
            self.log.visits.append(visit)
            if self.lost(s["q"]):  # answered before, the studio did not keep it: give up on it
                self.sleep(float(self.rng.uniform(*self.c.think_s)))
                self.log.skips.append({"q": s["q"], "t": self.now(), "after_lost": True})
                page.keyboard.press("n")
                self.wait_change(s["q"])
                continue
            ready = self.wait_ready(s["q"])
            if ready is None:
                continue
            visit["t_ready"] = ready["t"]
            visit["durations"] = ready["durations"]
            self.sleep(float(self.rng.uniform(*self.c.think_s)))
            if self.state()["q"] != s["q"]:
                continue  # the pair left the screen meanwhile (a new round withdrew it)
            if self.rng.random() < self.c.skip_p:
                self.log.skips.append({"q": s["q"], "t": self.now()})
                page.keyboard.press("n")
                self.wait_change(s["q"])
                continue
            self.answer(s["q"])
            self.wait_change(s["q"])
            if self.rng.random() < self.c.undo_p:
                self.undo(s["q"])
            if self.c.rate:  # between pairs, as a person notices the Rate tab's badge
                self.maybe_rate()
        self.log.t_end = self.now()
        self.log.monitor = list(page.evaluate("window.__mon || []"))
        return self.log

    def lost(self, q: str) -> bool:
        """This pair was answered here (not undone) but the store holds no judgement of it."""
        if not any(a["q"] == q for a in self.log.answers):
            return False
        if any(u["q"] == q and u["ok"] for u in self.log.undos):
            return False
        stored = self.store.answers.judgements(include_retracted=True, source="human")
        return not any(j.query_id == q for _s, j in stored)

    def wait_change(self, q: str, timeout: float = 5.0) -> None:
        """Until the pair ``q`` has left the screen (the next pair, or the empty state)."""
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline and self.state()["q"] == q:
            self.sleep(0.03)

    def wait_ready(self, q: str) -> dict[str, Any] | None:
        deadline = time.monotonic() + 180
        while time.monotonic() < deadline and not self.done():
            s = self.state()
            if s["q"] != q:
                return None
            if s["ready"]:
                return s
            self.sleep(0.05)
        return None

    def answer(self, q: str) -> None:
        query = self.store.queries.get(q)
        assert query is not None, f"the page shows query {q}, which the store does not hold"
        left = segment_score(self.store, query.a[0], self.c.prefer, self.env_id)
        right = segment_score(self.store, query.b[0], self.c.prefer, self.env_id)
        better_left = left >= right
        mistake = bool(self.rng.random() < self.c.error_p)
        if mistake:
            better_left = not better_left
        key = "ArrowLeft" if better_left else "ArrowRight"
        self.log.answers.append(
            {
                "q": q,
                "p": 1.0 if better_left else 0.0,
                "t": self.now(),
                "mistake": mistake,
                "left": left,
                "right": right,
            }
        )
        self.page.keyboard.press(key)

    def undo(self, q: str) -> None:
        after = float(self.rng.uniform(*self.c.undo_after_s))
        self.sleep(after)
        t = self.now()
        self.page.keyboard.press("u")
        # undone: the page says so and the store keeps no judgement of it that counts (an answer
        # still in the browser's outbox is cancelled there and never stored)
        ok = False
        deadline = time.monotonic() + 5.0
        while time.monotonic() < deadline:
            said = bool(self.page.evaluate("document.body.innerText.includes('Answer undone')"))
            if said:
                self.sleep(1.0)  # an answer on its way is retracted as soon as it is stored
                gone = self.store.answers.retracted_ids()
                ok = not any(
                    j.query_id == q and j.id not in gone
                    for _s, j in self.store.answers.judgements(
                        include_retracted=True, source="human"
                    )
                )
                break
            time.sleep(0.2)
        self.log.undos.append({"q": q, "after_s": after, "t": t, "ok": ok})

    def maybe_rate(self) -> None:
        """Rate one episode this round when the Rate tab's badge says one waits."""
        rounds = self.store.rounds.all()
        if not rounds:
            return
        rnd = int(rounds[-1]["round"])
        if rnd in self.rated_rounds or time.monotonic() < self.next_rate_try:
            return
        page = self.page
        tab = page.get_by_test_id("tab-rate")
        if not tab.count():
            self.rate_offered = False
            return
        if not page.get_by_test_id("rate-badge").count():  # the tab shows nothing to rate
            return
        tab.click()
        try:
            offered = self.wait_stream()
            if offered is None:  # nothing to rate yet, or its clip still renders: look again later
                self.next_rate_try = time.monotonic() + self.c.rate_retry_s
                return
            self.rated_rounds.add(rnd)
            if any(r["q"] == offered for r in self.log.ratings):
                return  # the view still shows the episode rated before (the badge lagged)
            self.rate_stream(offered, rnd)
        finally:
            page.get_by_test_id("tab-compare").click()

    def wait_stream(self) -> str | None:
        page = self.page
        deadline = time.monotonic() + self.c.rate_wait_s
        while time.monotonic() < deadline:
            q = page.evaluate(
                "() => { const s = document.querySelector('[data-testid=view-rate] [data-query-id]');"
                " const b = document.querySelector('[data-testid=rating-start]');"
                " return s && b && !b.disabled ? s.dataset.queryId : null; }"
            )
            if q:
                return str(q)
            self.sleep(0.2)
        return None

    def rate_stream(self, q: str, rnd: int) -> None:
        """Play the episode once, holding the slider near the true reward of the step shown."""
        query = self.store.queries.get(q)
        if query is None:
            return
        rewards = np.concatenate([s.true_rewards for s in self.store.segments.get(list(query.a))])
        scale = float(np.std(rewards)) or 1.0
        centre = float(np.mean(rewards))
        page = self.page
        page.keyboard.press(" ")
        value = 0.0
        deadline = time.monotonic() + 120
        while time.monotonic() < deadline and not page.get_by_test_id("rating-done").count():
            text = page.get_by_test_id("rating-step").inner_text()
            with contextlib.suppress(ValueError):
                step = int(text.split("/")[0].strip().replace(",", ""))
                want = float(np.tanh((rewards[min(step, len(rewards) - 1)] - centre) / scale))
                if want > value + 0.05:
                    page.keyboard.press("ArrowUp")
                    value = min(1.0, value + 0.1)
                elif want < value - 0.05:
                    page.keyboard.press("ArrowDown")
                    value = max(-1.0, value - 0.1)
            self.sleep(0.25)
        sent = page.get_by_test_id("rating-sent").inner_text()
        self.log.ratings.append({"q": q, "round": rnd, "sent": sent})
