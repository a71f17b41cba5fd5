"""Asking and collecting: one round's queries made, stored and sent to the source, the answers
taken back, and the answers turned into labels (:class:`Asker`).

Each round the loop asks its :class:`Asker` for the round's due queries (the label schedule less
what was asked already), which the selector picks from the newest segments; they are given
deterministic ids (the run's seed tag, round, position), stored before the source sees them, and
submitted. :meth:`Asker.collect` takes what the source answered (and, for rating sources, the new
rating streams), gives a non-persisting source's answers deterministic ids and stores them before
they count. :meth:`Asker.labels` turns everything counted into labels through the aggregator.

After a resume, the store may hold queries and judgements from beyond the checkpoint: the
replayed round recreates the same ids, which are then skipped rather than added twice, and
stored queries it does not ask again are adopted (:meth:`Asker.adopt`).
"""

from __future__ import annotations

import dataclasses
import logging
import math
import time
from collections.abc import Callable, Sequence
from typing import Any

import numpy as np

from preflab.aggregate import Feedback
from preflab.config import TrainConfig
from preflab.env_families import episode_limit
from preflab.kinds import kind_of
from preflab.loop.pacing import AnsweredIds
from preflab.loop.results import RECENT_EPISODES, RunParts, derived_id, label_schedule
from preflab.records import Judgement, Label, Query, Rating, Segment
from preflab.sources.base import Screens
from preflab.sources.ratings import RatingLog
from preflab.testing.failpoints import failpoint

log = logging.getLogger(__name__)

COLLECT_POLL_S = 0.2
"""How often :meth:`Asker.collect` looks for answers while ``wait_for_labels_s`` lasts (s)."""

FreshFn = Callable[[list[Query]], list[Query]]
"""The run's clock's filter of newly made queries (:meth:`preflab.loop.pacing.Clock.fresh`)."""


class Asker:
    """Owns what a run asked and was answered: its queries (and which were withdrawn), the rating
    streams people rate, the judgements and ratings collected, the segments they name, and the
    labels count of the last aggregation; makes, stores and submits queries, collects and stores
    answers, and turns them into labels. The loop hands it the segment pool at each call."""

    def __init__(self, config: TrainConfig, parts: RunParts) -> None:
        self.config = config
        self.store = parts.store
        self.source = parts.source
        self.selector = parts.selector
        self.aggregator = parts.aggregator
        self.bridge = parts.bridge
        self.hooks = parts.hooks
        self.rng = parts.rng
        self.tag = parts.tag
        self.warnings = parts.warnings
        self.parts = parts
        self.schedule = label_schedule(
            config.total_labels, config.initial_label_frac, config.n_rounds, config.schedule
        )
        """Queries to ask in round 0 and each later round (:func:`label_schedule`)."""
        self.rating_log = RatingLog()
        self.ratings: list[Rating] = self.rating_log.ratings
        """Every rating taken in (``Feedback.ratings``)."""
        self.rating_queries: dict[str, Query] = {}
        """People's rating streams (episodes published for the studio's Rate view and the
        streams they rated), kept apart from the queries that count towards the label budget."""
        self.segments: dict[str, Segment] = {}
        """Every segment a query, stream or label names, by id."""
        self.queries: dict[str, Query] = {}
        """The queries asked (and adopted), by id, in the order they were asked."""
        self.judgements: list[Judgement] = []
        """The judgements collected and counted, in the order they came."""
        self.known_judgements: set[str] = set()
        """Ids of the judgements collected (an answer is taken once)."""
        self.n_labels = 0
        """Labels of the last aggregation (:meth:`labels`)."""
        self.n_ties = 0
        """Of those, the ties (p = 0.5)."""
        self.withdrawn: set[str] = set()
        """Queries withdrawn unanswered (people: a newer round was published)."""
        self.dropped: set[str] = set()
        """Judgements collected and then dropped because they no longer counted (undone, or by
        a person excluded): gone for good, also for a run resumed from a later checkpoint."""
        self._stored_queries: set[str] = set()
        """After a resume: query ids the store has (recreated, not added again)."""
        self._stored_judgements: set[str] = set()
        """After a resume: judgement ids the store has from beyond the checkpoint."""
        self.orphans_pending = False
        """After a resume: the store holds queries the checkpoint does not name (adopted by
        :meth:`adopt`)."""
        self._answered = AnsweredIds()
        """The ids of the queries ``judgements`` answer, kept up as answers come."""

    # ----- asking ------------------------------------------------------------------------------
    def due(self, round_: int) -> int:
        """Queries to ask now: the schedule's cumulative target for this round minus those already
        asked (so a resumed run never asks a round's queries twice)."""
        target = sum(self.schedule[: round_ + 1])
        asked = len(self.queries) - len(self.withdrawn)  # a withdrawn query is asked again
        return max(0, min(target, self.config.total_labels) - asked)

    def ask(
        self,
        n_queries: int,
        candidates: list[Segment],
        round_: int,
        fresh: FreshFn,
        *,
        extra: bool = False,
    ) -> None:
        """Pick ``n_queries`` queries about ``candidates`` (the newest segments), keep those
        ``fresh`` lets through, store them with their segments, and submit them. ``extra``:
        asked while waiting for people, numbered after those asked so far."""
        if n_queries <= 0:
            return
        if len(candidates) < 2:
            log.warning("round %d: fewer than 2 segments recorded; no queries asked", round_)
            return
        reward = self.parts.reward
        picked = self.selector.select(
            candidates, reward.model if reward.fitted else None, n_queries, self.rng, round=round_
        )
        qs = [
            dataclasses.replace(
                q,
                id=derived_id("q", self.tag, round_, k, q.kind, q.a, q.b)
                if not extra
                else derived_id("qx", self.tag, round_, len(self.queries) + k, q.a, q.b),
            )
            for k, q in enumerate(picked)
        ]
        qs = fresh(qs)
        seg_map = {s.id: s for s in candidates}
        if self.hooks.segment_maker is not None:  # port: queries about sampled states
            seg_map.update(self.hooks.segment_maker.made_segments())
        needed = [seg_map[sid] for q in qs for sid in (*q.a, *q.b)]
        self.store.segments.add(needed)
        self.segments.update({s.id: s for s in needed})
        # a router decides first who answers: people are never offered a query not theirs
        away = self.source.screen(qs, seg_map) if isinstance(self.source, Screens) else []
        self.store.queries.add([q for q in qs if q.id not in self._stored_queries], withdrawn=away)
        failpoint("queries_stored")
        self.queries.update({q.id: q for q in qs})
        self._set_teacher_margin()
        self.source.submit(qs, seg_map)

    def _set_teacher_margin(self) -> None:
        """B-Pref's margin, for a teacher whose skip or equal rule is relative: the mean true
        return of the last 10 episodes that ended in training, the random steps' included
        (:func:`preflab.loop.rollouts.record_episodes`), × segment length / episode limit (NaN
        before an episode has ended, or without a limit: no skip or equal answer)."""
        teacher = self.hooks.margin_teacher
        if teacher is None:
            return
        agent = self.parts.agent
        ep = [e["r"] for e in agent.ep_info_buffer] if agent.ep_info_buffer else []
        limit = episode_limit(self.parts.venv.get_attr("spec", indices=[0])[0])
        if limit is None:
            self.warnings.warn(
                "teacher_without_margin",
                "the teacher's skip and equal rules (B-Pref's, relative to a margin) never apply: "
                "the margin needs the env's episode limit, and this env states none; register "
                "or wrap it with a time limit (gymnasium.wrappers.TimeLimit, max_episode_steps)",
            )
        margin = math.nan
        if ep and limit:
            margin = float(np.mean(ep[-RECENT_EPISODES:])) * self.config.segment_length / limit
        teacher.set_margin(margin)

    def publish_episodes(self, round_: int, pool: list[Segment]) -> None:
        """People: the most recent whole episodes go to the studio's Rate view (Pref-GUIDE;
        ``config.rate_episodes`` per round); their ratings arrive through :meth:`collect`."""
        c = self.config
        if self.bridge is None or not self.parts.clock.publishes_episodes or c.rate_episodes <= 0:
            return
        done = {
            int(q.meta["episode"])
            for q in self.rating_queries.values()
            if q.meta.get("episode") is not None
        }
        streams = self.bridge.publish_episodes(
            round_, pool, c.rate_episodes, self.rating_queries, done
        )
        by_id = {s.id: s for s in pool}
        self.segments.update({sid: by_id[sid] for q in streams for sid in q.a})
        self.rating_queries.update({q.id: q for q in streams})

    # ----- collecting --------------------------------------------------------------------------
    def collect(self, pool: list[Segment]) -> int:
        """Take the rating streams and answers that arrived (waiting up to
        ``wait_for_labels_s`` for unanswered queries); how many judgements came."""
        self.take_ratings(pool)
        deadline = time.monotonic() + self.config.wait_for_labels_s
        got = 0
        while True:
            new = self.source.collect()
            if not self.source.persists:
                new = self._identify(new)
            new = [j for j in new if j.id not in self.known_judgements]
            new = self._not_streams(new)
            if new:
                if not self.source.persists:
                    fresh = [j for j in new if j.id not in self._stored_judgements]
                    self.store.answers.add(fresh)
                    failpoint("judgements_stored")
                self.judgements.extend(new)
                self.known_judgements.update(j.id for j in new)
                got += len(new)
            answered = self._answered.of(self.judgements)
            # the newest first: a query still waiting is most likely among the last asked
            waiting = any(
                q not in answered and q not in self.withdrawn for q in reversed(self.queries)
            )
            if not waiting or time.monotonic() >= deadline:
                return got
            time.sleep(COLLECT_POLL_S)

    def _identify(self, judgements: list[Judgement]) -> list[Judgement]:
        """Deterministic ids for judgements a non-persisting source made (one per answer)."""
        seen: dict[tuple[str, str], int] = {}
        for j in self.judgements:
            key = (j.query_id, j.annotator_id)
            seen[key] = seen.get(key, 0) + 1
        out = []
        for j in judgements:
            key = (j.query_id, j.annotator_id)
            n = seen.get(key, 0)
            seen[key] = n + 1
            out.append(dataclasses.replace(j, id=derived_id("j", j.query_id, j.annotator_id, n)))
        return out

    def take_ratings(self, pool: list[Segment]) -> None:
        """Rating streams (scalar feedback): into the store and Feedback.ratings. People's
        streams (a persisting source) go to ``rating_queries``, a simulated rater's to
        ``queries``."""
        raters = self.hooks.ratings
        if raters is not None:
            into = self.rating_queries if raters.persists else self.queries
            self.rating_log.take(raters, self.store, pool, into, self.segments)

    def _not_streams(self, judgements: list[Judgement]) -> list[Judgement]:
        """Judgements without those that name a rating stream: a stream is rated, not answered
        (the studio refuses such answers; a store written by other means may hold them)."""
        if not self.rating_queries:
            return judgements
        return [j for j in judgements if j.query_id not in self.rating_queries]

    def is_equal(self, j: Judgement) -> bool:
        """True for an answer of "all equally good" (as its query's kind defines it)."""
        q = self.queries.get(j.query_id)
        if q is None:  # not asked by this run (e.g. composed in the studio): a pair or group
            return j.p == 0.5
        return kind_of(q).is_equal(q, j)

    # ----- labels ------------------------------------------------------------------------------
    def labels(self) -> list[Label]:
        """The labels of everything counted, through the aggregator (sets ``n_labels`` and
        ``n_ties``). An answer undone in the studio after it was collected never counts (the
        store decides)."""
        before = len(self.judgements)
        kept = self.store.answers.counted(self.judgements)
        self.dropped |= {j.id for j in self.judgements} - {j.id for j in kept}
        self.judgements = kept
        if len(self.judgements) < before:  # undone in the studio, or a person excluded (#61)
            log.info(
                "%d judgement(s) no longer count (undone, or by a person the owner excluded); "
                "the next fit leaves them out",
                before - len(self.judgements),
            )
        queries = (
            {**self.queries, **self.rating_queries} if self.rating_queries else self.queries
        )  # every query an aggregator may meet: the asked ones and the rating streams
        labels = self.aggregator.labels(
            Feedback(
                queries=queries,
                judgements=self.judgements,
                ratings=self.ratings,
                segments=self.segments,
            )
        )
        self.n_labels = len(labels)
        self.n_ties = sum(lab.p == 0.5 for lab in labels)
        return labels

    def segments_of(self, ids: Sequence[str]) -> list[Segment]:
        """The segments with ``ids`` (those not met yet read from the store)."""
        missing = [i for i in ids if i not in self.segments]
        if missing:
            self.segments.update({s.id: s for s in self.store.segments.get(missing)})
        return [self.segments[i] for i in ids]

    # ----- adoption and resume -----------------------------------------------------------------
    def adopt(self, pool: list[Segment]) -> None:
        """Queries asked by others join the run: group queries people composed in the studio,
        and (after a resume) the stored queries from beyond the checkpoint."""
        if self.bridge is not None:
            self.queries.update({q.id: q for q in self.bridge.adopt_queries(self.queries)})
        if self.orphans_pending:
            self._adopt_orphans(pool)

    def _streams(self) -> set[str]:
        """Stored rating streams that are not the run's queries (people rate them in the studio;
        they are not asked), so a resume does not adopt them as orphans."""
        if not self.source.persists:
            return set()
        return {q.id for q in self.store.queries.all() if kind_of(q).streams}

    def _adopt_orphans(self, pool: list[Segment]) -> None:
        """After a resume: queries the store holds from beyond the checkpoint that the replayed
        round did not ask again join the run; unanswered ones go to the source again."""
        self.orphans_pending = False
        streams = self._streams()
        orphans = [
            q for q in self.store.queries.all() if q.id not in self.queries and q.id not in streams
        ]
        if not orphans:
            return
        answered = {j.query_id for j in self.judgements}
        self.queries.update({q.id: q for q in orphans})
        redo = [q for q in orphans if q.id not in answered]
        log.info("resume: %d stored queries rejoin the run, %d re-asked", len(orphans), len(redo))
        if redo and not self.source.persists:
            ids = sorted({s for q in redo for s in (*q.a, *q.b)})
            segs = {s.id: s for s in self.store.segments.get(ids)}
            self.segments.update(segs)
            self._set_teacher_margin()
            self.source.submit(redo, segs)
            self.collect(pool)

    def state(self) -> dict[str, Any]:
        """Its share of the loop's checkpoint state (JSON): labels and ties counts, query ids,
        the store's judgement mark, withdrawn ids, dropped judgement ids."""
        return {
            "n_labels": self.n_labels,
            "n_ties": self.n_ties,  # the run's end warnings read it (a resume after the last round)
            "queries": list(self.queries),
            "rating_queries": list(self.rating_queries),
            "judgement_seq": self.store.answers.max_seq(),
            "withdrawn": sorted(self.withdrawn),
            "dropped": sorted(self.dropped),
        }

    def load_state(self, loop: dict[str, Any]) -> None:
        """Back to :meth:`state` (``loop``: the loop's checkpoint state); the queries are read
        from the store."""
        self.n_labels = loop["n_labels"]
        # a checkpoint from before the ties were kept: 0, as such a checkpoint always resumed
        # (the next fit sets it). Not recomputed: that would run the aggregator, whose own state
        # (e.g. a capped or windowed one) would move on, and the judgements are not back yet
        self.n_ties = int(loop.get("n_ties", 0))
        self.withdrawn = set(loop.get("withdrawn", ()))
        self.dropped = set(loop.get("dropped", ()))
        stored = {q.id: q for q in self.store.queries.all()}
        self.queries = {qid: stored[qid] for qid in loop["queries"]}
        self.rating_queries = {qid: stored[qid] for qid in loop.get("rating_queries", ())}

    def note_stored_queries(self) -> None:
        """Resume, first step: the queries the store holds (recreated, not added again)."""
        self._stored_queries = {q.id for q in self.store.queries.all()}

    def resume_judgements(self, mark: int) -> None:
        """Resume, last step: the stored judgements up to ``mark`` (the checkpoint's sequence
        number) count; those beyond it are recreated by the replayed round, not added again;
        stored queries the checkpoint does not name are adopted in the next round."""
        rows = self.store.answers.judgements(
            include_retracted=True
        )  # the replay decides what counts
        self.judgements = [j for seq, j in rows if seq <= mark and j.id not in self.dropped]
        self._stored_judgements = {j.id for seq, j in rows if seq > mark}
        self.known_judgements = {j.id for j in self.judgements} | self.dropped
        self.orphans_pending = bool(self._stored_queries - set(self.queries) - self._streams())
