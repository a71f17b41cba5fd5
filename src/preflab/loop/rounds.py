"""The preference-learning loop (Christiano et al. 2017): ask, learn the reward, train the policy.

Rounds: the agent's own rollouts are recorded as segments; the selector picks queries from the
most recent ones; the source answers (now or later); the aggregator turns judgements into
labels once per round; the labels refit the reward ensemble; an off-policy agent's replay
buffer is relabelled; the agent trains for K more steps on the learned reward. Everything asked
and answered is written to the store as it happens, and the store commit always comes before
the checkpoint that refers to it.

The loop runs the rounds and decides when to checkpoint; each job of a round is a part it holds:
:class:`~preflab.loop.asking.Asker` (queries, answers, labels),
:class:`~preflab.loop.rollouts.Rollouts` (the segment pool),
:class:`~preflab.loop.fitting.RewardFit` (the reward fit), :class:`~preflab.loop.measuring.Measures`
(each round's metrics) and :mod:`preflab.loop.snapshot` (what a checkpoint holds).

Exact resume: a checkpoint (``preflab.runstate``) holds every piece of mutable state (agent with
optimisers and replay buffer, environments, recorder, reward ensemble and its optimiser, every
RNG, the loop's round state). Ids derive from the run's seed, so a resumed round that had been
interrupted recreates the same queries and judgements, which the store already has and skips.
Round 0 also checkpoints after PEBBLE's pre-training and RIME's warm start (:mod:`.snapshot`).
"""

from __future__ import annotations

import dataclasses
import math
import time
from pathlib import Path
from typing import Any

from preflab.config import TrainConfig
from preflab.loop import snapshot
from preflab.loop.asking import Asker
from preflab.loop.clips import log_round_clip
from preflab.loop.diagnosis import RoundTally, end_warnings, round_warnings
from preflab.loop.fitting import RewardFit
from preflab.loop.measuring import Measures
from preflab.loop.results import LoopState, ProgressFn, RunParts, RunResult, last_finite
from preflab.loop.rollouts import Rollouts
from preflab.policy.evaluate import EVAL_SEED_OFFSET, Evaluation, evaluate_episodes
from preflab.policy.hybrid_replay import note_labels_asked
from preflab.records import Judgement, Query, Rating, Segment
from preflab.reward.batch import SegmentBatch
from preflab.reward.ensemble import RewardEnsemble
from preflab.reward.modelfiles import write_model_files
from preflab.rundir.output import RunOutput
from preflab.runstate import Checkpoint, Checkpointer
from preflab.store import strip_password
from preflab.testing.failpoints import failpoint

MODEL_FILES_EVERY_S = 60.0
"""A run's policy.zip and reward_model/ are at most this old while it trains (and exact at
its end)."""
ROUND_EVAL_MIN, ROUND_EVAL_SHARE = 3, 2
"""A round's evaluation (``eval_every_rounds``): max(minimum, eval_episodes // share) episodes;
the final evaluation runs all ``eval_episodes``."""


class PreferenceLoop:
    """One run: rounds and checkpoints over parts built by :func:`preflab.assemble.assemble`."""

    def __init__(
        self,
        config: TrainConfig,
        run_dir: str | Path,
        parts: RunParts,
        *,
        progress: ProgressFn | None = None,
        resume: bool = False,
    ) -> None:
        self.config = c = config
        self.run_dir = Path(run_dir)
        self.out = RunOutput(self.run_dir)
        self.checkpointer = Checkpointer(self.run_dir)
        ckpt = self.checkpointer.load() if resume else None  # verified before anything is built
        if not resume:  # the password of a store URL never goes to a file (PGPASSWORD/.pgpass)
            self.out.start(dataclasses.replace(c, store_url=strip_password(c.store_url)).to_json())
        self.parts = parts
        self.store = parts.store
        self.source = parts.source
        self.aggregator = parts.aggregator
        self.bridge = parts.bridge
        self.trackers = parts.trackers
        self.rng = parts.rng
        self.env_spec = parts.env_spec
        self.recorder = parts.recorder
        self.venv = parts.venv
        self.tail = parts.tail
        self.agent = parts.agent
        self.reward = parts.reward
        self.ensemble = parts.reward.model
        self.trainer = parts.trainer
        self.callback = parts.callback
        self.progress = progress or (lambda _row: None)
        self.measures = Measures(c, parts)
        """The run's target and its rounds' metrics rows."""
        self.state = LoopState()
        self.phase = ""  # what of round state.round is done: loop.snapshot.PHASES
        self.recorder.round_fn = lambda: self.state.round
        self.asker = Asker(c, parts)
        """Asks queries, collects answers, turns them into labels (owns what was asked)."""
        self.rollouts = Rollouts(c, parts)
        """Steps the envs and keeps the segment pool."""
        self.fitting = RewardFit(c, parts)
        """Fits the reward model on the labels."""
        self.schedule = self.asker.schedule
        # the standard model files (policy.zip, reward_model/): when last written (perf_counter
        # time, this invocation) and at which round (see _write_model_files)
        self._model_files_at: float | None = None
        self._model_files_round = -1
        self.ended_by = "steps"  # how the run ended: steps, labels, owner, deadline
        self.clock = parts.clock
        self.warnings = parts.warnings  # each kind said once, loudly; kept for summary.json
        self.hooks = parts.hooks
        self.answer_hint = (  # how people answer, in every waiting line (the CLI may change it)
            f"people answer in the studio: `preflab studio {self.run_dir}` if none is running"
        )
        self._fitted_on = (0, 0)  # (judgements, ratings) the last fit saw
        if ckpt is not None:
            self._restore(ckpt)
            self._fitted_on = self._taken()  # a checkpoint follows a fit
        else:
            self._checkpoint(fresh=True)

    @property
    def fitted(self) -> bool:
        """Whether the reward model has been fit (the policy reward owns this)."""
        return self.reward.fitted

    def close(self) -> None:
        """Close the envs and the store (a finished loop holds no open files)."""
        self.venv.close()
        self.store.close()

    def fix_reward(self, model: RewardEnsemble, items: SegmentBatch) -> None:
        """Continue on the fixed reward ``model`` from now on: its weights replace the run's
        reward model (re-standardised on ``items``), the live phase ends and an off-policy
        replay buffer is relabelled. Pair it with an aggregator that makes no labels
        (:class:`preflab.aggregate.capped.NoLabels`) so nothing refits it."""
        self.fitting.fix(model, items)

    # ----- what the clock reads (preflab.loop.pacing.PacedRun) -------------------------------
    @property
    def env_steps(self) -> int:
        """Env steps taken so far."""
        return self.recorder.steps

    @property
    def round(self) -> int:
        """The round the loop runs next."""
        return self.state.round

    @property
    def queries(self) -> dict[str, Query]:
        """The queries asked (the asker owns them)."""
        return self.asker.queries

    @property
    def judgements(self) -> list[Judgement]:
        """The judgements collected and counted."""
        return self.asker.judgements

    @property
    def withdrawn(self) -> set[str]:
        """Queries withdrawn unanswered."""
        return self.asker.withdrawn

    @property
    def n_labels(self) -> int:
        """Labels the reward model was fit on last."""
        return self.asker.n_labels

    def candidates(self) -> list[Segment]:
        """The most recent ``pool_size`` segments: what queries are asked about."""
        return self.rollouts.candidates()

    def collect(self) -> int:
        """Take the answers that arrived; how many."""
        return self.asker.collect(self.pool)

    def ask_more(self, n_queries: int) -> None:
        """Ask ``n_queries`` more while the trainer waits for people, and publish the pool."""
        self._ask(n_queries, extra=True)
        if self.bridge is not None:
            self.bridge.publish_pool(
                self.state.round, self.candidates(), self.ensemble if self.fitted else None
            )

    def publish_waiting(self, status: dict[str, Any]) -> None:
        """Every studio page shows that the trainer waits for answers, and how many."""
        last = self.state.history[-1] if self.state.history else {}
        self._publish(max(0, self.state.round - 1), last | status, status="waiting")

    def wall(self) -> float:
        """Training wall time so far (s), resumed parts included."""
        return self._wall()

    # ----- what the parts own, as the loop's (callers and tests read them here) ---------------
    @property
    def pool(self) -> list[Segment]:
        """The segment pool (:class:`preflab.loop.rollouts.Rollouts`)."""
        return self.rollouts.pool

    @property
    def segments(self) -> dict[str, Segment]:
        """Every segment a query, stream or label names, by id."""
        return self.asker.segments

    @property
    def rating_queries(self) -> dict[str, Query]:
        """People's rating streams (not in the label budget)."""
        return self.asker.rating_queries

    @property
    def ratings(self) -> list[Rating]:
        """Every rating taken in."""
        return self.asker.ratings

    @property
    def _orphans_pending(self) -> bool:
        """After a resume: stored queries from beyond the checkpoint wait to be adopted."""
        return self.asker.orphans_pending

    def _take_ratings(self) -> None:
        """New rating streams and ratings (:meth:`preflab.loop.asking.Asker.take_ratings`)."""
        self.asker.take_ratings(self.pool)

    def _ask(self, n_queries: int, *, extra: bool = False) -> None:
        """Ask ``n_queries`` about the newest segments (:meth:`preflab.loop.asking.Asker.ask`)."""
        self.asker.ask(
            n_queries,
            self.candidates(),
            self.state.round,
            lambda qs: self.clock.fresh(self, qs),
            extra=extra,
        )
        asked = len(self.asker.queries) - len(self.asker.withdrawn)  # QPA's hybrid replay
        note_labels_asked(self.agent, asked=asked, budget=self.config.total_labels)

    def _fit(self) -> dict[str, float]:
        """The labels of everything collected refit the reward model; the fit's metrics."""
        labels = self.asker.labels()
        self._fitted_on = self._taken()
        if not labels:
            return {}
        ids = sorted({x for lab in labels for x in (lab.a, lab.b)})
        return self.fitting.fit(labels, self.asker.segments_of(ids), self.candidates())

    def _taken(self) -> tuple[int, int]:
        """(judgements, ratings) taken in so far."""
        return len(self.judgements), len(self.ratings)

    def _random_steps(self, n_steps: int) -> None:
        self.rollouts.random_steps(n_steps)

    def _train_agent(self, n_steps: int) -> None:
        self.rollouts.train_agent(n_steps)

    def take_segments(self) -> None:
        """The segments the recorder cut since the last call join the pool (the newest kept)."""
        self.rollouts.take_segments()

    # ----- metrics ----------------------------------------------------------------------------
    def _metrics(self, extra: dict[str, Any]) -> dict[str, Any]:
        counts = {"n_labels": self.n_labels, "n_judgements": len(self.judgements)}
        return self.measures.row(self.state.round, self.candidates(), counts, self._wall, extra)

    def _evaluate(self, n_episodes: int) -> Evaluation:
        """The policy over fresh episodes: env return, success, and the target return."""
        return evaluate_episodes(
            self.agent,
            self.env_spec,
            n_episodes=n_episodes,
            seed=EVAL_SEED_OFFSET + self.config.seed,
            target=None if self.measures.target_fn is None else self.measures.target_return,
        )

    def _wall(self) -> float:
        return self.state.wall_s + (time.perf_counter() - self._t0)

    # ----- run ---------------------------------------------------------------------------------
    def _publish(self, round_: int, metrics: dict[str, Any], status: str = "running") -> None:
        """A round as the studio shows it: number, env steps, metrics so far."""
        self.store.rounds.publish(
            round_,
            env_id=self.config.env_id,
            env_steps=self.recorder.steps,
            total_steps=self.config.total_steps,
            metrics=metrics,
            status=status,
        )

    def run_round(self, *, evaluate: bool) -> None:
        """One round: ask, collect, fit, (evaluate), log, checkpoint."""
        c = self.config
        self.clock.before_round(self)
        self._ask(self.asker.due(self.state.round))
        if self.bridge is not None:  # the round's pool (+ the ensemble's returns) for the studio
            model = self.ensemble if self.fitted else None
            self.bridge.publish_pool(self.state.round, self.pool[-c.pool_size :], model)
        self.asker.publish_episodes(self.state.round, self.pool)
        self._publish(
            self.state.round, {"n_labels": self.n_labels, "n_judgements": len(self.judgements)}
        )
        self.collect()
        self.asker.adopt(self.pool)  # composed in the studio; stored beyond a checkpoint
        fit = self._fit()
        self.fitting.end_live_phase(self.recorder.steps)
        if evaluate:
            e = self._evaluate(max(ROUND_EVAL_MIN, c.eval_episodes // ROUND_EVAL_SHARE))
            fit |= {"eval_true_return": e.mean, "eval_true_return_std": e.std}
            if e.target_mean is not None:
                fit["eval_target_return"] = e.target_mean
            if e.success_rate is not None:
                fit["eval_success_rate"] = e.success_rate
        row = self._metrics(fit)
        self._end_round(row, clip=True)
        failpoint("round_end")
        self.progress(row)

    def _end_round(self, row: dict[str, Any], *, clip: bool) -> None:
        """A round's row is checked, logged, published and checkpointed; the next round begins."""
        self._check_round(row)
        self.state.history.append(row)
        self.out.append_metrics(row)
        for tracker in self.trackers:
            tracker.round(row)
        if clip:
            log_round_clip(
                self.parts, self.config, self.run_dir, self.state.round, row["env_steps"]
            )
        self._publish(self.state.round, row)
        self.state.round += 1
        self.phase = ""
        self._checkpoint()

    def run(self) -> RunResult:
        """Run (or continue) until the step budget is spent; returns the result."""
        c = self.config
        self.start_clock()
        if self.state.round == 0:
            self._start()
            self.run_round(evaluate=False)
        while self.recorder.steps < c.total_steps:
            n = min(c.steps_per_round, c.total_steps - self.recorder.steps)
            stop = self.clock.may_train(self, n)
            if stop is not None:
                self.ended_by = stop
                break
            self._train_agent(n)
            every = c.eval_every_rounds
            self.run_round(evaluate=bool(every) and self.state.round % every == 0)
        self.close_undo()
        return self.finish()

    def _start(self) -> None:
        """Round 0 up to its queries: the random steps and PEBBLE's pre-training, then RIME's
        warm start of the reward model, each phase checkpointed (a resume goes on after it)."""
        c = self.config
        if not self.phase:
            self._random_steps(c.initial_steps)
            if c.unsup_steps:
                self.rollouts.pretrain(c.unsup_steps)
                self.phase = snapshot.PRETRAINED
                self._checkpoint()
                failpoint("pretrained")
        if self.phase == snapshot.PRETRAINED and c.fit.rime.warm_start_steps:
            self.fitting.warm_start()
            self.phase = snapshot.WARM_STARTED
            self._checkpoint()
            failpoint("warm_started")

    def close_undo(self) -> None:
        """The run ends and every answer counts: the source closes its undo window, the loop
        collects what is left and fits once more if that brought unseen answers or ratings (one
        more row and checkpoint, no queries). A source without an undo window: nothing to do."""
        closer = self.hooks.undo_window
        if closer is None:
            return
        closer.close_undo()
        self.collect()
        self.asker.adopt(self.pool)
        if self._taken() == self._fitted_on:
            return
        row = self._metrics(self._fit())
        self._end_round(row, clip=False)
        self.progress(row)

    def start_clock(self) -> None:
        """The wall clock of this invocation starts (call before the first round it runs)."""
        self._t0 = time.perf_counter()
        if not self.phase:  # resumed past a round's end (else round 0 ends it)
            self.fitting.end_live_phase(self.recorder.steps, relabel=False)

    def finish(self) -> RunResult:
        """The run's end: the final evaluation, summary.json, the trackers' last word."""
        c = self.config
        self.ended_by = self.clock.ended_by(self, self.ended_by)
        if self._model_files_round != self.state.round:  # the last rounds' weights
            self._write_model_files()
        train_wall = self._wall()
        t_eval = time.perf_counter()
        final = self._evaluate(c.eval_episodes)
        mean, std = final.mean, final.std
        result = RunResult(
            run_dir=self.run_dir,
            env_id=c.env_id,
            algo=c.algo,
            seed=c.seed,
            true_return=mean,
            true_return_std=std,
            success_rate=final.success_rate,
            target_return=final.target_mean,
            target_return_std=final.target_std,
            n_labels=self.n_labels,
            n_judgements=len(self.judgements),
            n_equal=sum(self.asker.is_equal(j) for j in self.judgements),
            n_skipped=sum(j.p is None for j in self.judgements),
            reward_accuracy=last_finite(self.state.history, "reward_accuracy"),
            reward_corr=last_finite(self.state.history, "reward_corr"),
            env_steps=self.recorder.steps,
            wall_s=train_wall,
            eval_s=time.perf_counter() - t_eval,
            rounds=self.state.round,
            ended_by=self.ended_by,
            warnings=end_warnings(
                self.warnings, self.state.history, self._tally(), self.ended_by, mean
            ),
            agent=self.agent,
            reward_model=self.ensemble,
        )
        self.out.finish(result.summary(), self.state.history)
        for tracker in self.trackers:
            tracker.finish(result.summary())
        self._publish(
            self.state.round - 1,
            self.state.history[-1]
            | {"eval_true_return": mean, "eval_true_return_std": std, "ended_by": self.ended_by}
            | ({} if final.target_mean is None else {"eval_target_return": final.target_mean}),
            status="finished",
        )
        return result

    # ----- checkpoints and resume --------------------------------------------------------------
    def _checkpoint(self, *, fresh: bool = False) -> None:
        """Write the run state (after the store commits it refers to)."""
        ckpt = snapshot.fresh_checkpoint(self.config) if fresh else self._capture()
        self.checkpointer.save(self.state.round, ckpt, phase=self.phase)
        if fresh or self.phase:  # the model files are a finished round's
            return
        now = time.perf_counter()
        if self._model_files_at is None or now - self._model_files_at >= MODEL_FILES_EVERY_S:
            self._write_model_files()

    def _write_model_files(self) -> None:
        """Write the standard model files (policy.zip, reward_model/: preflab.reward.modelfiles): at
        the first checkpoint of an invocation, then at most every MODEL_FILES_EVERY_S, and at
        the end of the run (an SBX policy takes about 0.3 s to save: every round was 10-20% of
        a short round's time)."""
        write_model_files(self.run_dir, self.agent, self.ensemble)
        self._model_files_at = time.perf_counter()
        self._model_files_round = self.state.round

    def _capture(self) -> Checkpoint:
        """The run's state now (:func:`preflab.loop.snapshot.capture_run`)."""
        return snapshot.capture_run(
            self.parts, self.config, self.state, self._wall(), self.asker, self.rollouts, self.phase
        )

    def _restore(self, ckpt: Checkpoint) -> None:
        self.state, self.phase = snapshot.restore_run(
            self.parts, ckpt, self.run_dir, self.config, self.asker, self.rollouts
        )  # says so in the log
        self._t0 = time.perf_counter()
        self.out.rewrite_metrics(self.state.history)

    # ----- warnings: runs that fail and look fine (preflab.loop.diagnosis) ------------------
    def _tally(self, reward_accuracy: float = math.nan) -> RoundTally:
        return RoundTally(
            config=self.config,
            run_dir=self.run_dir,
            round=self.state.round,
            n_labels=self.n_labels,
            n_ties=self.asker.n_ties,
            n_queries=len(self.queries),
            asked=len(self.queries) - len(self.withdrawn),
            judgements=tuple(self.judgements),
            n_ratings=len(self.ratings),
            streams_ratings=self.hooks.ratings is not None,
            source_persists=self.source.persists,
            warns_without_labels=self.clock.warns_without_labels,
            fitted=self.fitted,
            n_recent=len(self.candidates()),
            reward_accuracy=reward_accuracy,
        )

    def _check_round(self, row: dict[str, Any]) -> None:
        """Say loudly (once per kind) when a round's feedback cannot teach the reward model."""
        for kind, message in round_warnings(self._tally(row.get("reward_accuracy", math.nan))):
            self.warnings.warn(kind, message)
