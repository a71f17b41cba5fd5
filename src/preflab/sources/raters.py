"""Simulated real-time evaluators as a feedback source of the one loop (Pref-GUIDE).

During the loop's live phase (``TrainConfig.policy_reward.live_steps``) every step the agent
takes is rated by S simulated evaluators (:class:`preflab.sources.evaluators.Rater`); the mean rating is the
policy's reward (:meth:`SimulatedRaters.rate`, the :class:`preflab.policy.shaping.LiveRating`
protocol). Each round the loop drains what was rated (:meth:`SimulatedRaters.ratings`) with its
recently recorded segments, which are the stream items (``TrainConfig.segment_length`` = item
length, e.g. 1–5 steps): the items of one env episode, in order and without gaps, form one
stream, stored as a query of kind 'rating' (``a`` = the consecutive item ids); every evaluator's
rating of every step becomes a :class:`~preflab.records.Rating` row (annotator = evaluator id,
stream_id = the query id, step = step within the stream, t = a deterministic time: the env's
rated-step count / ``fps``). An episode that spans a round boundary gives two streams; steps of
an item cut short by an episode end are dropped, like the recorder drops the item. The loop
stores all of it and hands the ratings to the aggregator (Window/Voting) in ``Feedback.ratings``.
"""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Mapping, Sequence
from typing import Any, cast

import numpy as np

from preflab.errors import ConfigError, DataError
from preflab.kinds import RATING, kind_of
from preflab.records import Judgement, Query, Rating, Segment
from preflab.reward.protocol import RewardModel
from preflab.sources.evaluators import EvaluatorConfig, Rater
from preflab.sources.ratings import RatingBatch


class SimulatedRaters:
    """S simulated evaluators rating every step of ``n_envs`` envs live (one stream per env)."""

    persists = False

    def __init__(
        self,
        evaluators: Sequence[EvaluatorConfig],
        n_envs: int,
        rng: np.random.Generator,
        *,
        scale: float,
        ids: Sequence[str] | None = None,
        fps: float = 20.0,
    ) -> None:
        if not evaluators:
            raise ConfigError("SimulatedRaters needs at least one evaluator config")
        self.ids = (
            tuple(ids)
            if ids is not None
            else tuple(f"evaluator-{k}" for k in range(len(evaluators)))
        )
        if len(self.ids) != len(evaluators) or len(set(self.ids)) != len(self.ids):
            raise ConfigError(
                f"ids must name each of the {len(evaluators)} evaluators once, got {self.ids}"
            )
        if not fps > 0:
            raise ConfigError(f"fps must be > 0, got {fps}")
        self.evaluators = tuple(evaluators)
        self.n_envs = n_envs
        self.rng = rng
        self.fps = float(fps)
        self.rater = Rater(list(evaluators), n_envs, rng, scale=scale)
        self._tick = np.zeros(n_envs, np.int64)
        self._current = np.full(n_envs, -1, np.int64)
        self._pending: dict[tuple[int, int], tuple[float, np.ndarray]] = {}
        self.n_rated = 0
        """Env steps rated so far (all envs)."""

    # ----- live rating (LiveRating) ----------------------------------------------------------
    def rate(self, true_rewards: np.ndarray, episodes: np.ndarray, steps: np.ndarray) -> np.ndarray:
        """Every evaluator rates the step each env just took; returns the mean rating (n_envs,)."""
        q = np.asarray(true_rewards, np.float64).reshape(-1)
        if q.shape[0] != self.n_envs:
            raise DataError(f"expected {self.n_envs} rewards (one per env), got {q.shape[0]}")
        values = self.rater.rate(q)  # (S, n_envs)
        for e in range(self.n_envs):
            key = (int(episodes[e]), int(steps[e]))
            self._pending[key] = (float(self._tick[e]) / self.fps, values[:, e].copy())
        self._current[:] = episodes
        self._tick += 1
        self.n_rated += self.n_envs
        return cast(np.ndarray, values.mean(0))

    # ----- drain (RatingSource) ------------------------------------------------------------------
    def ratings(self, segments: Sequence[Segment] = ()) -> RatingBatch:
        """Streams cut from ``segments`` whose every step was rated, with their ratings."""
        by_episode: dict[int, dict[int, Segment]] = defaultdict(dict)
        for s in segments:
            if all((s.episode, s.start + j) in self._pending for j in range(s.length)):
                by_episode[s.episode][s.start] = s
        items: list[Segment] = []
        queries: list[Query] = []
        rows: list[Rating] = []
        for episode in sorted(by_episode):
            starts = sorted(by_episode[episode])
            runs: list[list[Segment]] = []
            for st in starts:
                seg = by_episode[episode][st]
                if runs and runs[-1][-1].start + runs[-1][-1].length == st:
                    runs[-1].append(seg)
                else:
                    runs.append([seg])
            for run in runs:
                qid = f"stream-{episode}-{run[0].start}"
                queries.append(
                    Query(
                        id=qid,
                        kind=RATING.name,
                        a=tuple(s.id for s in run),
                        round=max(s.round for s in run),
                        meta={"episode": episode, "start": run[0].start, "source": "scalar"},
                    )
                )
                items.extend(run)
                k = 0
                for seg in run:
                    for j in range(seg.length):
                        t, vals = self._pending.pop((episode, seg.start + j))
                        rows.extend(
                            Rating(annotator_id=a, stream_id=qid, step=k, t=t, value=float(v))
                            for a, v in zip(self.ids, vals, strict=True)
                        )
                        k += 1
        live = set(self._current.tolist())
        for key in [k for k in self._pending if k[0] not in live]:
            del self._pending[key]  # steps of items cut short by an episode end
        return RatingBatch(segments=tuple(items), queries=tuple(queries), ratings=tuple(rows))

    # ----- FeedbackSource -------------------------------------------------------------------------
    def submit(self, queries: Sequence[Query], segments: Mapping[str, Segment]) -> None:
        """Simulated raters rate live and answer no queries; pass ``selector=NoQueries()``."""
        asked = [q for q in queries if not kind_of(q).streams]  # its own streams may come back
        if asked:
            raise DataError(
                f"SimulatedRaters rate every step live and answer no {kind_of(asked[0]).title} "
                "queries; run the loop with selector=preflab.sources.raters.NoQueries()"
            )

    def collect(self) -> list[Judgement]:
        """No judgements: everything arrives as ratings (see :meth:`ratings`)."""
        return []

    # ----- state (resume) --------------------------------------------------------------------------
    def state(self) -> dict[str, Any]:
        """JSON-serialisable state: generator, evaluators' inner state, unmatched ratings."""
        r = self.rater
        return {
            "kind": "scalar",
            "rng": self.rng.bit_generator.state,
            "m": None if r.m is None else r.m.tolist(),
            "seen": None if r.seen is None else r.seen.tolist(),
            "e": r.e.tolist(),
            "lapse_left": r.lapse_left.tolist(),
            "last": r.last.tolist(),
            "tick": self._tick.tolist(),
            "current": self._current.tolist(),
            "n_rated": self.n_rated,
            "pending": [[k[0], k[1], t, v.tolist()] for k, (t, v) in self._pending.items()],
        }

    def load_state(self, state: Mapping[str, Any]) -> None:
        """Restore what :meth:`state` returned."""
        r = self.rater
        if state.get("kind") != "scalar":
            raise DataError(
                f"this is the state of a {state.get('kind')!r} source, not of SimulatedRaters; "
                "load a state into a source of the kind that saved it"
            )
        try:
            self.rng.bit_generator.state = state["rng"]
            r.m = None if state["m"] is None else np.asarray(state["m"], np.float64)
            seen = state.get("seen")  # absent in states saved before evaluators had a delay
            r.seen = None if seen is None else np.asarray(seen, np.float64)
            r.e = np.asarray(state["e"], np.float64)
            r.lapse_left = np.asarray(state["lapse_left"], np.int64)
            r.last = np.asarray(state["last"], np.float64)
            self._tick = np.asarray(state["tick"], np.int64)
            self._current = np.asarray(state["current"], np.int64)
            self.n_rated = int(state["n_rated"])
            self._pending = {
                (int(ep), int(st)): (float(t), np.asarray(v, np.float64))
                for ep, st, t, v in state["pending"]
            }
        except (KeyError, TypeError, ValueError) as exc:
            raise DataError(f"not a SimulatedRaters state: {exc}") from exc


class NoQueries:
    """A selector that asks nothing: for runs whose feedback is rating streams only."""

    def select(
        self,
        candidates: Sequence[Segment],
        ensemble: RewardModel | None,
        n_queries: int,
        rng: np.random.Generator,
        *,
        round: int = 0,
    ) -> list[Query]:
        return []


class StreamSelector:
    """Publishes rating streams for people (the studio's rating mode): the recorded items of
    one episode, in order and without gaps, as a query of kind 'rating' (``a`` = the item ids).

    Each item is published once (streams are cut from what was recorded since); streams
    shorter than ``min_items`` wait for more items. People's ratings come back through the
    store (:meth:`preflab.sources.StoreSource.ratings`).
    """

    def __init__(self, *, min_items: int = 10) -> None:
        if min_items < 1:
            raise ConfigError(f"min_items must be ≥ 1, got {min_items}")
        self.min_items = min_items
        self._published: set[tuple[int, int]] = set()

    def select(
        self,
        candidates: Sequence[Segment],
        ensemble: RewardModel | None,
        n_queries: int,
        rng: np.random.Generator,
        *,
        round: int = 0,
    ) -> list[Query]:
        """Up to ``n_queries`` new streams, oldest episode first."""
        by_episode: dict[int, dict[int, Segment]] = defaultdict(dict)
        for s in candidates:
            if (s.episode, s.start) not in self._published:
                by_episode[s.episode][s.start] = s
        out: list[Query] = []
        for episode in sorted(by_episode):
            run: list[Segment] = []
            for st in sorted(by_episode[episode]):
                seg = by_episode[episode][st]
                if run and run[-1].start + run[-1].length != st:
                    out += self._stream(episode, run, round)
                    run = []
                run.append(seg)
            out += self._stream(episode, run, round)
        out = out[: max(0, n_queries)]
        for q in out:
            start = int(q.meta["start"])
            for k in range(len(q.a)):
                self._published.add(
                    (int(q.meta["episode"]), start + k * int(q.meta["item_length"]))
                )
        return out

    def _stream(self, episode: int, run: list[Segment], round: int) -> list[Query]:
        if len(run) < self.min_items or len({s.length for s in run}) != 1:
            return []
        return [
            Query(
                id=f"stream-{episode}-{run[0].start}",
                kind=RATING.name,
                a=tuple(s.id for s in run),
                round=round,
                meta={"episode": episode, "start": run[0].start, "item_length": run[0].length},
            )
        ]
