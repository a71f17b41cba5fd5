"""The scripted people of ``bench crowd_study`` (issue #61): who they are, how they answer, and
how they reach the studio (headless Chromium or the HTTP API exactly as the page calls it).

Every person joins through the study link with platform ids, accepts the consent, does the
practice and then labels pairs until their quota (the studio answers 403 and the page goes to
the completion code) or until the trainer ends. How a person answers a pair of segments with
true returns (the env's own reward) ``ra`` and ``rb``:

- careful: a Bradley–Terry person on the true return difference, P(left) = σ((ra − rb)/τ), with
  τ set so that their error over the pairs asked so far is their own rate, drawn in 5–15 %
  (errors fall on close pairs);
- careless: left or right at random, as fast as the studio lets them;
- adversary: the wrong side, always;
- leaver: careful, leaves after half their quota and comes back later with the same platform id
  in a new browser.
"""

from __future__ import annotations

import dataclasses
import math
import threading
import time
from collections.abc import Callable, Sequence
from typing import Any

import httpx
import numpy as np

from preflab.store import FeedbackStore

KINDS: tuple[str, ...] = ("careful",) * 8 + ("careless", "careless", "adversary", "leaver")
"""The twelve people, by index (their PROLIFIC_PID is ``crowdNN``)."""

BROWSER = (0, 1, 2, 11)
"""The people in headless Chromium (three careful people and the leaver); the rest use the API."""


def sigmoid(x: np.ndarray | float) -> np.ndarray:
    from scipy.special import expit

    return np.asarray(expit(np.asarray(x, dtype=float)))


def bt_scale(gaps: Sequence[float], error: float) -> float:
    """τ such that a Bradley–Terry person P(correct) = σ(|gap|/τ) errs on ``error`` of the pairs
    with return differences ``gaps`` on average (bisection on log τ; the error grows with τ from
    0 towards 0.5 over the pairs with a nonzero gap)."""
    if not 0.0 < error < 0.5:
        raise ValueError(f"error must be in (0, 0.5), got {error}")
    g = np.abs(np.asarray([x for x in gaps if x != 0.0], dtype=float))
    if g.size == 0:
        return 1.0
    lo, hi = math.log(1e-6 * g.max()), math.log(1e6 * g.max())
    for _ in range(80):
        mid = 0.5 * (lo + hi)
        err = float(np.mean(sigmoid(-g / math.exp(mid))))
        lo, hi = (mid, hi) if err < error else (lo, mid)
    return math.exp(0.5 * (lo + hi))


@dataclasses.dataclass
class Behaviour:
    """How one person answers and how long they take."""

    kind: str
    rng: np.random.Generator
    error: float = 0.1
    """The careful person's own error rate (5–15 %)."""
    tau: float = 1.0
    """Their Bradley–Terry scale (set by :meth:`calibrate`)."""

    @classmethod
    def of(cls, kind: str, seed: int) -> Behaviour:
        rng = np.random.default_rng(seed)
        return cls(kind=kind, rng=rng, error=float(rng.uniform(0.05, 0.15)))

    def calibrate(self, gaps: Sequence[float]) -> None:
        self.tau = bt_scale(gaps, self.error)

    def choose(self, ra: float, rb: float) -> float:
        """P(a ≻ b) given: 1.0 left, 0.0 right."""
        if self.kind == "careless":
            return float(self.rng.integers(0, 2))
        if self.kind == "adversary":
            return 0.0 if ra >= rb else 1.0
        return 1.0 if self.rng.random() < float(sigmoid((ra - rb) / self.tau)) else 0.0

    def think_s(self) -> float:
        """Seconds on a pair before answering (the studio refuses answers under 1 s)."""
        if self.kind == "careless":
            return float(self.rng.uniform(1.05, 1.4))
        return float(self.rng.uniform(2.5, 6.0))


@dataclasses.dataclass
class PersonLog:
    """What one person did, as they saw it."""

    index: int
    kind: str
    answers: int = 0
    refused: list[tuple[str, int, str]] = dataclasses.field(default_factory=list)
    latencies_s: list[float] = dataclasses.field(default_factory=list)
    """Each API request's round trip (the API people)."""
    answer_latencies_s: list[float] = dataclasses.field(default_factory=list)
    """The round trips of their answers (``POST /api/judgements``) alone."""
    completion_code: str = ""
    annotator_ids: list[str] = dataclasses.field(default_factory=list)
    errors: list[str] = dataclasses.field(default_factory=list)
    practice: int = 0


class Truth:
    """True returns of the run's segments (read from the store, as the oracle does), and the
    gaps of the pairs asked so far (for the careful people's τ)."""

    def __init__(self, store: FeedbackStore) -> None:
        self.store = store
        self._lock = threading.Lock()
        self._rets: dict[str, float] = {}

    def returns(self, ids: Sequence[str]) -> list[float]:
        with self._lock:
            missing = [s for s in ids if s not in self._rets]
            if missing:
                self._rets |= self.store.studies.true_returns(missing)
            return [self._rets[s] for s in ids]

    def pair(self, query_id: str) -> tuple[float, float]:
        with self._lock:
            q = self.store.queries.get(query_id)
        assert q is not None, f"the studio serves query {query_id}, which the store lacks"
        ra, rb = self.returns([q.a[0], q.b[0]])
        return ra, rb

    def gaps(self) -> list[float]:
        """Return differences of the pairs asked so far, attention checks left out (a careful
        person's error rate is over the pairs the crowd labels)."""
        with self._lock:
            gold = self.store.studies.gold()
            qs = [q for q in self.store.queries.all() if q.kind == "pair" and q.id not in gold]
        rets = self.returns(sorted({s for q in qs for s in (q.a[0], q.b[0])}))
        by = dict(zip(sorted({s for q in qs for s in (q.a[0], q.b[0])}), rets, strict=True))
        return [by[q.a[0]] - by[q.b[0]] for q in qs]


def platform(index: int) -> dict[str, str]:
    return {"PROLIFIC_PID": f"crowd{index:02d}", "STUDY_ID": "bench", "SESSION_ID": f"se{index}"}


class ApiPerson:
    """A person whose browser is replaced by the HTTP calls the page makes: the study link,
    the consent form, the practice form, then ``GET /api/queries/next?kind=pair`` and
    ``POST /api/judgements`` with a client key and the response time."""

    def __init__(
        self,
        base: str,
        secret: str,
        index: int,
        behaviour: Behaviour,
        truth: Truth,
        log: PersonLog,
        stop: Callable[[], bool],
    ) -> None:
        self.base, self.secret, self.i = base, secret, index
        self.b, self.truth, self.log, self.stop = behaviour, truth, log, stop

    def _timed(
        self, fn: Callable[[], httpx.Response], also: list[float] | None = None
    ) -> httpx.Response:
        t0 = time.perf_counter()
        r = fn()
        self.log.latencies_s.append(time.perf_counter() - t0)
        if also is not None:
            also.append(self.log.latencies_s[-1])
        return r

    def run(self, quota: int, *, consent: bool = True) -> None:
        c = httpx.Client(base_url=self.base, trust_env=False, follow_redirects=True, timeout=60)
        try:
            c.get(f"/s/{self.secret}", params=platform(self.i))
            if consent:
                c.post("/study/consent", data={"decision": "accept"})
            k = 0
            while True:  # the practice: the best segment against the worst, sides alternated
                r = c.get("/study/practice")
                if "/study/practice" not in str(r.url):
                    break
                answer = "1" if k % 2 == 0 else "0"
                if self.b.kind == "careless":
                    answer = str(int(self.b.rng.integers(0, 2)))
                elif self.b.kind == "adversary":
                    answer = "0" if answer == "1" else "1"
                time.sleep(self.b.think_s())
                c.post("/study/practice", data={"answer": answer, "index": str(k)})
                self.log.practice += 1
                k += 1
            self._label(c, quota)
            r = c.get("/study/done")
            self.log.completion_code = _code(r.text)
        finally:
            c.close()

    def _label(self, c: httpx.Client, quota: int) -> None:
        n = 0
        while n < quota and not self.stop():
            r = self._timed(lambda: c.get("/api/queries/next", params={"kind": "pair"}))
            if r.status_code == 403:
                return  # the quota is reached
            q = r.json().get("query") if r.status_code == 200 else None
            if q is None:
                time.sleep(1.0)  # the trainer has not asked more yet
                continue
            t_show = time.monotonic()
            ra, rb = self.truth.pair(q["id"])
            if self.b.kind in ("careful", "leaver") and self.log.answers % 10 == 0:
                self.b.calibrate(self.truth.gaps())
            p = self.b.choose(ra, rb)
            time.sleep(self.b.think_s())
            body = {
                "query_id": q["id"],
                "p": p,
                "client_key": f"crowd-{self.i}-{q['id']}",
                "response_time_s": time.monotonic() - t_show,
            }
            r = self._timed(
                lambda b=body: c.post("/api/judgements", json=b),  # type: ignore[misc]
                self.log.answer_latencies_s,
            )
            if r.status_code == 201:
                self.log.answers += 1
                n += 1
            else:
                self.log.refused.append((q["id"], r.status_code, r.text[:120]))
                if r.status_code == 403:
                    return


def _code(html: str) -> str:
    import re

    m = re.search(r"\b([A-Z0-9]{8})\b", html)
    return m.group(1) if m else ""


STATE = """() => {
  const view = document.querySelector('[data-testid=view-compare]');
  const pair = view && view.querySelector('[data-testid=pair]');
  return {
    q: pair ? pair.dataset.queryId : null,
    ready: view ? view.dataset.ready === 'true' : false,
    url: location.pathname,
  };
}"""


class BrowserPerson:
    """A person in headless Chromium: the study link, 'I agree — continue', the practice pairs
    by their buttons, then the studio's Compare view by the arrow keys, until the page shows
    the completion code (or the trainer ends)."""

    def __init__(
        self,
        base: str,
        secret: str,
        index: int,
        behaviour: Behaviour,
        truth: Truth,
        log: PersonLog,
        stop: Callable[[], bool],
    ) -> None:
        self.base, self.secret, self.i = base, secret, index
        self.b, self.truth, self.log, self.stop = behaviour, truth, log, stop

    def run(self, quota: int, *, consent: bool = True) -> None:
        from playwright import sync_api as playwright_sync

        from preflab.testing.browser import launch_chromium

        pw = playwright_sync.sync_playwright().start()
        browser = launch_chromium(pw)
        try:
            page = browser.new_context(viewport={"width": 1280, "height": 800}).new_page()
            page.set_default_timeout(120_000)
            page.on("pageerror", lambda exc: self.log.errors.append(str(exc)))
            query = "&".join(f"{k}={v}" for k, v in platform(self.i).items())
            page.goto(f"{self.base}/s/{self.secret}?{query}")
            if consent:
                page.get_by_role("button", name="I agree — continue").click()
                page.wait_for_load_state()
            self._practice(page)
            self._label(page, quota)
            if "/study/done" in page.url or self.log.answers >= quota:
                page.goto(f"{self.base}/study/done")
                self.log.completion_code = _code(page.content())
        finally:
            browser.close()
            pw.stop()

    def _practice(self, page: Any) -> None:
        start = page.get_by_role("link", name="Start the practice")
        if start.count():
            start.first.click()
        k = 0
        while "/study/practice" in page.url:
            if page.get_by_role("button", name="Left is better").count() == 0:
                nxt = page.get_by_role("link", name="Next practice pair")
                if nxt.count():
                    nxt.click()
                    continue
                break
            page.wait_for_timeout(int(1000 * self.b.think_s()))
            left = k % 2 == 0  # the best segment is left on even pairs
            page.get_by_role("button", name="Left is better" if left else "Right is better").click()
            self.log.practice += 1
            k += 1
            page.wait_for_load_state()
        go = page.get_by_role("link", name="Start the study")
        if go.count():
            go.click()
        elif "/study/instructions" in page.url:
            page.get_by_role("link", name="Start").click()
        page.get_by_test_id("tab-compare").wait_for(timeout=120_000)

    def _label(self, page: Any, quota: int) -> None:
        n = 0
        while n < quota and not self.stop():
            s = page.evaluate(STATE)
            if "/study/done" in s["url"]:
                return
            if s["q"] is None or not s["ready"]:
                page.wait_for_timeout(300)
                continue
            q = s["q"]
            ra, rb = self.truth.pair(q)
            if self.log.answers % 10 == 0:
                self.b.calibrate(self.truth.gaps())
            p = self.b.choose(ra, rb)
            page.wait_for_timeout(int(1000 * self.b.think_s()))
            if page.evaluate(STATE)["q"] != q:
                continue  # the pair left the screen meanwhile
            page.keyboard.press("ArrowLeft" if p == 1.0 else "ArrowRight")
            self.log.answers += 1
            n += 1
            deadline = time.monotonic() + 10
            while time.monotonic() < deadline and page.evaluate(STATE)["q"] == q:
                page.wait_for_timeout(50)
