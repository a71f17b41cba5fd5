"""What paces a run: its clock, a part the loop is given (:func:`preflab.assemble.assemble`
builds it from the config).

- :class:`StepClock`: the env-step budget alone. Simulated sources answer at once, so the loop
  never waits; the run ends when its steps are spent.
- :class:`PeopleClock`: people answer (DESIGN.md, "Runs with people are paced by people"). The
  label budget is the run's clock: the trainer runs ahead of the answers by at most
  ``label_steps`` env steps per answer, then waits, saying so in the terminal and on every studio
  page, with one pair asked ahead (``ASK_AHEAD``); unanswered queries of older rounds are
  withdrawn when a round is published (but the newest open one); a pair asked and not withdrawn is not asked again; the
  run ends when the budget is answered, the owner presses Finish now, or ``--max-minutes``
  pass.

The loop asks its clock at four points (:class:`Clock`) and never tests which one it has.
"""

from __future__ import annotations

import logging
import math
import time
from typing import Any, Protocol

from preflab.config import TrainConfig
from preflab.records import STUDIO_CREATED, Judgement, Query, Segment
from preflab.store import FeedbackStore
from preflab.store.person_queue import pair_key

log = logging.getLogger(__name__)

WAIT_POLL_S = 0.5
"""How often a run waiting for people looks for new answers (s)."""
WAIT_LOG_EVERY_S = 30.0
"""How often a run waiting for people says so in the log (s)."""
ASK_AHEAD = 1
"""Pairs a run waiting for people keeps asked beyond the answers it needs now (within the label
budget, and only while the rest of the run needs more answers): the next pair's clips render
while a person answers the current one, so answering the last pair needed never leaves a person
waiting on clips, and a run never ends with a pair it asked ahead left open."""


class PacedRun(Protocol):
    """What a clock reads of the run and asks it to do (:class:`preflab.loop.PreferenceLoop`)."""

    config: TrainConfig
    store: FeedbackStore
    answer_hint: str

    @property
    def queries(self) -> dict[str, Query]:
        """The queries asked, by id (a clock may not replace the dict)."""
        ...

    @property
    def judgements(self) -> list[Judgement]:
        """The judgements collected."""
        ...

    @property
    def withdrawn(self) -> set[str]:
        """Ids of the queries withdrawn unanswered (a clock adds to it)."""
        ...

    @property
    def n_labels(self) -> int:
        """Labels of the last fit."""
        ...

    @property
    def env_steps(self) -> int:
        """Env steps taken so far."""
        ...

    @property
    def round(self) -> int:
        """The round the loop runs next."""
        ...

    def candidates(self) -> list[Segment]:
        """The segments queries may be asked about now."""
        ...

    def collect(self) -> int:
        """Take the answers that arrived; how many."""
        ...

    def ask_more(self, n_queries: int) -> None:
        """Ask ``n_queries`` more queries now (and publish them)."""
        ...

    def publish_waiting(self, status: dict[str, Any]) -> None:
        """Show every studio page that the trainer waits, and why."""
        ...

    def wall(self) -> float:
        """Training wall time so far (s), resumed parts included."""
        ...


class Clock(Protocol):
    """The four points at which the loop asks its clock."""

    publishes_episodes: bool
    """Whether people rate whole episodes the loop publishes (the studio's Rate view)."""
    warns_without_labels: bool
    """Whether a round with 0 labels is worth a warning (people get time: their clock says so
    in its waiting lines instead)."""

    def before_round(self, run: PacedRun) -> None:
        """Before a round asks its queries."""
        ...

    def fresh(self, run: PacedRun, queries: list[Query]) -> list[Query]:
        """The queries of ``queries`` to ask (those not asked already, for people)."""
        ...

    def may_train(self, run: PacedRun, n_steps: int) -> str | None:
        """Before ``n_steps`` more env steps: None to go on (after waiting, for people), else
        why the run ends now ('owner', 'deadline')."""
        ...

    def ended_by(self, run: PacedRun, so_far: str) -> str:
        """Why the run ended, given ``so_far`` ('steps' unless it was stopped)."""
        ...


class StepClock:
    """The env-step budget alone: nothing waits (simulated sources answer at once)."""

    publishes_episodes = False
    warns_without_labels = True

    def before_round(self, run: PacedRun) -> None:
        return None

    def fresh(self, run: PacedRun, queries: list[Query]) -> list[Query]:
        return queries

    def may_train(self, run: PacedRun, n_steps: int) -> str | None:
        return None

    def ended_by(self, run: PacedRun, so_far: str) -> str:
        return so_far


class PeopleClock:
    """People answer: the label budget paces the run (module docstring)."""

    publishes_episodes = True
    warns_without_labels = False

    def __init__(self) -> None:
        self._waiting_since: float | None = None
        self._answered = AnsweredIds()
        self._facts = QueryFacts()

    def open_queries(self, run: PacedRun) -> list[str]:
        """Asked, not withdrawn, and no answer yet to the query or to its pair (people are never
        asked a pair twice; the studio shows one query per pair). A group comparison composed
        in the studio is never open: it is stored with its answer, and nobody is asked it (one
        whose answer was undone would otherwise wait for an answer forever)."""
        answered, withdrawn = self._answered.of(run.judgements), run.withdrawn
        memo, work_out = self._facts.memo, self._facts.work_out
        done: set[tuple[str, ...]] = set()  # the pairs answered
        unanswered: list[tuple[str, tuple[str, ...]]] = []  # in order, with their pairs
        for qid, q in run.queries.items():  # one pass, each query's facts looked up once
            facts = memo.get(qid)
            if facts is None or facts[0] is not q:
                facts = work_out(qid, q)
            if qid in answered:
                done.add(facts[1])
            elif qid not in withdrawn and not facts[2]:
                unanswered.append((qid, facts[1]))
        out: list[str] = []
        for qid, key in unanswered:
            if key not in done:
                done.add(key)  # a second open query of the same pair is not another question
                out.append(qid)
        return out

    def before_round(self, run: PacedRun) -> None:
        """Unanswered queries of older rounds leave the studio when a round is published (a
        judgement already on its way still counts); first, so that the schedule asks again
        for what leaves. The newest ``ASK_AHEAD`` open queries stay: a run waiting for people
        keeps that many open beyond those it needs, so one is open whenever the trainer goes
        on, most likely the pair on a person's screen."""
        open_now = self.open_queries(run)
        kept = set(open_now[len(open_now) - ASK_AHEAD :]) if ASK_AHEAD else set()
        old = [q for q in open_now if run.queries[q].round < run.round and q not in kept]
        if old:
            run.store.queries.withdraw(old)
            run.withdrawn.update(old)

    def fresh(self, run: PacedRun, queries: list[Query]) -> list[Query]:
        """A pair asked (and not withdrawn) is not asked again."""
        asked = {
            self._facts.key(qid, q) for qid, q in run.queries.items() if qid not in run.withdrawn
        }
        out = []
        for q in queries:
            if pair_key(q) not in asked:
                asked.add(pair_key(q))
                out.append(q)
        return out

    @staticmethod
    def stop_requested(run: PacedRun) -> str | None:
        """'owner' when the owner pressed Finish now, 'deadline' after --max-minutes."""
        if run.store.settings.get("finish") is not None:
            return "owner"
        c = run.config
        if c.max_minutes is not None and run.wall() >= 60.0 * c.max_minutes:
            return "deadline"
        return None

    @staticmethod
    def asked(run: PacedRun, answered: set[str] | None = None) -> int:
        """Queries that take from the label budget: asked and not withdrawn; a group
        comparison composed in the studio only while its answer counts (one undone takes
        nothing, so the trainer may ask another question in its place). ``answered``: the ids
        of the queries ``run.judgements`` answer, when the caller has them."""
        if answered is None:
            answered = {j.query_id for j in run.judgements}
        withdrawn = run.withdrawn
        return sum(
            qid not in withdrawn and (qid in answered or not _composed(q))
            for qid, q in run.queries.items()
        )

    @staticmethod
    def answers_needed(run: PacedRun, n_steps: int) -> int:
        """Answers still missing before the trainer may take ``n_steps`` more env steps."""
        c = run.config
        if len(run.judgements) >= c.total_labels:
            return 0  # the label budget is met: the rest of the steps run
        ahead = run.env_steps + n_steps - c.pretrain_steps
        return max(0, min(c.total_labels, math.ceil(ahead / c.label_steps)) - len(run.judgements))

    def may_train(self, run: PacedRun, n_steps: int) -> str | None:
        """Wait until people have answered enough for ``n_steps`` more env steps."""
        logged = 0.0
        c = run.config
        while True:
            stop = self.stop_requested(run)
            if stop is not None:
                return stop
            run.collect()
            need = self.answers_needed(run, n_steps)
            if need == 0:
                if self._waiting_since is not None:
                    log.info("answers in: training goes on")
                    self._waiting_since = None
                return None
            open_now = self.open_queries(run)
            if not open_now and len(run.candidates()) < 2:
                log.info("nothing to compare yet (fewer than 2 segments): training goes on")
                return None  # people cannot answer what does not exist: collect steps first
            spare = c.total_labels - self.asked(run, self._answered.of(run.judgements))
            # one pair ready beyond those needed, if the rest of the run still needs it
            useful = self.answers_needed(run, c.total_steps - run.env_steps)
            want = min(need + ASK_AHEAD, max(need, useful))
            if len(open_now) < want and spare > 0:  # too little left to answer: ask more now
                run.ask_more(min(want - len(open_now), spare))
                open_now = self.open_queries(run)
            now = time.monotonic()
            if self._waiting_since is None:
                self._waiting_since = now
            latest = max((q.round for q in run.queries.values()), default=0)
            asked = [qid for qid, q in run.queries.items() if q.round == latest]
            done = self._answered.of(run.judgements)
            status = {
                "answered": sum(q in done for q in asked),
                "asked": len(asked),
                "needed": need,
                "n_judgements": len(run.judgements),
                "n_labels": run.n_labels,
            }
            run.publish_waiting(status)
            if now - logged >= WAIT_LOG_EVERY_S:
                logged = now
                log.info(
                    "waiting for you: %d of %d answered this round (%d more answers let the "
                    "trainer go on; it runs ahead by at most %.0f env steps per answer); %s",
                    status["answered"],
                    status["asked"],
                    need,
                    c.label_steps,
                    run.answer_hint,
                )
            time.sleep(WAIT_POLL_S)

    def ended_by(self, run: PacedRun, so_far: str) -> str:
        """'labels' when people answered the whole budget (unless the owner or the deadline
        stopped the run first)."""
        if so_far != "steps":
            return so_far
        return "labels" if len(run.judgements) >= run.config.total_labels else "steps"


def make_clock(config: TrainConfig) -> Clock:
    """The clock ``config`` asks for: people's when the run is paced by labels."""
    return PeopleClock() if config.paced_by_labels else StepClock()


class AnsweredIds:
    """The ids of the queries a list of judgements answers (``{j.query_id for j in js}``), kept
    up as the list grows: a poll costs the judgements that came since the last one, not the
    run's size. A run appends judgements as they come and replaces its list when some stop
    counting (:meth:`preflab.loop.asking.Asker.labels`, a resume); another list, a shorter
    one, or one whose last judgement read is no longer where it was, is read afresh."""

    def __init__(self) -> None:
        self._list: list[Judgement] | None = None
        self._n = 0
        self._last: Judgement | None = None
        self._ids: set[str] = set()

    def of(self, judgements: list[Judgement]) -> set[str]:
        """The ids of the queries ``judgements`` answer (read it; do not change it)."""
        n = self._n
        if (
            judgements is not self._list
            or len(judgements) < n
            or (n and judgements[n - 1] is not self._last)
        ):
            self._list, n, self._ids = judgements, 0, set()
        if len(judgements) > n:
            self._ids.update(j.query_id for j in judgements[n:])
        self._n = len(judgements)
        self._last = judgements[-1] if judgements else None
        return self._ids


class QueryFacts:
    """What a clock reads of an asked query that never changes (stored queries are
    immutable), worked out once per query: its :func:`pair_key` (two sorted joins) and whether
    a person composed it in the studio. By query id; an id met with another Query object is
    worked out again."""

    def __init__(self) -> None:
        self.memo: dict[str, tuple[Query, tuple[str, ...], bool]] = {}
        """Query id → (the query, its pair key, composed): valid while the query is the one
        asked under that id (``memo[qid][0] is q``); else :meth:`work_out` it."""

    def work_out(self, qid: str, q: Query) -> tuple[Query, tuple[str, ...], bool]:
        """(``q``, its pair key, whether it was composed), remembered for ``qid``."""
        facts = self.memo[qid] = (q, pair_key(q), _composed(q))
        return facts

    def key(self, qid: str, q: Query) -> tuple[str, ...]:
        """``pair_key(q)`` of the query ``q`` with id ``qid``."""
        facts = self.memo.get(qid)
        return facts[1] if facts is not None and facts[0] is q else self.work_out(qid, q)[1]


def _composed(q: Query) -> bool:
    """A group comparison a person composed (and answered) in the studio, not one asked."""
    return q.meta.get("created_by") == STUDIO_CREATED
