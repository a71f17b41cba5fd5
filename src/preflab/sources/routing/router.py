"""Routing: one run, several answerers; each query goes to the cheapest one likely to be right.

:class:`RoutingSource` is a feedback source over the kinds (``submit`` / ``collect`` /
``state``): the loop and the store do not know it routes. Its answerers, cheapest first:

1. **The reward model** (:mod:`preflab.sources.routing.model`), for pair queries once it has been
   fitted: it answers when its ensemble is confident (every member at least
   ``model_threshold`` sure, all on one side). Reason ``model-confident``.
2. **The AI judge** (any immediate source: the simulated judge, the vision-language judge or
   its text view), for pair queries: it is asked every pair the model did not answer (while its
   budget lasts). Its answer per query is the side of the mean p of its judgements of that query
   and its confidence the judgement's ``meta['confidence']`` when it gives one (the simulated
   judge), else max(p̄, 1 − p̄). With the calibration threshold t
   (:mod:`preflab.sources.routing.calibration`):

   - a *calibration* query goes to people as well (reason ``calibration``). A query is one when
     its draw from the router's generator is below ``calibration_share`` (one draw for every
     query the AI is asked, whether used or not), or while t does not exist yet (warm-up: the
     AI is not trusted, so the query goes to people anyway and calibrates for free). The AI's
     answer is held, not a label; when people's answer comes it gives one calibration record;
   - otherwise the AI's answer is the label when its confidence is ≥ t (reason ``ai-confident``);
   - otherwise the query goes to people (reason ``ai-unsure``).
3. **People** (the synthetic teacher standing in for them, a simulated crowd, or people in the
   studio through the store): every query the others did not answer, and every query of a kind
   the model and the AI do not answer (groups, rankings; reason ``kind``).

**Budgets** (``budget_model``, ``budget_ai``, ``budget_people``; None: no limit) count the
model's answers, the queries put to the AI, and the queries put to people. A query whose
answerer has no budget left goes on to people when the AI's is spent (``ai-budget``). When
people's is spent, a query the model and the AI are unsure about is left unanswered (counted as
``unrouted``; reason ``people-budget`` when the AI was unsure, ``budgets-spent`` when it could
not answer) under ``people_spent = 'skip'`` (the default). Under ``people_spent = 'ai'`` it goes
to the AI regardless of its threshold (``people-budget``), to the model's guess when the AI
cannot answer either (``budgets-spent``), and is left unanswered when the model has not been
fitted either.

**Provenance.** Every judgement the router hands out carries ``meta['route']``: ``answerer``
('model', 'ai' or 'people'), ``reason`` (above), and the numbers behind it (the model's or the
AI's confidence, the threshold, whether it calibrated, the AI's held answer). The AI's own
judgements (its reasoning, tokens, prompt hashes) are kept in ``meta['ai_judgements']`` of the
AI label. People in the studio write their judgements themselves: those carry no
``meta['route']``; the router writes the route into the stored query's ``meta['route']``
instead (so the export's ``queries.parquet`` says why each of people's queries went to them),
and keeps every route in its state (``routes``) and ``summary.json``.

**People in the studio** (``people = store``): the router then stores the model's and the AI's
judgements itself (``persists``: the loop stores none), and every query it did not route to
people is withdrawn, so the studio offers people only theirs: the loop asks the router first
(:meth:`RoutingSource.screen`, the :class:`~preflab.sources.base.Screens` protocol) and stores
the round's queries with those withdrawn in one transaction, so no person ever sees one of them,
even while the AI answers or after a kill. When the run ends, :meth:`RoutingSource.close_undo`
closes people's undo windows, so answers given just before the end count too. The run's clock counts every answer, routed ones
included: they arrive at once, so the run waits only for people's share. It also publishes its report
(:meth:`RoutingSource.routing_report`) into the store setting :data:`ROUTING_SETTING`, where
the studio's Owner page reads it live.

**B-Pref's margin.** When people are a synthetic teacher with a relative skip or equal rule
(``skip_eps``, ``equal_eps``), the router hands it over (:attr:`RoutingSource.margin_teacher`,
the :class:`~preflab.sources.teacher.HoldsTeacher` protocol) and the loop sets its margin before
each round's queries, exactly as for ``--source teacher``. The AI judge is asked before the loop
sets the round's margin (:meth:`RoutingSource.screen`), so an AI that is such a teacher is
refused.

**Exact resume.** ``state()`` holds the generator, the budgets used, the counts, the routes,
the calibration records and held AI answers, the uncollected judgements and the AI's and
people's own states; the model's answers depend only on the checkpointed reward model.
"""

from __future__ import annotations

import dataclasses
import hashlib
from collections import defaultdict
from collections.abc import Mapping, Sequence
from typing import Any, Protocol, cast, runtime_checkable

import numpy as np

from preflab.errors import DataError
from preflab.kinds import kind_of
from preflab.records import Judgement, Query, Segment, SourceKind, now
from preflab.sources.base import FeedbackSource, ReportsUsage, UndoWindow
from preflab.sources.immediate import PendingJudgements
from preflab.sources.routing.calibration import Calibration
from preflab.sources.routing.config import RoutingConfig
from preflab.sources.routing.model import ModelNow, model_answers
from preflab.sources.teacher import SyntheticTeacher, margin_teacher_of
from preflab.store import FeedbackStore

ANSWERERS = ("model", "ai", "people")
"""Who answers, cheapest first."""
MODEL_ANNOTATOR = "reward-model"
"""``annotator_id`` of the reward model's routed answers."""
ROUTING_SETTING = "routing"
"""The store setting where a router with people in the studio publishes :meth:`RoutingSource.
routing_report` (plus ``updated_at``) after each submit and each collect that brought people's
answers: the studio's Owner page reads it live (the trainer and the studio share the store)."""


def _plain(value: Any) -> Any:
    """``value`` with non-finite floats as None (JSON that every store backend takes)."""
    if isinstance(value, float):
        return value if np.isfinite(value) else None
    if isinstance(value, dict):
        return {str(k): _plain(v) for k, v in value.items()}
    if isinstance(value, list | tuple):
        return [_plain(v) for v in value]
    return value


@runtime_checkable
class KnowsTruth(Protocol):
    """An AI judge that knows how often it is right (the simulated one)."""

    @property
    def true_accuracy(self) -> float | None:
        """Share of its answers that agree with the true returns (None before any)."""
        ...


@runtime_checkable
class WatchesRewardModel(Protocol):
    """A source that reads the run's reward model (the composition root hands it over)."""

    def watch_model(self, model_now: ModelNow) -> None:
        """Read the reward model through ``model_now`` from now on."""
        ...


def route_id(query_id: str, answerer: str) -> str:
    """The deterministic id of the router's own judgement of a query."""
    return "j-" + hashlib.sha256(f"route\x1f{query_id}\x1f{answerer}".encode()).hexdigest()[:20]


def answer_of(judgements: Sequence[Judgement]) -> tuple[float | None, float]:
    """(side, confidence) of one answerer's judgements of one query: the side (1, 0 or 0.5) of
    the mean of their p (None when all skipped), and ``meta['confidence']`` when one judgement
    gives it, else max(p̄, 1 − p̄)."""
    ps = [j.p for j in judgements if j.p is not None]
    if not ps:
        return None, 0.0
    mean = float(np.mean(ps))
    side = 1.0 if mean > 0.5 else 0.0 if mean < 0.5 else 0.5
    if len(judgements) == 1 and isinstance(judgements[0].meta.get("confidence"), int | float):
        return side, float(judgements[0].meta["confidence"])
    return side, max(mean, 1.0 - mean)


class RoutingSource:
    """Sends each query to the cheapest answerer likely to be right (module docstring)."""

    def __init__(
        self,
        config: RoutingConfig,
        rng: np.random.Generator,
        *,
        ai: FeedbackSource,
        people: FeedbackSource,
        store: FeedbackStore | None = None,
        model: ModelNow | None = None,
        ai_name: str = "",
        people_name: str = "",
    ) -> None:
        if ai.persists:
            raise DataError(
                "the routing source's AI judge must answer at once (an immediate source, "
                "persists = False); people answer through the store, not the AI"
            )
        if margin_teacher_of(ai) is not None:
            raise DataError(
                "the routing source's AI judge is a synthetic teacher with B-Pref's relative "
                "skip or equal rule (skip_eps / equal_eps), whose margin the loop sets for "
                "people's teacher only; give the AI skip_threshold / equal_threshold instead, "
                "or the relative rule to people"
            )
        if people.persists and store is None:
            raise DataError(
                "people who answer through the store (the studio) need the run's store: pass "
                "store= to RoutingSource"
            )
        self.config = config
        self.rng = rng
        self.ai = ai
        self.people = people
        self.store = store
        self.model_now: ModelNow = model or (lambda: None)
        self.ai_name = ai_name or config.ai
        self.people_name = people_name or config.people
        self.persists = people.persists
        """True with people in the studio: the router stores the model's and the AI's answers
        itself, and the loop stores nothing."""
        self.calibration = Calibration(level=config.level, min_records=config.min_calibration)
        self.used = dict.fromkeys(ANSWERERS, 0)
        """Budget used: the model's answers, queries asked of the AI, queries asked of people."""
        self.labels = dict.fromkeys(ANSWERERS, 0)
        """Judgements handed out, by answerer."""
        self.reasons: dict[str, int] = defaultdict(int)
        """Queries routed, by reason."""
        self.routes: dict[str, dict[str, Any]] = {}
        """Query id → its route (answerer, reason, confidences, threshold)."""
        self.held: dict[str, dict[str, Any]] = {}
        """Calibration queries whose AI answer waits for people's: query id → {p, confidence}."""
        self.unrouted = 0
        """Queries no answerer had budget (or a model) for."""
        self._ai_who = ["ai-judge", "synthetic"]
        """The AI's annotator id and source kind (from its judgements) for its routed labels."""
        self._pending = PendingJudgements("routing")
        self._decided: tuple[list[Judgement], list[Query], list[str]] = ([], [], [])
        """Decided and not submitted yet (:meth:`screen`, then :meth:`submit` in the same ask):
        the model's and the AI's answers, people's queries, the ids of the others."""

    # ----- the composition root hands the reward model over ------------------------------------
    def watch_model(self, model_now: ModelNow) -> None:
        """Read the run's reward model through ``model_now`` (None before its first fit)."""
        self.model_now = model_now

    def threshold(self) -> float | None:
        """The AI's confidence threshold now (None: it does not answer on its own yet)."""
        return self.calibration.threshold(self.config.target_error)

    # ----- screen and submit --------------------------------------------------------------------
    def screen(self, queries: Sequence[Query], segments: Mapping[str, Segment]) -> list[str]:
        """Decide who answers ``queries`` (:meth:`submit` hands them out as decided) and return
        the ids of those people are not to be offered (the loop stores them withdrawn); none
        when people do not answer through the store."""
        self._decide(queries, segments)
        if not self.persists:
            return []
        return [q.id for q in queries if self.routes[q.id]["answerer"] != "people"]

    def submit(self, queries: Sequence[Query], segments: Mapping[str, Segment]) -> None:
        self._decide(queries, segments)  # nothing new when the loop screened them first
        mine, to_people, away = self._decided
        self._decided = ([], [], [])
        if to_people:
            self.people.submit(to_people, segments)
        if self.persists and self.store is not None:
            self._store_own(mine, away)
            # people's judgements carry no route: their query's meta says why it went to them
            self.store.queries.annotate({q.id: {"route": self.routes[q.id]} for q in to_people})
        self._pending.extend(mine)
        self._publish()

    def _decide(self, queries: Sequence[Query], segments: Mapping[str, Segment]) -> None:
        """Route the queries not routed yet: the model's and the AI's answers, people's
        queries and the ids of the others, kept for :meth:`submit` (``_decided``)."""
        todo = [q for q in queries if q.id not in self.routes]
        for q in todo:
            missing = [s for s in kind_of(q).segment_ids(q) if s not in segments]
            if missing:
                raise DataError(f"query {q.id} names segment(s) {missing} not passed to submit")
        mine, to_people, away = self._decided
        rest = self._ask_model(todo, segments, mine)
        orphans = self._ask_ai(rest, segments, mine, to_people)
        self._fallback(orphans, segments, mine)
        theirs = {q.id for q in to_people}
        away += [q.id for q in todo if q.id not in theirs]

    def _publish(self) -> None:
        """With people in the studio: the routing report into the store (:data:`ROUTING_SETTING`)."""
        if self.persists and self.store is not None:
            report = {**self.routing_report(), "updated_at": now()}
            self.store.settings.set(ROUTING_SETTING, _plain(report))

    def _budget(self, who: str) -> int | None:
        c = self.config
        return {"model": c.budget_model, "ai": c.budget_ai, "people": c.budget_people}[who]

    def _left(self, who: str) -> bool:
        cap = self._budget(who)
        return cap is None or self.used[who] < cap

    def _route(self, q: Query, answerer: str, reason: str, **extra: Any) -> dict[str, Any]:
        route = {"answerer": answerer, "reason": reason, **extra}
        self.routes[q.id] = route
        self.reasons[reason] += 1
        return route

    def _send_people(self, q: Query, reason: str, sink: list[Query], **extra: Any) -> bool:
        """Route ``q`` to people (into ``sink``) when their budget allows; False otherwise."""
        if not self._left("people"):
            return False
        self.used["people"] += 1
        self._route(q, "people", reason, **extra)
        sink.append(q)
        return True

    def _judgement(
        self, q: Query, answerer: str, p: float, route: Mapping[str, Any], **meta: Any
    ) -> Judgement:
        ai = answerer == "ai"
        return Judgement(
            id=route_id(q.id, answerer),
            query_id=q.id,
            annotator_id=self._ai_who[0] if ai else MODEL_ANNOTATOR,
            source=cast(SourceKind, self._ai_who[1]) if ai else "model",
            p=p,
            created_at=now(),
            response_time_s=0.0,
            meta={"route": dict(route), **meta},
        )

    def _ask_model(
        self, queries: list[Query], segments: Mapping[str, Segment], out: list[Judgement]
    ) -> list[Query]:
        """The pairs the ensemble is sure about become its answers; the rest are returned."""
        model = self.model_now() if self.config.use_model else None
        pairs = {q.id: kind_of(q).as_pair(q) for q in queries}
        asked = [(q, ab) for q in queries if (ab := pairs[q.id]) is not None]
        if model is None or not asked:
            return list(queries)
        answers = model_answers(
            model, [segments[a] for _, (a, _b) in asked], [segments[b] for _, (_a, b) in asked]
        )
        by_id = {q.id: a for (q, _), a in zip(asked, answers, strict=True)}
        rest: list[Query] = []
        tau = self.config.model_threshold
        for q in queries:
            a = by_id.get(q.id)
            if a is None or not (a.agree and a.confidence >= tau) or not self._left("model"):
                rest.append(q)
                continue
            route = self._route(q, "model", "model-confident", confidence=a.confidence, tau=tau)
            self.used["model"] += 1
            out.append(self._judgement(q, "model", a.p, route))
        return rest

    def _ask_ai(
        self,
        queries: list[Query],
        segments: Mapping[str, Segment],
        out: list[Judgement],
        to_people: list[Query],
    ) -> list[Query]:
        """The AI's answers where it is sure (or people's budget is spent), people's queries
        into ``to_people``; returns the queries nobody took yet (people's budget spent)."""
        orphans: list[Query] = []
        ask: list[Query] = []
        draws: dict[str, float] = {}
        skip: dict[str, str] = {}  # query id → why it is not asked of the AI
        for q in queries:
            if kind_of(q).as_pair(q) is None:
                skip[q.id] = "kind"
            elif not self._left("ai"):
                skip[q.id] = "ai-budget"
            else:
                draws[q.id] = float(self.rng.random())  # one draw per query asked of the AI
                self.used["ai"] += 1
                ask.append(q)
        got: dict[str, list[Judgement]] = defaultdict(list)
        if ask:
            self.ai.submit(ask, segments)
            for j in self.ai.collect():
                got[j.query_id].append(j)
                self._ai_who = [j.annotator_id, j.source]
        t = self.threshold()
        for q in queries:  # in the order asked: people's budget goes to the first
            if q.id in skip:
                if not self._send_people(q, skip[q.id], to_people):
                    orphans.append(q)
                continue
            side, conf = answer_of(got.get(q.id, []))
            if side is None:
                if not self._send_people(q, "ai-no-answer", to_people):
                    orphans.append(q)
                continue
            seen = {"ai_p": side, "ai_confidence": conf, "threshold": t}
            calibrate = draws[q.id] < self.config.calibration_share or t is None
            reason = "calibration" if t is not None else "calibration-warmup"
            if calibrate and self._send_people(q, reason, to_people, **seen):
                self.held[q.id] = {"p": side, "confidence": conf}
            elif t is not None and conf >= t:
                route = self._route(q, "ai", "ai-confident", confidence=conf, threshold=t)
                out.append(self._ai_label(q, side, route, got[q.id]))
            elif self._send_people(q, "ai-unsure", to_people, **seen):
                continue
            elif self.config.people_spent == "ai":
                route = self._route(q, "ai", "people-budget", confidence=conf, threshold=t)
                out.append(self._ai_label(q, side, route, got[q.id]))
            else:  # unsure, and people's budget spent: no label
                self._route(q, "none", "people-budget", ai_confidence=conf, threshold=t)
                self.unrouted += 1
        return orphans

    def _ai_label(
        self, q: Query, side: float, route: Mapping[str, Any], js: Sequence[Judgement]
    ) -> Judgement:
        """The AI's answer as the label, its own judgements (reasoning, tokens) in its meta."""
        return self._judgement(q, "ai", side, route, ai_judgements=[j.to_row() for j in js])

    def _fallback(
        self, queries: list[Query], segments: Mapping[str, Segment], out: list[Judgement]
    ) -> None:
        """Queries nobody with budget took: the model's guess (``people_spent = 'ai'``), else
        unanswered."""
        guess = self.config.people_spent == "ai"
        model = self.model_now() if queries and guess else None
        for q in queries:
            pair = kind_of(q).as_pair(q)
            if model is None or pair is None or not self._left("model"):
                self._route(q, "none", "budgets-spent")
                self.unrouted += 1
                continue
            a = model_answers(model, [segments[pair[0]]], [segments[pair[1]]])[0]
            route = self._route(q, "model", "budgets-spent", confidence=a.confidence)
            self.used["model"] += 1
            out.append(self._judgement(q, "model", a.p, route))

    def _store_own(self, mine: list[Judgement], away: list[str]) -> None:
        """People in the studio: store the router's answers (once) and withdraw every query
        that is not people's, so the studio does not offer it."""
        assert self.store is not None
        new = [j for j in mine if self.store.answers.get(j.id) is None]
        if new:
            self.store.answers.add(new, if_absent=True)
        if away:
            self.store.queries.withdraw(away)

    # ----- collect ------------------------------------------------------------------------------
    def collect(self) -> list[Judgement]:
        out = self._pending.collect()
        for j in out:
            self.labels[j.meta["route"]["answerer"]] += 1
        theirs = self.people.collect()
        by_query: dict[str, list[Judgement]] = defaultdict(list)
        for j in theirs:
            by_query[j.query_id].append(j)
        for qid, js in by_query.items():
            held = self.held.pop(qid, None)
            if held is not None:
                side, _ = answer_of(js)
                if side is not None and side != 0.5:
                    self.calibration.add(held["confidence"], held["p"] == side)
        for j in theirs:
            self.labels["people"] += 1
            route = self.routes.get(j.query_id)
            if route is not None and not self.people.persists:
                j = dataclasses.replace(j, meta={**j.meta, "route": dict(route)})
            out.append(j)
        if theirs:
            self._publish()
        return out

    # ----- B-Pref's margin (HoldsTeacher, people's) ---------------------------------------------
    @property
    def margin_teacher(self) -> SyntheticTeacher | None:
        """People's teacher when its skip or equal rule is relative to B-Pref's margin (the
        'oracle' of ``--route.people``): the loop sets its margin before each round's queries,
        as it does a teacher's that is the run's source; None otherwise."""
        return margin_teacher_of(self.people)

    # ----- the run's end (UndoWindow, passed on to people) --------------------------------------
    @property
    def has_undo_window(self) -> bool:
        """Whether its people keep answers undoable for a while (the studio, through the store)."""
        return isinstance(self.people, UndoWindow)

    def close_undo(self) -> None:
        """The run ends: people's answers inside their undo windows count now (the next
        :meth:`collect` returns them). Nothing to do when people have no undo window."""
        if isinstance(self.people, UndoWindow):
            self.people.close_undo()

    # ----- what it did, for summary.json --------------------------------------------------------
    def routing_report(self) -> dict[str, Any]:
        """Labels and budget used per answerer, reasons, the AI's live accuracy against people
        (with its Wilson interval) and its threshold now."""
        c = self.config
        budgets = {w: self._budget(w) for w in ANSWERERS}
        out: dict[str, Any] = {
            "ai": self.ai_name,
            "people": self.people_name,
            "labels": dict(self.labels),
            "asked": dict(self.used),
            "budgets": budgets,
            "reasons": dict(sorted(self.reasons.items())),
            "unrouted": self.unrouted,
            "calibration_share": c.calibration_share,
            "ai_accuracy": self.calibration.report(c.target_error),
        }
        if isinstance(self.ai, KnowsTruth):  # the simulated judge knows how often it is right
            out["ai_true_accuracy"] = self.ai.true_accuracy
        if isinstance(self.ai, ReportsUsage):  # a metered server's requests, tokens and cost
            out["ai_usage"] = self.ai.usage_report()
        return out

    # ----- FeedbackSource state -----------------------------------------------------------------
    def state(self) -> dict[str, Any]:
        """Everything a resumed run needs to route exactly as this one (JSON)."""
        return self._pending.state(
            self.rng,
            used=dict(self.used),
            labels=dict(self.labels),
            reasons=dict(self.reasons),
            routes=self.routes,
            held=self.held,
            unrouted=self.unrouted,
            calibration=self.calibration.state(),
            ai_who=list(self._ai_who),
            ai=self.ai.state(),
            people=self.people.state(),
        )

    def load_state(self, state: Mapping[str, Any]) -> None:
        """Continue from :meth:`state` (of a router built with the same arguments)."""
        keys = ("used", "labels", "reasons", "routes", "held", "unrouted", "calibration")
        self._pending.load_state(state, self.rng, (*keys, "ai_who", "ai", "people"))
        self.used = {w: int(state["used"].get(w, 0)) for w in ANSWERERS}
        self.labels = {w: int(state["labels"].get(w, 0)) for w in ANSWERERS}
        self.reasons = defaultdict(int, {k: int(v) for k, v in state["reasons"].items()})
        self.routes = {k: dict(v) for k, v in state["routes"].items()}
        self._decided = ([], [], [])
        self.held = {k: dict(v) for k, v in state["held"].items()}
        self.unrouted = int(state["unrouted"])
        self.calibration.load_state(state["calibration"])
        self._ai_who = [str(x) for x in state["ai_who"]]
        self.ai.load_state(state["ai"])
        self.people.load_state(state["people"])
