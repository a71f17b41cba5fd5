"""What a run is made of and what it produces: the parts :func:`preflab.assemble.assemble`
builds (:class:`RunParts`), the loop's round state, the result, and the small rules the loop's
parts share (label schedule, derived ids)."""

from __future__ import annotations

import dataclasses
import hashlib
import math
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np
from stable_baselines3.common.base_class import BaseAlgorithm

from preflab.aggregate import Aggregator
from preflab.envs import EnvSpec
from preflab.loop.pacing import Clock
from preflab.policy.reward_wrapper import LearnedRewardVecEnv, SegmentRecorder
from preflab.policy.rollout_relabel import RolloutRelabel
from preflab.policy.shaping import PolicyReward
from preflab.policy.termination import AbsorbingTail
from preflab.reward.ensemble import RewardEnsemble
from preflab.reward.trainer import RewardTrainer
from preflab.rundir.runwarnings import RunWarnings
from preflab.rundir.tracking import Tracker
from preflab.selection.selectors import Selector
from preflab.sources.base import FeedbackSource, UndoWindow
from preflab.sources.ratings import RatingSource
from preflab.sources.studio_bridge import StudioBridge
from preflab.sources.synthetic_queries import SegmentMaker
from preflab.sources.teacher import SyntheticTeacher
from preflab.store import FeedbackStore

RECENT_EPISODES = 10
"""Training episodes behind ``train_true_return`` and B-Pref's margin (the last ten, as B-Pref)."""

ProgressFn = Callable[[dict[str, Any]], None]
"""Called with each round's metrics row."""


@dataclass(frozen=True, kw_only=True)
class Hooks:
    """What the run's source and selector do beyond their protocols, found once by
    :func:`preflab.assemble.assemble` (the loop never asks a part what it is)."""

    ratings: RatingSource | None = None
    """The source when it also streams real-time ratings (Pref-GUIDE raters, the studio)."""
    segment_maker: SegmentMaker | None = None
    """The selector when it asks about segments it made itself (sampled states), not the
    run's rollouts."""
    margin_teacher: SyntheticTeacher | None = None
    """The source when it is a teacher whose skip or equal rule is relative to B-Pref's margin
    (the loop sets the margin before each round's queries)."""
    undo_window: UndoWindow | None = None
    """The source when people may undo answers for a while (the studio): at the run's end the
    loop closes the window and fits once more on what it then collects."""


def label_schedule(total: int, initial_frac: float, n_rounds: int, kind: str) -> list[int]:
    """Labels to ask in round 0 (initial) and rounds 1..n_rounds; sums to ``total``.

    'hyperbolic' gives round k a share ∝ 1 / (1 + k / 4) (front-loaded, like imitation's
    hyperbolic schedule); 'constant' spreads them evenly; 'sessions' asks round 0's number again
    in every round until the budget is spent (B-Pref's feedback sessions: PEBBLE, SURF and QPA
    ask ``reward_batch`` queries every ``num_interact`` steps), what is left over in the last
    round.
    """
    first = round(total * initial_frac)
    rest = total - first
    if kind == "sessions":
        size = first or math.ceil(total / (n_rounds + 1))
        per_round = [min(size, max(0, rest - size * k)) for k in range(n_rounds)]
        per_round[-1] += rest - sum(per_round)
        return [first, *per_round]
    w = np.ones(n_rounds) if kind == "constant" else 1.0 / (1.0 + np.arange(n_rounds) / 4.0)
    raw = rest * w / w.sum()
    per = np.floor(raw).astype(int)
    for k in np.argsort(-(raw - per))[: rest - per.sum()]:
        per[k] += 1
    return [first, *per.tolist()]


def derived_id(prefix: str, *parts: object) -> str:
    """A deterministic id from ``parts`` (the run's seed tag, round, position, contents)."""
    digest = hashlib.sha256("\x1f".join(map(str, parts)).encode()).hexdigest()[:20]
    return f"{prefix}-{digest}"


@dataclass
class RunParts:
    """Everything a run is made of, built by :func:`preflab.assemble.assemble` and handed to the
    loop."""

    store: FeedbackStore
    """The run's feedback store."""
    source: FeedbackSource
    """Where judgements come from."""
    selector: Selector
    """Which queries to ask."""
    aggregator: Aggregator
    """Judgements (and ratings) → labels."""
    rng: np.random.Generator
    """The loop's generator (selection, fits), after the seeds drawn for the parts."""
    tag: int
    """The run's seed tag: query and judgement ids derive from it."""
    env_spec: EnvSpec
    """The env as built (termination wrappers included); also used for evaluation."""
    recorder: SegmentRecorder
    """The env stack's recorder: cuts rollouts into segments."""
    venv: LearnedRewardVecEnv
    """The recorder wrapped so the agent sees the policy reward."""
    tail: AbsorbingTail | None
    """The absorbing tail on top of ``venv`` (opt-in), else None."""
    agent: BaseAlgorithm
    """The policy learner (SB3)."""
    reward: PolicyReward
    """The policy's reward: the one owner of the reward model and whether it is fitted."""
    trainer: RewardTrainer
    """Fits the reward model on labels."""
    callback: RolloutRelabel | None
    """Relabels a whole on-policy rollout at once (deferred rewards), else None."""
    bridge: StudioBridge | None
    """Publishes rounds to the studio and adopts the queries people composed there; None when
    nobody answers through the studio."""
    clock: Clock
    """What paces the run: the env-step budget alone (:class:`preflab.loop.pacing.StepClock`,
    simulated sources) or the people answering (:class:`preflab.loop.pacing.PeopleClock`)."""
    hooks: Hooks
    """What the source and selector do beyond their protocols."""
    warnings: RunWarnings
    """The run's warnings, each kind said once (a source that reports its own, such as the LLM
    judge's unreadable answers, writes into the same object)."""
    trackers: list[Tracker] = field(default_factory=list)
    """Where each round's metrics also go (TensorBoard, W&B; ``--log``)."""


@dataclass
class LoopState:
    """Where the loop is: the next round to run, wall time so far, metrics rows so far."""

    round: int = 0
    wall_s: float = 0.0
    history: list[dict[str, Any]] = field(default_factory=list)


@dataclass(frozen=True, kw_only=True)
class RunResult:
    """What a run produced: its summary numbers, its directory, the agent and reward model."""

    run_dir: Path
    """The run directory (config, store, metrics, checkpoints)."""
    env_id: str
    """Environment id (or the factory's name)."""
    algo: str
    """Policy learner."""
    seed: int
    """Seed of the run."""
    true_return: float
    """Mean true (env) return of the final deterministic policy."""
    true_return_std: float
    """Its standard deviation over the evaluation episodes."""
    n_labels: int
    """Labels the reward model was fit on last."""
    n_judgements: int
    """Judgements collected."""
    reward_accuracy: float
    """Share of held-out segment pairs the learned reward orders like the true reward."""
    reward_corr: float
    """Correlation of learned and true segment returns."""
    env_steps: int
    """Environment steps taken."""
    wall_s: float
    """Training wall time (s), resumed parts included."""
    eval_s: float
    """Final evaluation wall time (s)."""
    rounds: int
    """Feedback rounds run."""
    n_equal: int = 0
    """Judgements that found everything they compared equally preferable (a pair or group
    answer p = 0.5: a tie, B-Pref's equal teacher; a ranking with all its clips tied), among
    ``n_judgements``."""
    n_skipped: int = 0
    """Judgements that gave no answer (p = None: skipped, can't tell, B-Pref's skip teacher),
    among ``n_judgements``."""
    success_rate: float | None = None
    """Share of the evaluation episodes that solved the task (Meta-World's ``info['success']``);
    None for envs that report no success."""
    target_return: float | None = None
    """Mean target return of the final policy (``--eval-target``, else the teacher's
    ``--teacher.score``): how well the run learned the behaviour it was taught; None when the
    env's reward is the target."""
    target_return_std: float | None = None
    """Its standard deviation over the evaluation episodes; None without a target."""
    ended_by: str = "steps"
    """Why the run ended: 'steps' (the env-step budget was spent), 'labels' (people answered the
    whole label budget), 'owner' (Finish now in the studio) or 'deadline' (--max-minutes)."""
    warnings: tuple[str, ...] = ()
    """What went wrong without stopping the run (no labels, only ties, unreadable answers, NaN
    metrics), each with its cause and fix; empty for a healthy run."""
    agent: BaseAlgorithm = field(repr=False)
    """The trained SB3 agent."""
    reward_model: RewardEnsemble = field(repr=False)
    """The learned reward ensemble."""

    def summary(self) -> dict[str, Any]:
        """The JSON-able summary (as written to ``summary.json``)."""
        return {
            f.name: getattr(self, f.name)
            for f in dataclasses.fields(self)
            if f.name not in ("agent", "reward_model", "run_dir")
        }


def last_finite(history: list[dict[str, Any]], key: str) -> float:
    """The last finite value of ``key`` in metrics rows (NaN when there is none)."""
    for row in reversed(history):
        v = row.get(key)
        if isinstance(v, float) and math.isfinite(v):
            return v
    return float("nan")


def selector_state(selector: Any) -> Any:
    """A selector's own checkpoint state (JSON) when it keeps one (e.g. the LLM's transition
    sampler: how many of its pairs it handed out); None otherwise. A selector that is also the
    run's source (a simulated decision maker) is saved as the source."""
    state = getattr(selector, "state", None)
    return state() if callable(state) else None
