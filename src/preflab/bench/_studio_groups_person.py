"""The scripted person of ``preflab bench studio_session --view groups``: the same person as
:class:`~preflab.bench._studio_person.Person`, answering in the studio's Groups view (paper 000).

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

from preflab.aggregate import expand_group
from preflab.bench._studio_person import Person, SessionLog, segment_score
from preflab.store import FeedbackStore

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

    def tree_groups(self) -> list[dict[str, Any]]:
        """The outer ring's groups of the round (2 to max_group behaviours), by node id."""
        req = urllib.request.Request(
            self.base + "/api/groupwise/round", headers={"Authorization": f"Bearer {self.token}"}
        )
        with urllib.request.urlopen(req, timeout=60) as r:
            view = json.loads(r.read()).get("view") or {}
        if not view.get("root"):
            return []
        nodes, todo = [], [view["root"]]
        while todo:
            n = todo.pop()
            nodes.append(n)
            todo.extend(n.get("children", []))
        outer = view["levels"] - 1
        return [n for n in nodes if n["depth"] == outer and 2 <= n["size"] <= view["max_group"]]

    def compose(self, rnd: int) -> bool:
        """Click two groups of the tree that this person has not compared this round."""
        parents = self.tree_groups()
        for i, ga in enumerate(parents):
            for gb in parents[i + 1 :]:
                key = (f"{rnd}:{ga['id']}", f"{rnd}:{gb['id']}")
                if key in self.composed:
                    continue
                self.composed.add(key)
                for g in (ga, gb):
                    self.page.locator(f".arc-parent[data-node='{g['id']}']").dispatch_event("click")
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
            if g["newRound"]:
                page.get_by_test_id("new-round").click()
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
        deadline = time.monotonic() + 120
        while time.monotonic() < deadline and not self.done():
            s = self.groups()
            if s["a"] != g["a"] or s["b"] != g["b"]:
                return  # the groups changed under the person (a new round): start again
            if s["loaded"] >= n:
                visit["t_ready"], visit["durations"] = s["t"], s["durations"]
                break
            self.sleep(0.05)
        if visit["t_ready"] is None:
            return
        watch = max(visit["durations"]) + EXTRA_WATCH_S * max(0, n - 2)
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
    queries = {q.id: q for q in store.queries()}
    human = [j for _s, j in store.judgements(source="human") if j.query_id in queries]
    groups = [j for j in human if queries[j.query_id].kind == "group"]
    labels = [
        lab
        for j in groups
        if j.p is not None
        for lab in expand_group(queries[j.query_id], j.p, (j.id,))
    ]
    scores: dict[str, float] = {}

    def score(seg: str) -> float:
        if seg not in scores:
            scores[seg] = segment_score(store, seg, prefer, env_id)
        return scores[seg]

    wrong = sum((score(lab.a) - score(lab.b)) * (2 * lab.p - 1) < 0 for lab in labels)
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
        "labels": len(labels),
        "labels_per_answer": len(labels) / max(1, len(groups)),
        "labels_per_min": len(labels) / (session_s / 60),
        "answers_per_min": len(groups) / (session_s / 60),
        "label_error": wrong / max(1, len(labels)),
        "label_errors": int(wrong),
        "mistakes": sum(a["mistake"] for a in log.answers),
        "mean_clips": float(np.mean(sizes)) if sizes else float("nan"),
        "watch_s": sum(a["watch_s"] for a in log.answers),
        "clips_load_s": sum(ready),
        "save_s": sum(saved),
        "ui_wait_share": (sum(ready) + sum(saved)) / session_s,
        "nothing_offered_s": nothing_s,
        "page_errors": log.errors[:5],
    }
