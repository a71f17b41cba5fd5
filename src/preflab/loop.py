"""The preference-learning loop (Christiano et al. 2017): ask, learn the reward, train the policy.

Rounds: the agent's own rollouts are recorded as segments; the selector picks queries from the
most recent ones; the source answers (now or later); the labels refit the reward ensemble;
an off-policy agent's replay buffer is relabelled; the agent trains for K more steps on the
learned reward. Everything asked and answered is written to the store as it happens.
"""

from __future__ import annotations

import json
import logging
import math
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np
import torch

from preflab.aggregate import Aggregator, Feedback, IdentityAggregator
from preflab.config import TrainConfig
from preflab.envs import action_dim, make_vec_env, obs_dim
from preflab.errors import ConfigError, StoreError
from preflab.evaluate import evaluate_policy, reward_agreement
from preflab.output import RunOutput
from preflab.policy.agents import is_off_policy, make_agent, relabel_replay_buffer
from preflab.policy.checkpoint import load_agent_state, save_agent_state
from preflab.policy.presets import preset
from preflab.policy.reward_wrapper import LearnedRewardVecEnv, SegmentRecorder
from preflab.policy.rollout_relabel import RolloutRelabel
from preflab.records import Judgement, Query, Segment
from preflab.reward.batch import LabelBatch, SegmentBatch
from preflab.reward.ensemble import RewardEnsemble
from preflab.reward.trainer import RewardTrainer
from preflab.rollout import _sample
from preflab.seeding import derive_seed, make_rng, seed_torch
from preflab.selection import Selector, make_selector
from preflab.sources.base import FeedbackSource
from preflab.store import FeedbackStore
from preflab.teacher import SyntheticTeacher

log = logging.getLogger(__name__)

ProgressFn = Callable[[dict[str, Any]], None]


def label_schedule(total: int, initial_frac: float, n_rounds: int, kind: str) -> list[int]:
    """Labels to ask in round 0 (initial) and rounds 1..n_rounds; sums to ``total``.

    'hyperbolic' gives round k a share ∝ 1 / (1 + k / 4) (front-loaded, like imitation's
    hyperbolic schedule); 'constant' spreads them evenly.
    """
    first = round(total * initial_frac)
    rest = total - first
    w = np.ones(n_rounds) if kind == "constant" else 1.0 / (1.0 + np.arange(n_rounds) / 4.0)
    raw = rest * w / w.sum()
    per = np.floor(raw).astype(int)
    for k in np.argsort(-(raw - per))[: rest - per.sum()]:
        per[k] += 1
    return [first, *per.tolist()]


@dataclass
class LoopState:
    """What a resumed run needs besides the store: where the loop was."""

    round: int = 0
    env_steps: int = 0
    wall_s: float = 0.0
    history: list[dict[str, Any]] = field(default_factory=list)


class PreferenceLoop:
    """One run: owns the envs, agent, reward ensemble, store and run directory."""

    def __init__(
        self,
        config: TrainConfig,
        run_dir: str | Path,
        *,
        source: FeedbackSource | None = None,
        selector: Selector | None = None,
        aggregator: Aggregator | None = None,
        progress: ProgressFn | None = None,
        resume: bool = False,
    ) -> None:
        self.config = c = config
        self.run_dir = Path(run_dir)
        self.out = RunOutput(self.run_dir)
        if not resume:
            self.out.start(c.to_json())
        torch.set_num_threads(c.torch_threads)
        self.rng = make_rng(c.seed)
        seed_torch(c.seed)
        self.store = FeedbackStore(
            c.store_url or self.run_dir / "feedback.db", array_dir=self.run_dir / "segments"
        )
        self.source: FeedbackSource = source or SyntheticTeacher(
            c.teacher, np.random.default_rng(derive_seed(self.rng))
        )
        self.selector = selector or make_selector(
            c.selector, **({} if c.selector == "random" else {"oversample": c.oversample})
        )
        self.aggregator: Aggregator = aggregator or IdentityAggregator()
        self.progress = progress or (lambda _row: None)
        self.state = LoopState()

        base = make_vec_env(c.env_id, c.n_envs, seed=c.seed)
        self.recorder = SegmentRecorder(
            base, c.segment_length, env_id=c.env_id, round_fn=lambda: self.state.round
        )
        self.ensemble = RewardEnsemble(
            obs_dim(base.observation_space),
            action_dim(base.action_space),
            c.reward,
            seed=derive_seed(self.rng),
        )
        self.trainer = RewardTrainer(self.ensemble, c.fit)
        self.fitted = False
        on_policy = c.algo in ("ppo", "a2c", "trpo")
        self.venv = LearnedRewardVecEnv(self.recorder, self._reward_fn, defer=on_policy)
        self.callback = RolloutRelabel(self._reward_fn) if on_policy else None
        hyper = preset(c.algo, c.n_envs, c.steps_per_round, overrides=c.agent_overrides())
        self.agent = make_agent(c.algo, self.venv, seed=c.seed, net_arch=list(c.net_arch), **hyper)
        self.pool: list[Segment] = []
        self.segments: dict[str, Segment] = {}
        self.queries: dict[str, Query] = {}
        self.judgements: list[Judgement] = []
        self.known_judgements: set[str] = set()
        self.schedule = label_schedule(c.total_labels, c.initial_label_frac, c.n_rounds, c.schedule)
        if resume:
            self._resume()

    # ----- reward for the policy ------------------------------------------------------------
    def _reward_fn(self, obs: np.ndarray, acts: np.ndarray, _next: np.ndarray) -> np.ndarray:
        if not self.fitted:
            return np.zeros(obs.shape[0], np.float32)
        return self.ensemble.reward(obs, acts)

    # ----- feedback --------------------------------------------------------------------------
    def _n_labels(self) -> int:
        return len(
            self.aggregator.labels(
                Feedback(queries=self.queries, judgements=self.judgements, segments=self.segments)
            )
        )

    def _ask(self, n_queries: int) -> None:
        if n_queries <= 0:
            return
        candidates = self.pool[-self.config.pool_size :]
        if len(candidates) < 2:
            log.warning(
                "round %d: fewer than 2 segments recorded; no queries asked", self.state.round
            )
            return
        qs = self.selector.select(
            candidates,
            self.ensemble if self.fitted else None,
            n_queries,
            self.rng,
            round=self.state.round,
        )
        seg_map = {s.id: s for s in candidates}
        needed = [seg_map[sid] for q in qs for sid in (*q.a, *q.b)]
        self.store.add_segments(needed)
        self.segments.update({s.id: s for s in needed})
        self.store.add_queries(qs)
        self.queries.update({q.id: q for q in qs})
        self.source.submit(qs, seg_map)

    def _due_queries(self, round_: int) -> int:
        """Queries to ask now: the schedule's cumulative target for this round minus those already
        asked (so a resumed run never asks a round's queries twice)."""
        target = sum(self.schedule[: round_ + 1])
        return max(0, min(target, self.config.total_labels) - len(self.queries))

    def _collect(self) -> int:
        deadline = time.monotonic() + self.config.wait_for_labels_s
        got = 0
        while True:
            new = [j for j in self.source.collect() if j.id not in self.known_judgements]
            if new:
                if not getattr(self.source, "persists", False):
                    self.store.add_judgements(new)
                self.judgements.extend(new)
                self.known_judgements.update(j.id for j in new)
                got += len(new)
            answered = {j.query_id for j in self.judgements}
            waiting = [q for q in self.queries if q not in answered]
            if not waiting or time.monotonic() >= deadline:
                return got
            time.sleep(0.2)

    def _fit(self) -> dict[str, float]:
        labels = self.aggregator.labels(
            Feedback(queries=self.queries, judgements=self.judgements, segments=self.segments)
        )
        if not labels:
            return {}
        ids = sorted({x for lab in labels for x in (lab.a, lab.b)})
        missing = [i for i in ids if i not in self.segments]
        if missing:
            self.segments.update({s.id: s for s in self.store.segments(missing)})
        batch = SegmentBatch.from_segments([self.segments[i] for i in ids])
        lb = LabelBatch.from_labels(labels, batch.index())
        epochs = self.config.fit.epochs if self.fitted else self.config.first_fit_epochs
        rep = self.trainer.fit(batch, lb, self.rng, epochs=epochs)
        self.fitted = True
        if self.config.relabel and is_off_policy(self.agent):
            relabel_replay_buffer(self.agent, self._reward_fn)
        return {
            "n_labels": len(labels),
            "reward_train_loss": float(np.mean(rep.train_loss)),
            "reward_val_loss": float(np.mean(rep.val_loss)),
            "l2": float(np.mean(rep.l2)),
        }

    # ----- rollouts ---------------------------------------------------------------------------
    def _random_steps(self, n_steps: int) -> None:
        """Random actions through the recorder; off-policy agents keep them in their buffer."""
        venv = self.venv
        obs = venv.reset()
        space = venv.action_space
        off = is_off_policy(self.agent)
        for _ in range(math.ceil(n_steps / venv.num_envs)):
            acts = np.stack([_sample(space, self.rng) for _ in range(venv.num_envs)])
            nxt, rew, dones, infos = venv.step(acts)
            if off:
                buf_act = (
                    self.agent.policy.scale_action(acts)
                    if hasattr(self.agent.policy, "scale_action")
                    and space.__class__.__name__ == "Box"
                    else acts
                )
                real_next = nxt.copy()
                for i in np.flatnonzero(dones):
                    if infos[i].get("terminal_observation") is not None:
                        real_next[i] = infos[i]["terminal_observation"]
                self.agent.replay_buffer.add(obs, real_next, buf_act, rew, dones, infos)
            obs = nxt
        self.pool.extend(self.recorder.pop_segments())

    def _train_agent(self, n_steps: int) -> None:
        first = self.agent._last_obs is None  # first call (or after resume): reset the envs
        self.agent.learn(
            total_timesteps=n_steps,
            reset_num_timesteps=first,
            progress_bar=False,
            callback=self.callback,
        )
        self.pool.extend(self.recorder.pop_segments())
        self.pool = self.pool[-max(self.config.pool_size * 4, 1000) :]

    # ----- metrics ----------------------------------------------------------------------------
    def _metrics(self, extra: dict[str, Any]) -> dict[str, Any]:
        recent = self.pool[-self.config.pool_size :]
        acc = corr = float("nan")
        if self.fitted and len(recent) >= 2:
            batch = SegmentBatch.from_segments(recent)
            truth = np.array([s.true_return for s in recent])
            acc, corr = reward_agreement(
                self.ensemble, batch, truth, np.random.default_rng(self.state.round)
            )
        ep = [e["r"] for e in self.agent.ep_info_buffer] if self.agent.ep_info_buffer else []
        row = {
            "round": self.state.round,
            "env_steps": self.recorder.steps + self.state.env_steps,
            "n_labels": extra.pop("n_labels") if "n_labels" in extra else self._n_labels(),
            "n_judgements": len(self.judgements),
            "train_true_return": float(np.mean(ep[-10:])) if ep else float("nan"),
            "reward_accuracy": acc,
            "reward_corr": corr,
            "wall_s": self.state.wall_s + (time.perf_counter() - self._t0),
        } | extra
        return row

    # ----- run ---------------------------------------------------------------------------------
    def run(self) -> dict[str, Any]:
        """Run (or continue) until the step budget is spent; returns the summary."""
        c = self.config
        self._t0 = time.perf_counter()
        if self.state.round == 0:
            self._random_steps(c.initial_steps)
            self._ask(self._due_queries(0))
            self._collect()
            fit = self._fit()
            self._record(fit)
            self.state.round = 1
        while self.recorder.steps + self.state.env_steps < c.total_steps:
            steps = min(
                c.steps_per_round, c.total_steps - self.recorder.steps - self.state.env_steps
            )
            self._train_agent(steps)
            self._ask(self._due_queries(self.state.round))
            self._collect()
            fit = self._fit()
            if c.eval_every_rounds and self.state.round % c.eval_every_rounds == 0:
                mean, std = evaluate_policy(
                    self.agent,
                    c.env_id,
                    n_episodes=max(3, c.eval_episodes // 2),
                    seed=10_000 + c.seed,
                )
                fit |= {"eval_true_return": mean, "eval_true_return_std": std}
            self._record(fit)
            self.state.round += 1
        train_wall = self.state.wall_s + (time.perf_counter() - self._t0)
        t_eval = time.perf_counter()
        mean, std = evaluate_policy(
            self.agent, c.env_id, n_episodes=c.eval_episodes, seed=10_000 + c.seed
        )
        final = self._metrics({"eval_true_return": mean, "eval_true_return_std": std})
        final["wall_s"] = train_wall
        summary = {
            "env_id": c.env_id,
            "algo": c.algo,
            "seed": c.seed,
            "true_return": mean,
            "true_return_std": std,
            "n_labels": final["n_labels"],
            "n_judgements": final["n_judgements"],
            "reward_accuracy": _last_finite(self.state.history, "reward_accuracy"),
            "reward_corr": _last_finite(self.state.history, "reward_corr"),
            "env_steps": final["env_steps"],
            "wall_s": train_wall,
            "eval_s": time.perf_counter() - t_eval,
            "rounds": self.state.round,
        }
        self.out.finish(summary, self.state.history)
        return summary

    def _record(self, fit: dict[str, Any]) -> None:
        row = self._metrics(dict(fit))
        self.state.history.append(row)
        self.out.append_metrics(row)
        self._checkpoint()
        self.progress(row)

    # ----- checkpoints and resume --------------------------------------------------------------
    def _checkpoint(self) -> None:
        ck = self.run_dir / "checkpoints"
        ck.mkdir(exist_ok=True)
        if self.fitted:
            self.ensemble.save(ck / "reward")
        save_agent_state(self.agent, ck / "agent")
        state = {
            "round": self.state.round + 1,
            "env_steps": self.recorder.steps + self.state.env_steps,
            "wall_s": self.state.wall_s + (time.perf_counter() - self._t0),
            "l2": self.trainer.l2,
            "rng": self.rng.bit_generator.state,
            "history": self.state.history,
        }
        tmp = ck / "state.json.tmp"
        tmp.write_text(json.dumps(state, default=float))
        tmp.replace(ck / "state.json")

    def _resume(self) -> None:
        ck = self.run_dir / "checkpoints"
        try:
            state = json.loads((ck / "state.json").read_text())
        except (OSError, json.JSONDecodeError) as exc:
            raise StoreError(
                f"cannot resume from {self.run_dir}: no readable checkpoints/state.json ({exc}). "
                "Start a new run instead"
            ) from exc
        self.state = LoopState(
            round=state["round"],
            env_steps=state["env_steps"],
            wall_s=state["wall_s"],
            history=state["history"],
        )
        self.rng.bit_generator.state = state["rng"]
        self.trainer.set_l2(state["l2"])
        self.queries = {q.id: q for q in self.store.queries()}
        self.judgements = [j for _seq, j in self.store.judgements()]
        self.known_judgements = {j.id for j in self.judgements}
        if hasattr(self.source, "after_seq"):
            self.source.after_seq = max([s for s, _ in self.store.judgements()], default=0)  # type: ignore[attr-defined]
        stored = self.store.segments()
        self.segments = {s.id: s for s in stored}
        self.pool = list(stored)
        if (ck / "reward" / "reward_state.pt").exists():
            loaded = RewardEnsemble.load(ck / "reward")
            self.ensemble.load_state_dict(loaded.state_dict())
            self.fitted = True
        load_agent_state(self.agent, ck / "agent")
        log.info(
            "resumed %s at round %d with %d judgements",
            self.run_dir,
            self.state.round,
            len(self.judgements),
        )


def _last_finite(history: list[dict[str, Any]], key: str) -> float:
    for row in reversed(history):
        v = row.get(key)
        if isinstance(v, float) and math.isfinite(v):
            return v
    return float("nan")


def train(
    config: TrainConfig,
    *,
    run_dir: str | Path,
    source: FeedbackSource | None = None,
    selector: Selector | None = None,
    aggregator: Aggregator | None = None,
    progress: ProgressFn | None = None,
) -> dict[str, Any]:
    """Run a preference-learning loop in ``run_dir`` (created) and return its summary."""
    run_dir = Path(run_dir)
    if (run_dir / "config.json").exists():
        raise ConfigError(
            f"{run_dir} already holds a run; resume it with preflab.loop.resume(run_dir) "
            "or choose a new directory"
        )
    return PreferenceLoop(
        config, run_dir, source=source, selector=selector, aggregator=aggregator, progress=progress
    ).run()


def resume(
    run_dir: str | Path,
    *,
    source: FeedbackSource | None = None,
    selector: Selector | None = None,
    aggregator: Aggregator | None = None,
    progress: ProgressFn | None = None,
) -> dict[str, Any]:
    """Continue a stopped run from its directory (config, store and checkpoints)."""
    config = TrainConfig.load(Path(run_dir) / "config.json")
    loop = PreferenceLoop(
        config,
        run_dir,
        source=source,
        selector=selector,
        aggregator=aggregator,
        progress=progress,
        resume=True,
    )
    return loop.run()
