"""The scripted person of ``preflab bench studio_session --view rank``: the Compare person
(:class:`~preflab_bench._studio_person.Person`) answering ranking queries in the studio's Rank
view (issue 57), trainer started with ``--selector ranking --rank-size K``.

Per ranking on screen: waits until every clip has played once through (the view's
``data-watched``, its own gate), thinks and orders for U(3, 8) s in all (the time spread over the
k placements, best clip first: pointer on the clip, its place's number key), submits (Enter),
and undoes (U, 1–4 s after, inside the grace) about 3 % of its rankings; an undone ranking comes
back on screen and is ordered again from scratch (Esc, watch, think, place). No skips.

**The order.** The true order of the k clips by the env's true return of each segment (read from
the run's store by the query id on screen; the page is never given rewards), then **one
left-to-right pass of adjacent swaps**, each with probability ``q = error_p · k / 2``
(:func:`noisy_ranks`). In one such pass every swap adds exactly one inverted pair (the element it
moves down was in order with its new neighbour), so the expected share of the k(k−1)/2 pairwise
labels that disagree with the true order is (k−1)·q / (k(k−1)/2) = 2q/k = ``error_p``: with the
Compare person's 5 % (one flip per pair answer), a ranking of 4 swaps each adjacent pair with
probability 10 % and its labels are wrong 5 % of the time, the same expected label error.

**Counting.** A ranking of k clips gives k(k−1)/2 pairwise labels (the label rule's full
rank-breaking, what the reward model trains on): *labels/min* counts those, *answers/min* the
rankings; :func:`ranking_label_errors` scores the labels against the true returns as
:func:`~preflab_bench._studio_person.label_errors` does for pairs (a label on two segments of
equal true return is no error, and counts).
"""

from __future__ import annotations

import time
from itertools import combinations
from typing import Any

import numpy as np

from preflab.kinds import kind_of
from preflab.store import FeedbackStore
from preflab_bench._studio_person import Person, SessionLog, segment_score

THINK_S = (3.0, 8.0)
"""Seconds from the moment every clip has played once to the submit key: looking, deciding and
placing the k clips (uniform; the issue's "3–8 s to order")."""

RANK_STATE = """() => {
  const view = document.querySelector('[data-testid=view-rank]');
  const grid = view && view.querySelector('[data-testid=rank-grid]');
  const vids = grid ? [...grid.querySelectorAll('video')].map(v => v.duration || 0) : [];
  return {
    t: performance.now(),
    visible: !!(view && view.offsetParent !== null),
    q: grid ? grid.dataset.queryId : null,
    k: grid ? Number(grid.dataset.k) : 0,
    watched: view ? view.dataset.watched === 'true' : false,
    ready: view ? view.dataset.ready === 'true' : false,
    placed: view ? Number(view.dataset.placed || 0) : 0,
    ranks: view ? (view.dataset.ranks || '') : '',
    empty: !!(view && view.querySelector('[data-testid=empty]')),
    spin: !!(view && view.querySelector('.stage .clip-overlay .spinner')),
    durations: vids,
  };
}"""


def swap_p(error_p: float, k: int) -> float:
    """The adjacent-swap probability whose expected pairwise label error is ``error_p``."""
    return min(1.0, error_p * k / 2)


def noisy_ranks(
    scores: list[float], error_p: float, rng: np.random.Generator
) -> tuple[tuple[int, ...], int]:
    """(ranks, swaps): the person's ranks of clips with these ``scores`` (0 = best, no ties) and
    how many adjacent swaps it made: the true order (highest first; equal scores by position),
    then one pass over its k − 1 adjacent places, each swapped with probability
    :func:`swap_p` (see the module docstring)."""
    k = len(scores)
    order = sorted(range(k), key=lambda i: (-scores[i], i))
    q = swap_p(error_p, k)
    swaps = 0
    for pos in range(k - 1):
        if rng.random() < q:
            order[pos], order[pos + 1] = order[pos + 1], order[pos]
            swaps += 1
    ranks = [0] * k
    for place, i in enumerate(order):
        ranks[i] = place
    return tuple(ranks), swaps


def pairs_of(k: int) -> int:
    """Pairwise labels one ranking of k clips gives (full rank-breaking)."""
    return k * (k - 1) // 2


def wrong_pairs(ranks: tuple[int, ...] | list[int], scores: list[float]) -> int:
    """Pairs (i < j) the ranks order against the scores (a tie in either is no error)."""
    return sum(
        (scores[i] - scores[j]) * (ranks[j] - ranks[i]) < 0
        for i, j in combinations(range(len(ranks)), 2)
    )


def ranking_label_errors(store: FeedbackStore, prefer: str, env_id: str) -> tuple[int, int, int]:
    """(wrong, labels, rankings) over the people's ranking judgements that the store keeps (not
    undone, not "can't tell"), each broken into its labels by the kind's label rule: a label is
    wrong when its preferred segment scores lower (a tie is no error)."""
    queries = {q.id: q for q in store.queries.all()}
    scores: dict[str, float] = {}

    def score(seg: str) -> float:
        if seg not in scores:
            scores[seg] = segment_score(store, seg, prefer, env_id)
        return scores[seg]

    wrong = n_labels = n_rankings = 0
    for _s, j in store.answers.judgements(source="human"):
        q = queries.get(j.query_id)
        if j.p is None or q is None or q.kind != "ranking":
            continue
        n_rankings += 1
        for lab in kind_of(q).labels(q, j):
            n_labels += 1
            wrong += (score(lab.a) - score(lab.b)) * (2 * lab.p - 1) < 0
    return int(wrong), n_labels, n_rankings


class RankPerson(Person):
    """Drives the Rank tab through a studio session (see the module docstring)."""

    def rank_state(self) -> dict[str, Any]:
        return dict(self.page.evaluate(RANK_STATE))

    def run(self, link: str) -> SessionLog:
        page = self.page
        page.on("pageerror", lambda exc: self.log.errors.append(str(exc)))
        page.goto(link)
        self.log.t_open = self.now()
        page.get_by_test_id("tab-rank").wait_for(timeout=120_000)
        if not self.rank_state()["visible"]:
            page.get_by_test_id("tab-rank").click()
        while not self.done():
            s = self.rank_state()
            if not s["q"]:
                t = time.monotonic()
                self.sleep(0.3)
                self.log.monitor.append({"t": s["t"], "nothing_s": time.monotonic() - t})
                continue
            self.rank(s)
        self.log.t_end = self.now()
        return self.log

    def rank(self, s: dict[str, Any]) -> None:
        q = str(s["q"])
        visit: dict[str, Any] = {
            "q": q,
            "t_show": s["t"],
            "t_ready": None,
            "durations": [],
            "again": any(v["q"] == q for v in self.log.visits),
            "spin": bool(s["spin"]),
        }
        self.log.visits.append(visit)
        if s["placed"]:  # shown again after an undo with its places: order it afresh
            self.page.keyboard.press("Escape")
        deadline = time.monotonic() + 180
        while not self.done() and time.monotonic() < deadline:  # every clip plays once through
            w = self.rank_state()
            visit["spin"] = visit["spin"] or bool(w["spin"])
            if w["q"] != q:
                return  # withdrawn meanwhile (a new round)
            if w["watched"]:
                visit["t_ready"], visit["durations"] = w["t"], w["durations"]
                break
            self.sleep(0.05)
        if visit["t_ready"] is None:
            return
        query = self.store.queries.get(q)
        assert query is not None, f"the page shows query {q}, which the store does not hold"
        scores = [segment_score(self.store, seg, self.c.prefer, self.env_id) for seg in query.a]
        ranks, swaps = noisy_ranks(scores, self.c.error_p, self.rng)
        think = float(self.rng.uniform(*THINK_S))
        k = len(ranks)
        step = think / (k + 1)
        tiles = self.page.locator("[data-testid=rank-tile]")
        t0 = time.monotonic()
        for i in sorted(range(k), key=lambda i: ranks[i]):  # best first
            self.sleep(step)
            tiles.nth(i).hover()
            self.page.keyboard.press(str(ranks[i] + 1))
        self.sleep(max(0.0, think - (time.monotonic() - t0)))
        shown = self.rank_state()
        if shown["q"] != q:
            return
        want = ",".join(map(str, ranks))
        if shown["ranks"] != want:
            self.log.errors.append(f"{q}: the view holds ranks {shown['ranks']!r}, not {want!r}")
        t_wait = time.monotonic()
        while not shown["ready"] and time.monotonic() - t_wait < 10:
            self.sleep(0.05)
            shown = self.rank_state()
        visit["gate_s"] = time.monotonic() - t_wait
        t = self.now()
        self.page.keyboard.press("Enter")
        self.log.answers.append(
            {
                "q": q,
                "ranks": list(ranks),
                "t": t,
                "think_s": think,
                "swaps": swaps,
                "wrong_pairs": wrong_pairs(ranks, scores),
                "pairs": pairs_of(k),
                "mistake": swaps > 0,
                "p": None,
            }
        )
        self.wait_change(q)
        if self.rng.random() < self.c.undo_p:
            self.undo_ranking(q)

    def wait_change(self, q: str, timeout: float = 10.0) -> None:
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline and self.rank_state()["q"] == q:
            self.sleep(0.03)

    def undo_ranking(self, q: str) -> None:
        after = float(self.rng.uniform(*self.c.undo_after_s))
        self.sleep(after)
        t = self.now()
        self.page.keyboard.press("u")
        ok = False
        deadline = time.monotonic() + 6.0
        while time.monotonic() < deadline:
            gone = self.store.answers.retracted_ids()
            js = self.store.answers.judgements(include_retracted=True, source="human")
            standing = any(j.query_id == q and j.id not in gone for _s, j in js)
            if not standing and self.rank_state()["q"] == q:  # back on screen, nothing stands
                ok = True
                break
            time.sleep(0.2)
        self.log.undos.append({"q": q, "after_s": after, "t": t, "ok": ok})


def analyse_rank(log: SessionLog, store: FeedbackStore, prefer: str, env_id: str) -> dict[str, Any]:
    """Labels and answers per minute and label error of a Rank-view session, from the store."""
    session_s = max(1e-9, (log.t_end - log.t_open) / 1000)
    wrong, n_labels, n_rankings = ranking_label_errors(store, prefer, env_id)
    watched = [
        (v["t_ready"] - v["t_show"]) / 1000 for v in log.visits if v.get("t_ready") is not None
    ]
    gone = store.answers.retracted_ids()
    kept = [j for _s, j in store.answers.judgements(source="human") if j.id not in gone]
    n_undone = sum(u["ok"] for u in log.undos)
    first = log.visits[0]["q"] if log.visits else None
    return {
        "view": "rank",
        "session_s": session_s,
        "answers_given": len(log.answers),
        "undos": len(log.undos),
        "undos_ok": n_undone,
        "rankings": n_rankings,
        "judgements_stored": len(kept),
        "labels": n_labels,
        "labels_per_answer": n_labels / max(1, n_rankings),
        "labels_per_min": n_labels / (session_s / 60),
        "answers_per_min": n_rankings / (session_s / 60),
        "label_error": wrong / max(1, n_labels),
        "label_errors": wrong,
        "person_wrong_pairs": sum(a["wrong_pairs"] for a in log.answers),
        "person_pairs": sum(a["pairs"] for a in log.answers),
        "watch_s": sum(watched),
        "mean_watch_s": float(np.mean(watched)) if watched else float("nan"),
        "mean_clip_s": float(
            np.mean([max(v["durations"]) for v in log.visits if v["durations"]] or [np.nan])
        ),
        "think_s": sum(a["think_s"] for a in log.answers),
        "gate_s": sum(v.get("gate_s", 0.0) for v in log.visits),
        "spinner_after_first": sum(1 for v in log.visits if v["spin"] and v["q"] != first),
        "nothing_offered_s": sum(m.get("nothing_s", 0.0) for m in log.monitor),
        "page_errors": log.errors[:5],
    }
