"""The scripted person of ``preflab bench studio_session --view groups``: the same person as
:class:`~preflab_bench._studio_person.Person`, answering in the studio's Groups view (paper 000).

Per answer: ``N`` (the best suggestion fills both sides; before the reward model's first fit, or
when the round's suggestions are used up, two groups of the tree's outer ring are clicked), then
it waits until every clip of both groups has loaded, watches for the longest clip's duration plus
0.5 s per clip beyond two (all clips loop at once), thinks, and answers for the group whose
members score higher on average (flipped with the person's error rate). Label counts and errors
come from the store afterwards (:func:`analyse_groups`).
"""

from __future__ import annotations

import json
import time
import urllib.request
from typing import Any

import numpy as np

from preflab.store import FeedbackStore
from preflab_bench._studio_person import Person, SessionLog, label_errors, segment_score

LOAD_PATIENCE_S = 30.0
"""Seconds the person waits for every clip of both groups to load; then it judges by those that
did (a clip whose render failed does not hold the answer back, as in the Compare view)."""

EXTRA_WATCH_S = 0.5
"""Seconds of viewing per clip beyond two (the keystroke-level model of ``studio_groupwise``)."""

GROUPS = """() => {
  const ids = (side) => [...document.querySelectorAll(`[data-testid=group-${side}] [data-testid=member]`)]
    .map((e) => e.dataset.segment);
  const vids = [...document.querySelectorAll('[data-testid=view-explore] .gw-grid video')];
  const title = document.querySelector('[data-testid=explore-title]');
  const nb = document.querySelector('[data-testid=new-round]');
  return {
    t: performance.now(),
    a: ids('a'),
    b: ids('b'),
    round: title && title.dataset.round ? Number(title.dataset.round) : null,
    loaded: vids.filter((v) => v.readyState >= 2 && v.duration > 0).length,
    durations: vids.map((v) => v.duration || 0),
    suggest: !!document.querySelector('[data-testid=suggest]:not([disabled])'),
    newRound: !!(nb && !nb.hidden),
  };
}"""


class GroupsPerson(Person):
    """Drives the Groups tab through a studio session (see the module docstring)."""

    def __init__(self, *args: Any, link: str, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        base, _, token = link.partition("/#token=")
        self.base = base
        self.token = token
        self.composed: set[tuple[str, str]] = set()

    def groups(self) -> dict[str, Any]:
        return dict(self.page.evaluate(GROUPS))

    def tree_groups(self) -> list[tuple[str, frozenset[str]]]:
        """The round's groups a person can click (node id, behaviours), largest first: every
        node but the root with at most max_group behaviours, single behaviours last."""
        req = urllib.request.Request(
            self.base + "/api/groupwise/round", headers={"Authorization": f"Bearer {self.token}"}
        )
        with urllib.request.urlopen(req, timeout=60) as r:
            view = json.loads(r.read()).get("view") or {}
        if not view.get("root"):
            return []
        out: list[tuple[int, str, frozenset[str]]] = []

        def walk(n: dict[str, Any], top: bool) -> frozenset[str]:
            kids = n.get("children") or []
            segs = (
                frozenset().union(*(walk(c, False) for c in kids))
                if kids
                else frozenset([n["segment"]])
            )
            if not top and len(segs) <= view["max_group"]:
                out.append((n["depth"], n["id"], segs))
            return segs

        walk(view["root"], True)
        out.sort(key=lambda x: (-len(x[2]), x[0], x[1]))
        return [(i, segs) for _d, i, segs in out]

    def compose(self, rnd: int) -> bool:
        """Put two disjoint groups of the tree that this person has not compared this round on
        the two sides (a click on a side's heading, then on the group's arc)."""
        nodes = self.tree_groups()
        for i, (ia, sa) in enumerate(nodes):
            for ib, sb in nodes[i + 1 :]:
                key = (f"{rnd}:{ia}", f"{rnd}:{ib}")
                if sa & sb or key in self.composed:
                    continue
                self.composed.add(key)
                self.page.get_by_test_id("clear").click()
                for side, node in (("a", ia), ("b", ib)):
                    self.page.locator(f"[data-side='{side}'] .gw-side-head").click()
                    self.page.locator(f".arc[data-node='{node}']").first.dispatch_event("click")
                return True
        return False

    def run(self, link: str) -> SessionLog:
        page = self.page
        page.on("pageerror", lambda exc: self.log.errors.append(str(exc)))
        page.goto(link)
        self.log.t_open = self.now()
        page.get_by_test_id("tab-explore").click()
        while not self.done():
            g = self.groups()
            if g["newRound"]:  # "Load round N": clicked if it is still there (the view may
                # have loaded the round itself meanwhile; a click that waits would hang)
                page.evaluate(
                    "() => { const b = document.querySelector('[data-testid=new-round]');"
                    " if (b && !b.hidden) b.click(); }"
                )
                self.sleep(0.3)
                continue
            if g["round"] is None:
                self.log.visits.append({"q": None, "t_show": g["t"], "empty": True})
                self.sleep(1.0)
                continue
            if not (g["a"] and g["b"]):
                if g["suggest"]:
                    page.keyboard.press("n")
                    self.sleep(0.1)
                    g = self.groups()
                if not (g["a"] and g["b"]) and not self.compose(int(g["round"])):
                    self.log.visits.append({"q": None, "t_show": g["t"], "empty": True})
                    self.sleep(1.0)
                    continue
                self.sleep(0.1)
                g = self.groups()
                if not (g["a"] and g["b"]):
                    continue
            self.answer_groups(g)
        self.log.t_end = self.now()
        return self.log

    def answer_groups(self, g: dict[str, Any]) -> None:
        n = len(g["a"]) + len(g["b"])
        visit: dict[str, Any] = {"q": None, "t_show": g["t"], "t_ready": None, "durations": []}
        self.log.visits.append(visit)
        deadline = time.monotonic() + LOAD_PATIENCE_S
        s = g
        while not self.done():
            s = self.groups()
            if s["a"] != g["a"] or s["b"] != g["b"]:
                return  # the groups changed under the person (a new round): start again
            if s["loaded"] >= n or time.monotonic() > deadline:
                visit["t_ready"], visit["durations"] = s["t"], s["durations"]
                visit["missing"] = n - s["loaded"]  # clips that never loaded: judged without
                break
            self.sleep(0.05)
        if visit["t_ready"] is None:
            return
        watch = max([0.0, *visit["durations"]]) + EXTRA_WATCH_S * max(0, n - 2)
        self.sleep(watch + float(self.rng.uniform(*self.c.think_s)))
        score_a = float(np.mean([self.score(s) for s in g["a"]]))
        score_b = float(np.mean([self.score(s) for s in g["b"]]))
        left = score_a >= score_b
        mistake = bool(self.rng.random() < self.c.error_p)
        if mistake:
            left = not left
        t = self.now()
        self.page.keyboard.press("ArrowLeft" if left else "ArrowRight")
        cleared = False
        deadline = time.monotonic() + 10
        while time.monotonic() < deadline:
            s = self.groups()
            if not s["a"]:
                cleared = True
                break
            self.sleep(0.05)
        self.log.answers.append(
            {
                "q": None,
                "a": g["a"],
                "b": g["b"],
                "p": 1.0 if left else 0.0,
                "t": t,
                "t_cleared": self.now() if cleared else None,
                "mistake": mistake,
                "left": score_a,
                "right": score_b,
                "saved": cleared,
                "watch_s": watch,
            }
        )

    def score(self, seg_id: str) -> float:
        return segment_score(self.store, seg_id, self.c.prefer, self.env_id)


def analyse_groups(
    log: SessionLog, store: FeedbackStore, prefer: str, env_id: str
) -> dict[str, Any]:
    """Labels per minute and label error of a Groups-view session, from the store."""
    session_s = max(1e-9, (log.t_end - log.t_open) / 1000)
    queries = {q.id: q for q in store.queries.all()}
    human = [j for _s, j in store.answers.judgements(source="human") if j.query_id in queries]
    groups = [j for j in human if queries[j.query_id].kind == "group"]
    wrong, n_labels = label_errors(store, prefer, env_id, "group")
    sizes = [len(queries[j.query_id].a) + len(queries[j.query_id].b) for j in groups]
    ready = [
        (v["t_ready"] - v["t_show"]) / 1000 for v in log.visits if v.get("t_ready") is not None
    ]
    saved = [(a["t_cleared"] - a["t"]) / 1000 for a in log.answers if a.get("t_cleared")]
    nothing_s = sum(1.0 for v in log.visits if v.get("empty"))
    return {
        "session_s": session_s,
        "answers_given": len(log.answers),
        "answers_not_saved": sum(not a["saved"] for a in log.answers),
        "group_judgements": len(groups),
        "pair_judgements": len(human) - len(groups),
        "labels": n_labels,
        "labels_per_answer": n_labels / max(1, len(groups)),
        "labels_per_min": n_labels / (session_s / 60),
        "answers_per_min": len(groups) / (session_s / 60),
        "label_error": wrong / max(1, n_labels),
        "label_errors": wrong,
        "mistakes": sum(a["mistake"] for a in log.answers),
        "mean_clips": float(np.mean(sizes)) if sizes else float("nan"),
        "watch_s": sum(a["watch_s"] for a in log.answers),
        "clips_load_s": sum(ready),
        "save_s": sum(saved),
        "ui_wait_share": (sum(ready) + sum(saved)) / session_s,
        "nothing_offered_s": nothing_s,
        "clips_never_loaded": sum(v.get("missing", 0) for v in log.visits),
        "page_errors": log.errors[:5],
        "answer_detail": [
            {k: a[k] for k in ("t", "p", "mistake", "saved", "watch_s")}
            | {"n": len(a["a"]) + len(a["b"])}
            for a in log.answers
        ],
    }
