"""Pref-GUIDE runs through the one loop: configs, sources, aggregators and the two designs
(the experiment code of ``preflab bench prefguide``).

**One agent per evaluator** (GUIDE / Pref-GUIDE, where every participant trained their own
agent; ``preflab bench prefguide`` uses this design):

* **human-in-the-loop phase**: evaluator k's agent is one :class:`preflab.loop.PreferenceLoop`
  run (:func:`human_config`, :func:`evaluator_source`, aggregator :class:`NoLabels`) whose
  policy reward is k's live rating of each step (``policy_reward.live_steps``); the rated steps
  become stored rating streams (item segments of ``item_length`` steps).
* **reward models** (:func:`evaluator_models`, :func:`post_reward_models`): individual =
  Algorithm 1 on k's ratings; regression = GUIDE's MSE regression on k's raw item ratings;
  voting = Algorithm 2: every evaluator's individual model votes on each window pair of k's
  streams, a new model is fit on the mean votes (majority: the binary baseline of the votes).
* **post-human phase** (:func:`continue_on_reward`): for each method a copy of k's run
  continues through the loop on that fixed reward model (the paper trains r_θ once and
  "uses r_θ for continual learning"; every method starts from the same saved checkpoint).

**One shared agent** (:func:`method_runs`, kept for the loop's tests and the studio): one run
per method in which all S evaluators rate the same agent live (the policy's reward is their
mean rating) and the post-human phase continues on the reward the method's aggregator learns
each round:

* ``individual`` — Algorithm 1 on one evaluator's ratings: one run per evaluator with
  ``WindowAggregator(annotators=(id,))`` (the results are averaged over evaluators);
* ``voting`` — Algorithm 2 (:class:`preflab.aggregate.VotingAggregator`);
* ``majority`` — the binary majority of the same votes (:class:`BinaryVoting`);
* ``pooled`` — Algorithm 1 on every evaluator's ratings in one dataset (``WindowAggregator()``).

Labels are capped at ``max_pairs`` per fit (:class:`CappedLabels`, uniform without replacement):
Algorithm 1 gives (N − n + 1)·C(n, 2) pairs per stream, far more than a fit needs.
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Literal

import numpy as np
import torch

from preflab.aggregate import Aggregator, Feedback, VotingAggregator, item_values
from preflab.aggregate.capped import BinaryVoting, CappedLabels, NoLabels, SampledWindows
from preflab.config import TrainConfig
from preflab.errors import ConfigError, DataError
from preflab.kinds.rating_windows import (
    DEFAULT_DELTA,
    PairLabels,
    window_pairs,
)
from preflab.loop import RunResult
from preflab.policy.shaping import PolicyRewardConfig
from preflab.records import Label, Rating, Segment
from preflab.reward import RewardEnsemble, SegmentBatch
from preflab.reward.scalar import (
    ScalarModelConfig,
    VoteScale,
    fit_preferences,
    fit_regression,
    voting_labels,
)
from preflab.runs import branch_run
from preflab.seeding import derive_seed
from preflab.sources.evaluators import EvaluatorConfig
from preflab.sources.raters import NoQueries, SimulatedRaters

METHODS = ("individual", "voting", "pooled", "majority")
"""Methods that train a policy through the loop (GUIDE regression: correlation table only)."""


@dataclass(frozen=True, kw_only=True)
class GuideConfig:
    """Budgets and settings of a Pref-GUIDE run (human-in-the-loop + post-human phase)."""

    env_id: str = "Pendulum-v1"
    """Environment."""
    algo: Literal["ppo", "sac"] = "ppo"
    """Policy learner: 'ppo' (on-policy) or 'sac' (off-policy; its replay buffer is relabelled
    with the learned reward once, when the post-human phase starts)."""
    n_envs: int = 8
    """Parallel environments (each episode of each env is a rated stream)."""
    human_steps: int = 30_000
    """Env steps of the human-in-the-loop phase (it ends at the first round boundary at or after
    this many steps)."""
    post_steps: int = 30_000
    """Env steps of the post-human phase."""
    steps_per_round: int = 4096
    """Env steps between reward fits (rounds) in both phases."""
    item_length: int = 1
    """Steps per rated item (a stream is a sequence of items; 1–5 steps). Pref-GUIDE's data
    points are 3 consecutive observations with their actions, rated at 2 Hz."""
    window: int = 10
    """Pref-GUIDE window n (items)."""
    delta: float = DEFAULT_DELTA
    """No-preference range δ on ratings (5% of [−1, 1])."""
    vote_delta: float = 0.1
    """δ of the voting step, in ``vote_scale`` units."""
    vote_scale: VoteScale = "std"
    """Scale of the models' item scores in the vote: 'std' (standard deviations), as the
    published prefguide results were measured; the library's default is the paper's
    'feedback' (5 % of the feedback range) since issue #27."""
    quality_scale: float = 2.0
    """Evaluators' scale of the true per-step reward (see EvaluatorConfig)."""
    max_pairs: int = 40_000
    """Labelled pairs each reward model trains on (uniformly drawn from the method's labels)."""
    model: ScalarModelConfig = field(default_factory=ScalarModelConfig)
    """Reward model architecture and fit (the loop's, and the voting evaluators' models)."""
    eval_episodes: int = 10
    """Episodes of the final evaluation."""
    ppo: str = json.dumps(
        {
            "batch_size": 256,
            "clip_range": 0.2,
            "ent_coef": 0.0,
            "gae_lambda": 0.95,
            "n_epochs": 5,
            "gamma": 0.97,
            "learning_rate": 1e-3,
        }
    )
    """SB3 PPO arguments as JSON (n_steps: the loop's preset, 2048 // n_envs per env)."""
    sac: str = json.dumps(
        {
            "learning_rate": 1e-3,
            "buffer_size": 50_000,
            "batch_size": 256,
            "learning_starts": 500,
            "train_freq": 1,
            "gradient_steps": 1,
            "gamma": 0.98,
            "tau": 0.02,
        }
    )
    """SB3 SAC arguments as JSON ((64, 64) networks; the buffer holds every step of runs up to
    50k steps, and is saved in every checkpoint)."""

    def __post_init__(self) -> None:
        if self.algo not in ("ppo", "sac"):
            raise ConfigError(f"algo must be 'ppo' or 'sac', got {self.algo!r}")
        if self.item_length < 1:
            raise ConfigError(f"item_length must be ≥ 1, got {self.item_length}")
        if self.human_steps < self.window * self.item_length * self.n_envs or self.post_steps < 0:
            need = self.window * self.item_length * self.n_envs
            raise ConfigError(
                f"human_steps ({self.human_steps}) must give each env's stream at least one "
                f"window of items (window × item_length × n_envs = {need}) and post_steps "
                f"({self.post_steps}) must be ≥ 0; raise human_steps or shorten the items"
            )
        if self.max_pairs < 1:
            raise ConfigError(f"max_pairs must be ≥ 1, got {self.max_pairs}")


def train_config(config: GuideConfig, seed: int) -> TrainConfig:
    """The loop configuration of a Pref-GUIDE run."""
    c = config
    initial = 4 * c.item_length * c.n_envs  # a few random (rated) steps before round 1
    m = c.model
    return TrainConfig(
        env_id=c.env_id,
        algo=c.algo,
        seed=seed,
        total_steps=c.human_steps + c.post_steps,
        total_labels=1,  # no pair queries: every label comes from the rating streams
        initial_label_frac=0.0,
        initial_steps=initial,
        steps_per_round=c.steps_per_round,
        segment_length=c.item_length,
        selector="random",
        pool_size=max(400, 2 * c.steps_per_round // c.item_length),
        n_envs=c.n_envs,
        agent_kwargs=c.ppo if c.algo == "ppo" else c.sac,
        net_arch=(64, 64),
        relabel=False,  # off-policy: relabelled once when the live phase ends
        reward=m.reward,
        fit=m.fit,
        first_fit_epochs=m.fit.epochs,
        policy_reward=PolicyRewardConfig(live_steps=c.human_steps),
        eval_episodes=c.eval_episodes,
    )


def make_source(
    config: GuideConfig, evaluators: Sequence[EvaluatorConfig], seed: int
) -> SimulatedRaters:
    """The S simulated evaluators of a run (deterministic given ``seed``)."""
    return SimulatedRaters(
        evaluators,
        config.n_envs,
        np.random.default_rng([seed, 1]),
        scale=config.quality_scale,
    )


def make_aggregator(
    method: str, config: GuideConfig, seed: int, *, evaluator: str | None = None
) -> Aggregator:
    """The aggregator of one method; ``individual`` needs the ``evaluator`` id it learns from."""
    c = config
    model = replace(c.model, max_pairs=c.max_pairs)
    if method in ("individual", "pooled"):
        annotators: tuple[str, ...] | None = None
        if method == "individual":
            if evaluator is None:
                raise ConfigError(
                    "method 'individual' learns from one evaluator; pass evaluator=id"
                )
            annotators = (evaluator,)
        return SampledWindows(
            window=c.window,
            delta=c.delta,
            annotators=annotators,
            max_labels=c.max_pairs,
            seed=seed,
        )
    if method in ("voting", "majority"):
        voting = VotingAggregator(
            window=c.window,
            delta=c.delta,
            vote_delta=c.vote_delta,
            vote_scale=c.vote_scale,
            seed=seed,
            model=model,
        )
        inner: Aggregator = voting if method == "voting" else BinaryVoting(voting=voting)
    else:
        raise ConfigError(f"unknown method {method!r}; expected one of {METHODS}")
    return CappedLabels(inner=inner, max_labels=c.max_pairs, seed=seed)


@dataclass(frozen=True)
class GuideRun:
    """One loop run of a Pref-GUIDE comparison."""

    method: str
    """Method name."""
    evaluator: str | None
    """The evaluator an 'individual' run learns from (None otherwise)."""
    train: TrainConfig
    """Loop configuration."""
    aggregator: Aggregator
    """How the stored ratings become labels."""


def method_runs(
    config: GuideConfig,
    n_evaluators: int,
    seed: int,
    methods: Sequence[str] = METHODS,
) -> list[GuideRun]:
    """Every loop run of a shared-agent comparison (module docstring): S individual runs (one
    per evaluator), then one each of the other methods. Each run builds its own source with
    :func:`make_source` (same seed: the same evaluators and, on one machine, the same live
    phase, so all methods share one human phase)."""
    ids = [f"evaluator-{k}" for k in range(n_evaluators)]
    tc = train_config(config, seed)
    runs: list[GuideRun] = []
    for m in methods:
        if m == "individual":
            runs += [GuideRun(m, e, tc, make_aggregator(m, config, seed, evaluator=e)) for e in ids]
        else:
            runs.append(GuideRun(m, None, tc, make_aggregator(m, config, seed)))
    return runs


# ----- analysis on a finished run (no policy training) -------------------------------------------
def rated_steps(
    segments: Sequence[Segment], queries: dict[str, tuple[str, ...]], ratings: Sequence[Rating]
) -> tuple[SegmentBatch, np.ndarray, dict[str, np.ndarray]]:
    """The rated steps of a run as one-step items: (items, true rewards (N,), per-evaluator
    rating of each step {id: (N,)}; NaN where an evaluator did not rate a step).

    ``queries`` maps each rating stream id to its item ids; ``segments`` must hold the items.
    """
    seg = {s.id: s for s in segments}
    index: dict[tuple[str, int], int] = {}
    obs: list[np.ndarray] = []
    acts: list[np.ndarray] = []
    true: list[float] = []
    for qid, items in queries.items():
        k = 0
        for sid in items:
            s = seg[sid]
            for j in range(s.length):
                index[(qid, k)] = len(true)
                obs.append(s.obs[j])
                acts.append(s.acts[j])
                true.append(float(s.true_rewards[j]))
                k += 1
    n = len(true)
    values: dict[str, np.ndarray] = {}
    for r in ratings:
        row = index.get((r.stream_id, r.step))
        if row is None:
            continue
        values.setdefault(r.annotator_id, np.full(n, np.nan))[row] = r.value
    batch = SegmentBatch.from_arrays(
        np.asarray(obs, np.float32)[:, None], np.asarray(acts, np.float32)[:, None]
    )
    return batch, np.asarray(true), values


def regression_models(
    items: SegmentBatch,
    values: dict[str, np.ndarray],
    seed: int,
    model: ScalarModelConfig | None = None,
) -> dict[str, RewardEnsemble]:
    """GUIDE's regression baseline per evaluator, on the steps that evaluator rated."""
    out = {}
    for k, (ann, v) in enumerate(sorted(values.items())):
        rated = np.flatnonzero(np.isfinite(v))
        sub = SegmentBatch.from_arrays(items.obs[rated].numpy(), items.acts[rated].numpy())
        out[ann] = fit_regression(sub, v[rated], np.random.default_rng([seed, k]), model)
    return out


def reward_correlation(model: RewardEnsemble, items: SegmentBatch, true: np.ndarray) -> float:
    """Pearson r between a model's per-step reward and the true reward on one-step items."""
    with torch.no_grad():
        r = model.reward(items.obs[:, 0], items.acts[:, 0])
    return float(np.corrcoef(r, true)[0, 1]) if np.std(r) > 0 else float("nan")


def labels_to_pairs(labels: Sequence[Label], row: dict[str, int]) -> PairLabels:
    """Labels over segment ids as item-index pairs of a batch whose row of id ``s`` is row[s]."""
    pairs = np.array([[row[lab.a], row[lab.b]] for lab in labels], np.int64).reshape(-1, 2)
    return PairLabels(pairs=pairs, p=np.array([lab.p for lab in labels], np.float64))


def method_models(
    feedback: Feedback,
    config: GuideConfig,
    seed: int,
    evaluators: Sequence[str],
    methods: Sequence[str] = METHODS,
) -> dict[str, list[RewardEnsemble]]:
    """Each method's reward model(s) fit on one run's stored feedback, as the loop fits them
    (for the reward-correlation table; no policy is trained). 'individual' gives one model
    per evaluator."""
    ids = list(
        dict.fromkeys(s for q in feedback.queries.values() if q.kind == "rating" for s in q.a)
    )
    row = {s: i for i, s in enumerate(ids)}
    items = SegmentBatch.from_segments([feedback.segments[s] for s in ids])
    model = replace(config.model, max_pairs=config.max_pairs)
    out: dict[str, list[RewardEnsemble]] = {}
    for m in methods:
        who = list(evaluators) if m == "individual" else [None]
        out[m] = []
        for k, e in enumerate(who):
            agg = make_aggregator(m, config, seed, evaluator=e)
            labels = labels_to_pairs(agg.labels(feedback), row)
            rng = np.random.default_rng([seed, 11, k])
            out[m].append(fit_preferences(items, labels, rng, model))
    return out


# ----- one agent per evaluator (the bench's design, as in GUIDE / Pref-GUIDE) ----------------------
POST_METHODS = ("individual", "voting", "regression")
"""Post-human methods of the per-evaluator design: every evaluator's own agent continues on
the reward model of its evaluator's ratings (individual, Algorithm 1), on the population's
voted labels of its evaluator's windows (voting, Algorithm 2) or on GUIDE's regression of its
evaluator's raw ratings (regression)."""


def evaluator_seed(seed: int, index: int) -> int:
    """The loop seed of evaluator ``index``'s agent in comparison ``seed`` (agents differ)."""
    return 1000 * seed + index


def evaluator_source(
    config: GuideConfig, evaluator: EvaluatorConfig, evaluator_id: str, seed: int, index: int
) -> SimulatedRaters:
    """One evaluator rating its own agent live (deterministic given ``seed`` and ``index``)."""
    return SimulatedRaters(
        [evaluator],
        config.n_envs,
        np.random.default_rng([seed, 1, index]),
        scale=config.quality_scale,
        ids=[evaluator_id],
    )


def human_config(config: GuideConfig, seed: int) -> TrainConfig:
    """The human-in-the-loop run of one evaluator's agent: ``human_steps`` on live ratings."""
    return replace(train_config(config, seed), total_steps=config.human_steps)


@dataclass(frozen=True)
class EvaluatorModels:
    """The reward models learned from one evaluator's human-in-the-loop phase."""

    items: SegmentBatch
    """The rated items of the evaluator's agent (in stream order)."""
    individual: RewardEnsemble
    """Algorithm 1 on the evaluator's ratings (Bradley–Terry)."""
    regression: RewardEnsemble
    """GUIDE: MSE regression of each item's mean rating."""
    pairs: np.ndarray
    """(P, 2) the window pairs of the evaluator's streams (rows of ``items``), for voting."""


def evaluator_models(
    feedback: Feedback, evaluator_id: str, config: GuideConfig, rng: np.random.Generator
) -> EvaluatorModels:
    """Fit the individual and the regression model of one evaluator on its own run's feedback."""
    values = item_values(feedback, (evaluator_id,))
    if not values:
        raise DataError(
            f"{evaluator_id} rated no stream in this feedback; run its human phase first"
        )
    ids = list(dict.fromkeys(s for iv in values for s in iv.items))
    row = {s: i for i, s in enumerate(ids)}
    items = SegmentBatch.from_segments([feedback.segments[s] for s in ids])
    model = replace(config.model, max_pairs=config.max_pairs)
    agg = SampledWindows(
        window=config.window,
        delta=config.delta,
        annotators=(evaluator_id,),
        max_labels=config.max_pairs,
        seed=derive_seed(rng),
    )
    labels = labels_to_pairs(agg.labels(feedback), row)
    individual = fit_preferences(items, labels, rng, model)
    rated = np.concatenate([[row[iv.items[k]] for k in iv.rated] for iv in values]).astype(int)
    target = np.concatenate([iv.values for iv in values])
    sub = SegmentBatch.from_segments([feedback.segments[ids[k]] for k in rated])
    regression = fit_regression(sub, target, rng, model)
    chunks = []
    for iv in values:
        rows = np.array([row[s] for s in iv.items], np.int64)
        pairs = rows[window_pairs(len(rows), config.window)]
        chunks.append(pairs[pairs[:, 0] != pairs[:, 1]])
    return EvaluatorModels(
        items=items,
        individual=individual,
        regression=regression,
        pairs=np.concatenate(chunks),
    )


def voting_model(
    own: EvaluatorModels,
    population: Sequence[RewardEnsemble],
    config: GuideConfig,
    rng: np.random.Generator,
    *,
    binary: bool = False,
) -> RewardEnsemble:
    """Algorithm 2 for one evaluator: every model of the population votes on each window pair
    of this evaluator's streams (own items, other evaluators' models); the mean vote is the
    label of the pair and a new Bradley–Terry model is fit on them (``binary``: the majority
    baseline instead)."""
    labels = voting_labels(
        population,
        own.items,
        own.pairs,
        config.vote_delta,
        binary=binary,
        scale=config.vote_scale,
    )
    return fit_preferences(
        own.items, labels, rng, replace(config.model, max_pairs=config.max_pairs)
    )


def post_reward_models(
    models: Sequence[EvaluatorModels],
    method: str,
    config: GuideConfig,
    seed: int,
) -> list[RewardEnsemble]:
    """The reward model each evaluator's agent continues on in the post-human phase."""
    if method == "individual":
        return [m.individual for m in models]
    if method == "regression":
        return [m.regression for m in models]
    if method in ("voting", "majority"):
        voters = [m.individual for m in models]
        return [
            voting_model(
                m, voters, config, np.random.default_rng([seed, 21, k]), binary=method == "majority"
            )
            for k, m in enumerate(models)
        ]
    raise ConfigError(
        f"unknown post-human method {method!r}; expected one of {(*POST_METHODS, 'majority')}"
    )


def continue_on_reward(
    human_dir: Path,
    run_dir: Path,
    config: TrainConfig,
    reward: RewardEnsemble,
    items: SegmentBatch,
    source: SimulatedRaters,
) -> RunResult:
    """The post-human phase of one agent: a branch of its human-phase run (agent, replay
    buffer, optimisers, envs, store) continues through the loop for ``config.total_steps`` in
    all on the fixed reward model ``reward`` (re-standardised on the evaluator's ``items``);
    an off-policy replay buffer is relabelled with it first. The human-phase run is left as
    it is, so every method continues from the same checkpoint (as in Pref-GUIDE, which
    continued every method from the saved start of the post-human phase)."""
    loop = branch_run(
        human_dir, run_dir, config, source=source, selector=NoQueries(), aggregator=NoLabels()
    )
    loop.fix_reward(reward, items)
    try:
        return loop.run()
    finally:
        loop.close()
