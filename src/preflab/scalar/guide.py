"""The two-phase run of GUIDE / Pref-GUIDE with simulated evaluators.

Human-in-the-loop phase: a PPO agent trains on the evaluators' real-time ratings (their mean,
plus ``sparse_weight`` × the env reward if wanted); every rating is recorded with the
observation and action it was about. Each of the ``n_envs`` environments is a stream; the
evaluators rate every stream (one simulated evaluator state per stream), and windows never
cross streams. Post-human phase: the evaluators leave; a reward model learned from what they
said (Individual, voting, pooled, binary majority, or GUIDE regression) replaces them and
the same agent keeps training. The final true return measures each way of learning.
"""

from __future__ import annotations

import copy
import logging
from collections.abc import Callable
from dataclasses import dataclass, field

import numpy as np
import torch
from stable_baselines3 import PPO, SAC
from stable_baselines3.common.vec_env import VecEnv, VecEnvWrapper

from preflab.envs import flatten_actions, flatten_obs, make_vec_env
from preflab.errors import ConfigError
from preflab.evaluate import evaluate_policy
from preflab.policy.agents import relabel_replay_buffer
from preflab.policy.reward_wrapper import LearnedRewardVecEnv
from preflab.reward import RewardEnsemble, SegmentBatch
from preflab.scalar.evaluators import EvaluatorConfig, Rater
from preflab.scalar.models import (
    ScalarModelConfig,
    fit_preferences,
    fit_regression,
    pooled_labels,
    voting_labels,
)
from preflab.scalar.windows import DEFAULT_DELTA, PairLabels, window_labels, window_pairs
from preflab.seeding import derive_seed

log = logging.getLogger(__name__)

METHODS = ("individual", "voting", "regression", "pooled", "majority")


@dataclass(frozen=True, kw_only=True)
class GuideConfig:
    """Budgets and settings of a two-phase run."""

    env_id: str = "Pendulum-v1"
    """Environment."""
    algo: str = "ppo"
    """Policy learner: 'ppo' (on-policy) or 'sac' (off-policy; its replay buffer is relabelled
    with the learned reward when the post-human phase starts)."""
    n_envs: int = 8
    """Parallel environments (= rated streams)."""
    human_steps: int = 30_000
    """Environment steps of the human-in-the-loop phase."""
    post_steps: int = 30_000
    """Environment steps of the post-human phase."""
    window: int = 10
    """Pref-GUIDE window n."""
    delta: float = DEFAULT_DELTA
    """No-preference range δ on ratings (5% of [−1, 1])."""
    vote_delta: float = 0.1
    """δ of the voting step, in standard deviations of each model's item scores."""
    quality_scale: float = 2.0
    """Evaluators' scale of the true per-step reward (see EvaluatorConfig)."""
    sparse_weight: float = 0.0
    """Weight of the env reward added to the ratings/learned reward (0: feedback only)."""
    eval_episodes: int = 10
    """Episodes of the final evaluation."""
    ppo: dict = field(
        default_factory=lambda: {
            "n_steps": 256,
            "batch_size": 256,
            "clip_range": 0.2,
            "ent_coef": 0.0,
            "gae_lambda": 0.95,
            "n_epochs": 5,
            "gamma": 0.97,
            "learning_rate": 1e-3,
        }
    )
    """SB3 PPO arguments (imitation's Pendulum settings with larger batches and fewer epochs,
    to fit many runs on a shared 2-core machine)."""
    sac: dict = field(
        default_factory=lambda: {
            "learning_rate": 1e-3,
            "buffer_size": 200_000,
            "batch_size": 256,
            "learning_starts": 500,
            "train_freq": 1,
            "gradient_steps": 1,
            "gamma": 0.98,
            "tau": 0.02,
            "policy_kwargs": {"net_arch": [64, 64]},
        }
    )
    """SB3 SAC arguments (preflab's preset with (64, 64) networks)."""

    def __post_init__(self) -> None:
        if self.algo not in ("ppo", "sac"):
            raise ConfigError(f"algo must be 'ppo' or 'sac', got {self.algo!r}")
        if self.human_steps < self.window * self.n_envs or self.post_steps < 0:
            raise ConfigError(
                "human_steps must give each stream at least one window; post_steps ≥ 0"
            )


class RatingVecEnv(VecEnvWrapper):
    """Replaces the env reward with the mean rating of simulated evaluators; records everything."""

    def __init__(self, venv: VecEnv, rater: Rater, sparse_weight: float = 0.0) -> None:
        super().__init__(venv)
        self.rater = rater
        self.sparse_weight = sparse_weight
        self.obs_log: list[np.ndarray] = []
        self.act_log: list[np.ndarray] = []
        self.rating_log: list[np.ndarray] = []
        self.true_log: list[np.ndarray] = []
        self._last: np.ndarray | None = None
        self._acts: np.ndarray | None = None

    def reset(self) -> np.ndarray:
        obs = self.venv.reset()
        self._last = flatten_obs(obs, self.observation_space)
        return obs

    def step_async(self, actions: np.ndarray) -> None:
        self._acts = flatten_actions(actions, self.action_space)
        self.venv.step_async(actions)

    def step_wait(self):  # type: ignore[no-untyped-def]
        obs, rew, dones, infos = self.venv.step_wait()
        assert self._last is not None and self._acts is not None
        ratings = self.rater.rate(np.asarray(rew, np.float64))  # (S, n_envs)
        self.obs_log.append(self._last)
        self.act_log.append(self._acts)
        self.rating_log.append(ratings)
        self.true_log.append(np.asarray(rew, np.float64))
        for i, info in enumerate(infos):
            info["true_reward"] = float(rew[i])
        self._last = flatten_obs(obs, self.observation_space)
        return obs, (ratings.mean(0) + self.sparse_weight * rew).astype(np.float32), dones, infos


@dataclass
class HumanPhase:
    """What the human-in-the-loop phase left behind."""

    agent: PPO | SAC
    items: SegmentBatch
    """All rated steps as one-step items, stream after stream."""
    ratings: np.ndarray
    """(S, N) ratings of every evaluator for every item."""
    true_rewards: np.ndarray
    """(N,) true reward of every item."""
    stream_starts: list[int]
    """Index of the first item of every stream (plus the end)."""
    return_after: float
    """True return of the agent at the end of the phase."""


def _make_agent(config: GuideConfig, venv: VecEnv, seed: int) -> PPO | SAC:
    if config.algo == "sac":
        return SAC("MlpPolicy", venv, seed=seed, verbose=0, device="cpu", **config.sac)
    return PPO("MlpPolicy", venv, seed=seed, verbose=0, device="cpu", **config.ppo)


def human_phase(
    config: GuideConfig, evaluators: list[EvaluatorConfig], rng: np.random.Generator
) -> HumanPhase:
    """Train on real-time ratings for ``human_steps`` and record them."""
    venv = make_vec_env(config.env_id, config.n_envs, derive_seed(rng))
    rater = Rater(evaluators, config.n_envs, rng, scale=config.quality_scale)
    wrapped = RatingVecEnv(venv, rater, config.sparse_weight)
    agent = _make_agent(config, wrapped, derive_seed(rng))
    agent.learn(config.human_steps)
    obs = np.stack(wrapped.obs_log, axis=1)  # (n_envs, T, D)
    acts = np.stack(wrapped.act_log, axis=1)
    rat = np.stack(wrapped.rating_log, axis=2)  # (S, n_envs, T)
    true = np.stack(wrapped.true_log, axis=1)  # (n_envs, T)
    n_envs, t = true.shape
    items = SegmentBatch.from_arrays(
        obs.reshape(n_envs * t, 1, -1), acts.reshape(n_envs * t, 1, -1)
    )
    ret, _ = evaluate_policy(
        agent, config.env_id, n_episodes=config.eval_episodes, seed=derive_seed(rng)
    )
    return HumanPhase(
        agent=agent,
        items=items,
        ratings=rat.reshape(len(evaluators), n_envs * t),
        true_rewards=true.reshape(-1),
        stream_starts=[k * t for k in range(n_envs + 1)],
        return_after=ret,
    )


def stream_window_labels(phase: HumanPhase, evaluator: int, config: GuideConfig) -> PairLabels:
    """Algorithm 1 on every stream of one evaluator (windows never cross streams)."""
    parts = []
    for a, b in zip(phase.stream_starts[:-1], phase.stream_starts[1:], strict=True):
        lab = window_labels(phase.ratings[evaluator, a:b], window=config.window, delta=config.delta)
        parts.append(PairLabels(pairs=lab.pairs + a, p=lab.p))
    return pooled_labels(parts)


def stream_window_pairs(phase: HumanPhase, config: GuideConfig) -> np.ndarray:
    return np.concatenate(
        [
            window_pairs(b - a, config.window) + a
            for a, b in zip(phase.stream_starts[:-1], phase.stream_starts[1:], strict=True)
        ]
    )


def reward_models(
    phase: HumanPhase,
    config: GuideConfig,
    rng: np.random.Generator,
    model_config: ScalarModelConfig,
    methods: tuple[str, ...] = METHODS,
) -> dict[str, list[RewardEnsemble]]:
    """Learned rewards per method: 'individual' and 'regression' give one model per evaluator."""
    for m in methods:
        if m not in METHODS:
            raise ConfigError(f"unknown method {m!r}; expected some of {METHODS}")
    s = phase.ratings.shape[0]
    datasets = [stream_window_labels(phase, j, config) for j in range(s)]
    out: dict[str, list[RewardEnsemble]] = {}
    individual = [fit_preferences(phase.items, d, rng, model_config) for d in datasets]
    if "individual" in methods:
        out["individual"] = individual
    pairs = stream_window_pairs(phase, config)
    if "voting" in methods:
        out["voting"] = [
            fit_preferences(
                phase.items,
                voting_labels(individual, phase.items, pairs, config.vote_delta),
                rng,
                model_config,
            )
        ]
    if "majority" in methods:
        lab = voting_labels(individual, phase.items, pairs, config.vote_delta, binary=True)
        out["majority"] = [fit_preferences(phase.items, lab, rng, model_config)]
    if "pooled" in methods:
        out["pooled"] = [fit_preferences(phase.items, pooled_labels(datasets), rng, model_config)]
    if "regression" in methods:
        out["regression"] = [
            fit_regression(phase.items, phase.ratings[j], rng, model_config) for j in range(s)
        ]
    return out


def reward_fn_of(model: RewardEnsemble) -> Callable[..., np.ndarray]:
    """The learned reward as a LearnedRewardVecEnv reward function."""

    def fn(obs: np.ndarray, acts: np.ndarray, _next: np.ndarray) -> np.ndarray:
        return model.reward(obs, acts)

    return fn


def post_phase(
    phase: HumanPhase, model: RewardEnsemble | None, config: GuideConfig, rng: np.random.Generator
) -> float:
    """Continue the phase-1 agent on ``model``'s reward (None: the true env reward, a reference)
    for ``post_steps``; returns the final true return."""
    base = make_vec_env(config.env_id, config.n_envs, derive_seed(rng))
    venv = base if model is None else LearnedRewardVecEnv(base, reward_fn_of(model))
    agent = _make_agent(config, venv, derive_seed(rng))
    agent.policy.load_state_dict(phase.agent.policy.state_dict())
    if isinstance(agent, SAC):
        agent.replay_buffer = copy.deepcopy(phase.agent.replay_buffer)
        agent.log_ent_coef.data.copy_(phase.agent.log_ent_coef.data)
        if model is not None:
            relabel_replay_buffer(agent, reward_fn_of(model))
        agent.learning_starts = 0
    else:
        agent.policy.optimizer.load_state_dict(phase.agent.policy.optimizer.state_dict())
    if config.post_steps:
        agent.learn(config.post_steps)
    ret, _ = evaluate_policy(
        agent, config.env_id, n_episodes=config.eval_episodes, seed=derive_seed(rng)
    )
    venv.close()
    return ret


def reward_correlation(
    model: RewardEnsemble, obs: np.ndarray, acts: np.ndarray, true: np.ndarray
) -> float:
    """Pearson r between a model's per-step reward and the true reward on given steps."""
    with torch.no_grad():
        r = model.reward(obs, acts)
    return float(np.corrcoef(r, true)[0, 1]) if np.std(r) > 0 else float("nan")
