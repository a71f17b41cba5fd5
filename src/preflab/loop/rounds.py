"""The preference-learning loop (Christiano et al. 2017): ask, learn the reward, train the policy.

Rounds: the agent's own rollouts are recorded as segments; the selector picks queries from the
most recent ones; the source answers (now or later); the aggregator turns judgements into
labels once per round; the labels refit the reward ensemble; an off-policy agent's replay
buffer is relabelled; the agent trains for K more steps on the learned reward. Everything asked
and answered is written to the store as it happens, and the store commit always comes before
the checkpoint that refers to it.

Exact resume: a checkpoint (``preflab.runstate``) holds every piece of mutable state (agent with
optimisers and replay buffer, environments, recorder, reward ensemble and its optimiser, every
RNG, the loop's round state). Ids derive from the run's seed, so a resumed round that had been
interrupted recreates the same queries and judgements, which the store already has and skips.
"""

from __future__ import annotations

import dataclasses
import logging
import math
import time
from pathlib import Path
from typing import Any

import numpy as np

from preflab.aggregate import Feedback
from preflab.config import TrainConfig
from preflab.env_families import episode_limit
from preflab.errors import StoreError
from preflab.evaluate import EVAL_SEED_OFFSET, Evaluation, evaluate_episodes, reward_agreement
from preflab.kinds import kind_of
from preflab.loop.clips import log_policy_clip
from preflab.loop.diagnosis import RoundTally, no_label_hint, round_warnings
from preflab.loop.results import (
    LoopState,
    ProgressFn,
    RunParts,
    RunResult,
    derived_id,
    label_schedule,
    last_finite,
)
from preflab.loop.snapshot import capture_parts, restore_parts
from preflab.modelfiles import write_model_files
from preflab.output import RunOutput
from preflab.policy.agents import is_off_policy, relabel_replay_buffer
from preflab.policy.exploration import reset_critic, state_entropy_rewards
from preflab.records import Judgement, Query, Rating, Segment
from preflab.reward.batch import LabelBatch, SegmentBatch
from preflab.reward.ensemble import RewardEnsemble
from preflab.rollout import sample_action
from preflab.runstate import Checkpoint, Checkpointer
from preflab.sources.ratings import RatingLog
from preflab.store import strip_password
from preflab.teacher import SegmentReward, load_score, segment_rewards
from preflab.testing.failpoints import failpoint

log = logging.getLogger(__name__)

MODEL_FILES_EVERY_S = 60.0
"""A run's policy.zip and reward_model/ are at most this old while it trains (and exact at
its end)."""
COLLECT_POLL_S = 0.2
"""How often :meth:`PreferenceLoop._collect` looks for answers while ``wait_for_labels_s``
lasts (s)."""
POOL_KEEP_FACTOR, POOL_KEEP_MIN = 4, 1000
"""Segments kept in the pool: the newest max(pool_size × factor, minimum); queries are drawn
from the newest ``pool_size`` of them."""
RECENT_EPISODES = 10
"""Training episodes behind ``train_true_return`` and B-Pref's margin (the last ten, as B-Pref)."""
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
        self.selector = parts.selector
        self.aggregator = parts.aggregator
        self.bridge = parts.bridge
        self.trackers = parts.trackers
        self.rng = parts.rng
        self.tag = parts.tag
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
        self.target_fn: SegmentReward | None = (
            load_score(c.eval_target, option="--eval-target")
            if c.eval_target
            else getattr(self.source, "reward_fn", None)
        )
        """What the run is taught, when it is not the env's reward: scores segments and
        evaluation episodes (metrics, the final table)."""
        self.state = LoopState()
        self.recorder.round_fn = lambda: self.state.round
        self.rating_log = RatingLog()
        self.ratings: list[Rating] = self.rating_log.ratings  # Feedback.ratings
        # people (a persisting source): rating streams (episodes published for the Rate view and
        # streams they rated), kept apart from the queries that count towards the label budget
        self.rating_queries: dict[str, Query] = {}
        self.pool: list[Segment] = []
        # pool segment ids already in the array store (checkpoints write only the new ones)
        self._pool_stored: set[str] = set()
        # the standard model files (policy.zip, reward_model/): when last written (perf_counter
        # time, this invocation) and at which round (see _write_model_files)
        self._model_files_at: float | None = None
        self._model_files_round = -1
        self.segments: dict[str, Segment] = {}
        self.queries: dict[str, Query] = {}
        self.judgements: list[Judgement] = []
        self.known_judgements: set[str] = set()
        self.n_labels = 0
        self.withdrawn: set[str] = set()  # queries withdrawn unanswered (people: a newer round)
        self.ended_by = "steps"  # how the run ended: steps, labels, owner, deadline
        self.clock = parts.clock
        self.schedule = label_schedule(c.total_labels, c.initial_label_frac, c.n_rounds, c.schedule)
        # After a resume: rows the store has from beyond the checkpoint (recreated, not re-added)
        self._stored_queries: set[str] = set()
        self._stored_judgements: set[str] = set()
        self._orphans_pending = False
        self.warnings = parts.warnings  # each kind said once, loudly; kept for summary.json
        self.hooks = parts.hooks
        self._ties = 0  # labels of the last fit that are ties (p = 0.5)
        self.answer_hint = (  # how people answer, in every waiting line (the CLI may change it)
            f"people answer in the studio: `preflab studio {self.run_dir}` if none is running"
        )
        if ckpt is not None:
            self._restore(ckpt)
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
        self.ensemble.load_state_dict(model.state_dict())
        self.ensemble.fit_reward_stats(items)
        self.reward.fitted = True
        self.reward.end_live()
        relabel_replay_buffer(self.agent, self.reward)

    # ----- feedback --------------------------------------------------------------------------
    def _ask(self, n_queries: int, *, extra: bool = False) -> None:
        if n_queries <= 0:
            return
        candidates = self.pool[-self.config.pool_size :]
        if len(candidates) < 2:
            log.warning(
                "round %d: fewer than 2 segments recorded; no queries asked", self.state.round
            )
            return
        picked = self.selector.select(
            candidates,
            self.ensemble if self.fitted else None,
            n_queries,
            self.rng,
            round=self.state.round,
        )
        qs = [
            dataclasses.replace(
                q,
                id=derived_id("q", self.tag, self.state.round, k, q.kind, q.a, q.b)
                if not extra  # asked while waiting for people: numbered after those asked so far
                else derived_id("qx", self.tag, self.state.round, len(self.queries) + k, q.a, q.b),
            )
            for k, q in enumerate(picked)
        ]
        qs = self.clock.fresh(self, qs)
        seg_map = {s.id: s for s in candidates}
        if self.hooks.segment_maker is not None:  # port: queries about sampled states
            seg_map.update(self.hooks.segment_maker.made_segments())
        needed = [seg_map[sid] for q in qs for sid in (*q.a, *q.b)]
        self.store.add_segments(needed)
        self.segments.update({s.id: s for s in needed})
        self.store.add_queries([q for q in qs if q.id not in self._stored_queries])
        failpoint("queries_stored")
        self.queries.update({q.id: q for q in qs})
        self._set_teacher_margin()
        self.source.submit(qs, seg_map)

    def _set_teacher_margin(self) -> None:
        """B-Pref's margin, for a teacher whose skip or equal rule is relative: the mean true
        return of the last 10 training episodes × segment length / episode limit (NaN before an
        episode has ended, or without a limit: no skip or equal answer)."""
        teacher = self.hooks.margin_teacher
        if teacher is None:
            return
        ep = [e["r"] for e in self.agent.ep_info_buffer] if self.agent.ep_info_buffer else []
        limit = episode_limit(self.venv.get_attr("spec", indices=[0])[0])
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

    def _due_queries(self, round_: int) -> int:
        """Queries to ask now: the schedule's cumulative target for this round minus those already
        asked (so a resumed run never asks a round's queries twice)."""
        target = sum(self.schedule[: round_ + 1])
        asked = len(self.queries) - len(self.withdrawn)  # a withdrawn query is asked again
        return max(0, min(target, self.config.total_labels) - asked)

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

    def _take_ratings(self) -> None:
        """Rating streams (scalar feedback): into the store and Feedback.ratings. People's
        streams (a persisting source) go to ``rating_queries``, a simulated rater's to
        ``queries``."""
        raters = self.hooks.ratings
        if raters is not None:
            into = self.rating_queries if raters.persists else self.queries
            self.rating_log.take(raters, self.store, self.pool, into, self.segments)

    def _publish_episodes(self) -> None:
        """People: the most recent whole episodes go to the studio's Rate view (Pref-GUIDE;
        ``config.rate_episodes`` per round); their ratings arrive through :meth:`_take_ratings`."""
        c = self.config
        if self.bridge is None or not self.clock.publishes_episodes or c.rate_episodes <= 0:
            return
        done = {
            int(q.meta["episode"])
            for q in self.rating_queries.values()
            if q.meta.get("episode") is not None
        }
        streams = self.bridge.publish_episodes(
            self.state.round, self.pool, c.rate_episodes, self.rating_queries, done
        )
        by_id = {s.id: s for s in self.pool}
        self.segments.update({sid: by_id[sid] for q in streams for sid in q.a})
        self.rating_queries.update({q.id: q for q in streams})

    def _not_streams(self, judgements: list[Judgement]) -> list[Judgement]:
        """Judgements without those that name a rating stream: a stream is rated, not answered
        (the studio refuses such answers; a store written by other means may hold them)."""
        if not self.rating_queries:
            return judgements
        return [j for j in judgements if j.query_id not in self.rating_queries]

    def _feedback_queries(self) -> dict[str, Query]:
        """Every query an aggregator may meet: the asked ones and the rating streams."""
        return {**self.queries, **self.rating_queries} if self.rating_queries else self.queries

    def _end_live_phase(self, *, relabel: bool = True) -> None:
        """After policy_reward.live_steps env steps the policy trains on the learned reward."""
        ended = self.reward.end_live_if_due(self.recorder.steps)
        if ended and relabel and is_off_policy(self.agent):  # the buffer holds live ratings
            relabel_replay_buffer(self.agent, self.reward)

    def _collect(self) -> int:
        self._take_ratings()
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
                    self.store.add_judgements(fresh)
                    failpoint("judgements_stored")
                self.judgements.extend(new)
                self.known_judgements.update(j.id for j in new)
                got += len(new)
            answered = {j.query_id for j in self.judgements}
            waiting = [q for q in self.queries if q not in answered and q not in self.withdrawn]
            if not waiting or time.monotonic() >= deadline:
                return got
            time.sleep(COLLECT_POLL_S)

    # ----- what the clock reads (preflab.loop.pacing.PacedRun) -------------------------------
    @property
    def env_steps(self) -> int:
        """Env steps taken so far."""
        return self.recorder.steps

    @property
    def round(self) -> int:
        """The round the loop runs next."""
        return self.state.round

    def candidates(self) -> list[Segment]:
        """The most recent ``pool_size`` segments: what queries are asked about."""
        return self.pool[-self.config.pool_size :]

    def collect(self) -> int:
        """Take the answers that arrived (:meth:`_collect`); how many."""
        return self._collect()

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

    def _is_equal(self, j: Judgement) -> bool:
        """True for an answer of "all equally good" (as its query's kind defines it)."""
        q = self.queries.get(j.query_id)
        if q is None:  # not asked by this run (e.g. composed in the studio): a pair or group
            return j.p == 0.5
        return kind_of(q).is_equal(q, j)

    def _streams(self) -> set[str]:
        """Stored rating streams that are not the run's queries (people rate them in the studio;
        they are not asked), so a resume does not adopt them as orphans."""
        if not self.source.persists:
            return set()
        return {q.id for q in self.store.queries() if kind_of(q).streams}

    def _adopt_orphans(self) -> None:
        """After a resume: queries the store holds from beyond the checkpoint that the replayed
        round did not ask again join the run; unanswered ones go to the source again."""
        self._orphans_pending = False
        streams = self._streams()
        orphans = [
            q for q in self.store.queries() if q.id not in self.queries and q.id not in streams
        ]
        if not orphans:
            return
        answered = {j.query_id for j in self.judgements}
        self.queries.update({q.id: q for q in orphans})
        redo = [q for q in orphans if q.id not in answered]
        log.info("resume: %d stored queries rejoin the run, %d re-asked", len(orphans), len(redo))
        if redo and not self.source.persists:
            ids = sorted({s for q in redo for s in (*q.a, *q.b)})
            segs = {s.id: s for s in self.store.segments(ids)}
            self.segments.update(segs)
            self._set_teacher_margin()
            self.source.submit(redo, segs)
            self._collect()

    def _fit(self) -> dict[str, float]:
        # an answer undone in the studio after it was collected never counts (the store decides)
        self.judgements = self.store.counted(self.judgements)
        labels = self.aggregator.labels(
            Feedback(
                queries=self._feedback_queries(),
                judgements=self.judgements,
                ratings=self.ratings,
                segments=self.segments,
            )
        )
        self.n_labels = len(labels)
        self._ties = sum(lab.p == 0.5 for lab in labels)
        if not labels:
            return {}
        ids = sorted({x for lab in labels for x in (lab.a, lab.b)})
        missing = [i for i in ids if i not in self.segments]
        if missing:
            self.segments.update({s.id: s for s in self.store.segments(missing)})
        batch = SegmentBatch.from_segments([self.segments[i] for i in ids])
        lb = LabelBatch.from_labels(labels, batch.index())
        epochs = self.config.fit.epochs if self.fitted else self.config.first_fit_epochs
        recent = SegmentBatch.from_segments(
            self.pool[-self.config.pool_size :] or [self.segments[i] for i in ids]
        )
        unlabelled = recent if self.config.fit.semi_ratio and len(recent) >= 2 else batch
        rep = self.trainer.fit(
            batch, lb, self.rng, epochs=epochs, warm=self.fitted, unlabelled=unlabelled
        )
        self.ensemble.fit_reward_stats(recent)
        first_fit = not self.reward.fitted
        self.reward.fitted = True
        if self.config.relabel and is_off_policy(self.agent):
            relabel_replay_buffer(self.agent, self.reward)
        if first_fit and self.config.unsup_steps:  # PEBBLE: forget the value of novelty
            reset_critic(self.agent, seed=self.config.seed)
        return {
            "reward_train_loss": float(np.mean(rep.train_loss)),
            "reward_val_loss": float(np.mean(rep.val_loss)),
            "l2": float(np.mean(rep.l2)),
            "reward_fit_steps": rep.steps,
            **({} if rep.pseudo_share is None else {"pseudo_label_share": rep.pseudo_share}),
        }

    # ----- rollouts ---------------------------------------------------------------------------
    def _random_steps(self, n_steps: int) -> None:
        """Random actions through the recorder; off-policy agents keep them in their buffer."""
        venv = self.venv
        obs = venv.reset()
        space = venv.action_space
        off = self.agent if is_off_policy(self.agent) else None  # the agent, when off-policy
        for _ in range(math.ceil(n_steps / venv.num_envs)):
            acts = np.stack([sample_action(space, self.rng) for _ in range(venv.num_envs)])
            nxt, rew, dones, infos = venv.step(acts)
            assert isinstance(nxt, np.ndarray)  # the learned-reward env's observations are arrays
            if off is not None:
                buf_act = (
                    off.policy.scale_action(acts)
                    if hasattr(off.policy, "scale_action") and space.__class__.__name__ == "Box"
                    else acts
                )
                real_next = nxt.copy()
                for i in np.flatnonzero(dones):
                    if infos[i].get("terminal_observation") is not None:
                        real_next[i] = infos[i]["terminal_observation"]
                assert off.replay_buffer is not None  # made with the agent (SB3's setup_model)
                off.replay_buffer.add(obs, real_next, buf_act, rew, dones, infos)
            obs = nxt
        self.pool.extend(self.recorder.pop_segments())

    def _pretrain(self, n_steps: int) -> None:
        """PEBBLE's unsupervised pre-training: ``n_steps`` of the agent trained on the k-NN
        state-entropy reward (:mod:`preflab.policy.exploration`); the critic is reset at the
        first reward fit (:meth:`_fit`)."""
        with state_entropy_rewards(self.agent):
            self._train_agent(n_steps)

    def _train_agent(self, n_steps: int) -> None:
        first = self.agent._last_obs is None  # first call (or an inexact resume): reset the envs
        self.agent.learn(
            total_timesteps=n_steps,
            reset_num_timesteps=first,
            progress_bar=False,
            callback=self.callback,
        )
        self.take_segments()

    def take_segments(self) -> None:
        """The segments the recorder cut since the last call join the pool (the newest kept)."""
        self.pool.extend(self.recorder.pop_segments())
        self.pool = self.pool[-max(self.config.pool_size * POOL_KEEP_FACTOR, POOL_KEEP_MIN) :]

    # ----- metrics ----------------------------------------------------------------------------
    def _metrics(self, extra: dict[str, Any]) -> dict[str, Any]:
        recent = self.pool[-self.config.pool_size :]
        acc = corr = float("nan")
        if self.fitted and len(recent) >= 2:
            batch = SegmentBatch.from_segments(recent)
            truth = np.array([self._target_return(s) for s in recent])
            acc, corr = reward_agreement(
                self.ensemble, batch, truth, np.random.default_rng(self.state.round)
            )
        ep = [e["r"] for e in self.agent.ep_info_buffer] if self.agent.ep_info_buffer else []
        return {
            "round": self.state.round,
            "env_steps": self.recorder.steps,
            "n_labels": self.n_labels,
            "n_judgements": len(self.judgements),
            "train_true_return": float(np.mean(ep[-RECENT_EPISODES:])) if ep else float("nan"),
            "reward_accuracy": acc,
            "reward_corr": corr,
            "wall_s": self._wall(),
        } | extra

    def _target_return(self, seg: Segment) -> float:
        """What the reward model is measured against: the evaluation target (``--eval-target``,
        else the teacher's ``--teacher.score``) when there is one, else the env's return."""
        fn = self.target_fn
        return float(segment_rewards(fn, seg).sum()) if fn is not None else seg.true_return

    def _evaluate(self, n_episodes: int) -> Evaluation:
        """The policy over fresh episodes: env return, success, and the target return."""
        return evaluate_episodes(
            self.agent,
            self.env_spec,
            n_episodes=n_episodes,
            seed=EVAL_SEED_OFFSET + self.config.seed,
            target=None if self.target_fn is None else self._target_return,
        )

    def _wall(self) -> float:
        return self.state.wall_s + (time.perf_counter() - self._t0)

    # ----- run ---------------------------------------------------------------------------------
    def _publish(self, round_: int, metrics: dict[str, Any], status: str = "running") -> None:
        """A round as the studio shows it: number, env steps, metrics so far."""
        self.store.publish_round(
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
        self._ask(self._due_queries(self.state.round))
        if self.bridge is not None:  # the round's pool (+ the ensemble's returns) for the studio
            self.bridge.publish_pool(
                self.state.round,
                self.pool[-c.pool_size :],
                self.ensemble if self.fitted else None,
            )
        self._publish_episodes()
        self._publish(
            self.state.round, {"n_labels": self.n_labels, "n_judgements": len(self.judgements)}
        )
        self._collect()
        if self.bridge is not None:  # group queries people composed in the studio join the run
            self.queries.update({q.id: q for q in self.bridge.adopt_queries(self.queries)})
        if self._orphans_pending:
            self._adopt_orphans()
        fit = self._fit()
        self._end_live_phase()
        if evaluate:
            e = self._evaluate(max(ROUND_EVAL_MIN, c.eval_episodes // ROUND_EVAL_SHARE))
            fit |= {"eval_true_return": e.mean, "eval_true_return_std": e.std}
            if e.target_mean is not None:
                fit["eval_target_return"] = e.target_mean
            if e.success_rate is not None:
                fit["eval_success_rate"] = e.success_rate
        row = self._metrics(fit)
        self._check_round(row)
        self.state.history.append(row)
        self.out.append_metrics(row)
        for tracker in self.trackers:
            tracker.round(row)
        every_clip = self.config.log_clip_every
        if self.trackers and every_clip and self.state.round % every_clip == 0:
            try:
                log_policy_clip(
                    self.agent,
                    self.config.env_id,
                    self.config.seed,
                    self.trackers,
                    self.run_dir,
                    self.state.round,
                    int(row["env_steps"]),
                )
            except Exception as exc:  # a clip must never end the run
                self.warnings.warn(
                    "clip_failed",
                    f"round {self.state.round}: the clip of the policy could not be rendered "
                    f"({type(exc).__name__}: {str(exc)[:200]}); the run goes on without it",
                )
        self._publish(self.state.round, row)
        self.state.round += 1
        self._checkpoint()
        failpoint("round_end")
        self.progress(row)

    def run(self) -> RunResult:
        """Run (or continue) until the step budget is spent; returns the result."""
        c = self.config
        self.start_clock()
        if self.state.round == 0:
            self._random_steps(c.initial_steps)
            if c.unsup_steps:
                self._pretrain(c.unsup_steps)
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
        return self.finish()

    def start_clock(self) -> None:
        """The wall clock of this invocation starts (call before the first round it runs)."""
        self._t0 = time.perf_counter()
        self._end_live_phase(relabel=False)  # a resumed run past its live phase

    def finish(self) -> RunResult:
        """The run's end: the final evaluation, summary.json, the trackers' last word."""
        c = self.config
        self.ended_by = self.clock.ended_by(self, self.ended_by)
        if self.n_labels == 0:
            self.warnings.warn(
                "ended_without_labels",
                f"the run ended ({self.ended_by}) with 0 labels: the policy trained on an "
                f"untrained reward, so its return says nothing about preference learning"
                + no_label_hint(self._tally()),
            )
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
            n_equal=sum(self._is_equal(j) for j in self.judgements),
            n_skipped=sum(j.p is None for j in self.judgements),
            reward_accuracy=last_finite(self.state.history, "reward_accuracy"),
            reward_corr=last_finite(self.state.history, "reward_corr"),
            env_steps=self.recorder.steps,
            wall_s=train_wall,
            eval_s=time.perf_counter() - t_eval,
            rounds=self.state.round,
            ended_by=self.ended_by,
            warnings=tuple(self._final_warnings(mean)),
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
        if fresh:  # the run as built from its config: nothing to restore but the store
            self.checkpointer.save(
                0, Checkpoint(state={"fresh": True, "env_id": self.config.env_id})
            )
            return
        arrays: dict[str, np.ndarray] = {}
        parts_state, tensors = capture_parts(
            self.parts, arrays, replay_buffer=self.config.checkpoint_replay_buffer
        )
        for s in self.pool:  # pool segments not asked about yet: arrays only, by content id
            if s.id not in self._pool_stored:
                self.store.arrays.write(s)
        self._pool_stored = {s.id for s in self.pool}
        state = {
            "fresh": False,
            "env_id": self.config.env_id,
            "loop": {
                "round": self.state.round,
                "wall_s": self._wall(),
                "history": self.state.history,
                "fitted": self.fitted,
                "n_labels": self.n_labels,
                "rng": self.rng.bit_generator.state,
                "l2": self.trainer.l2,
                "queries": list(self.queries),
                "rating_queries": list(self.rating_queries),
                "judgement_seq": self.store.max_seq("judgements"),
                "withdrawn": sorted(self.withdrawn),
                "warnings": self.warnings.state(),
                "pool": [
                    {
                        "id": s.id,
                        "env_id": s.env_id,
                        "episode": s.episode,
                        "start": s.start,
                        "round": s.round,
                    }
                    for s in self.pool
                ],
            },
            **parts_state,
        }
        self.checkpointer.save(self.state.round, Checkpoint(state, tensors, arrays))
        now = time.perf_counter()
        if self._model_files_at is None or now - self._model_files_at >= MODEL_FILES_EVERY_S:
            self._write_model_files()

    def _write_model_files(self) -> None:
        """Write the standard model files (policy.zip, reward_model/: preflab.modelfiles): at
        the first checkpoint of an invocation, then at most every MODEL_FILES_EVERY_S, and at
        the end of the run (an SBX policy takes about 0.3 s to save: every round was 10-20% of
        a short round's time)."""
        write_model_files(self.run_dir, self.agent, self.ensemble)
        self._model_files_at = time.perf_counter()
        self._model_files_round = self.state.round

    def _restore(self, ckpt: Checkpoint) -> None:
        st = ckpt.state
        if st.get("env_id") != self.config.env_id:
            raise StoreError(
                f"the checkpoint in {self.run_dir} is for env {st.get('env_id')!r}, but "
                f"config.json says {self.config.env_id!r}; the run directory was mixed up"
            )
        self._stored_queries = {q.id for q in self.store.queries()}
        if not st["fresh"]:
            self._restore_state(ckpt)
        mark = st.get("loop", {}).get("judgement_seq", 0)
        rows = self.store.judgements(include_retracted=True)  # the replay decides what counts
        self.judgements = [j for seq, j in rows if seq <= mark]
        self._stored_judgements = {j.id for seq, j in rows if seq > mark}
        self.known_judgements = {j.id for j in self.judgements}
        self._orphans_pending = bool(self._stored_queries - set(self.queries) - self._streams())
        self._t0 = time.perf_counter()
        self.out.rewrite_metrics(self.state.history)
        log.info(
            "resumed %s at round %d with %d judgements",
            self.run_dir,
            self.state.round,
            len(self.judgements),
        )

    def _restore_state(self, ckpt: Checkpoint) -> None:
        restore_parts(self.parts, ckpt, self.run_dir)
        loop = ckpt.state["loop"]
        self.state = LoopState(round=loop["round"], wall_s=loop["wall_s"], history=loop["history"])
        self.reward.fitted = loop["fitted"]
        self.n_labels = loop["n_labels"]
        self.withdrawn = set(loop.get("withdrawn", ()))
        self.warnings.load_state(loop.get("warnings", []))
        self.rng.bit_generator.state = loop["rng"]
        self.trainer.set_l2(loop["l2"])
        stored = {q.id: q for q in self.store.queries()}
        self.queries = {qid: stored[qid] for qid in loop["queries"]}
        self.rating_queries = {qid: stored[qid] for qid in loop.get("rating_queries", ())}
        self.pool = [self._stored_segment(meta) for meta in loop["pool"]]
        self._pool_stored = {s.id for s in self.pool}

    def _stored_segment(self, meta: dict[str, Any]) -> Segment:
        """A pool segment of a checkpoint: its saved fields and its arrays from the store."""
        arrays: dict[str, Any] = self.store.arrays.read(meta["id"])
        return Segment(**meta, **arrays)

    # ----- warnings: runs that fail and look fine (preflab.loop.diagnosis) ------------------
    def _tally(self, reward_accuracy: float = math.nan) -> RoundTally:
        return RoundTally(
            config=self.config,
            run_dir=self.run_dir,
            round=self.state.round,
            n_labels=self.n_labels,
            n_ties=self._ties,
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

    def _final_warnings(self, true_return: float) -> list[str]:
        """The run's warnings, the final evaluation's included."""
        if not math.isfinite(true_return):
            self.warnings.warn(
                "nan_return",
                f"true_return is nan: the {self.config.eval_episodes} evaluation episode(s) "
                "gave no finite return; check the env's rewards and --eval-episodes",
            )
        return self.warnings.messages
