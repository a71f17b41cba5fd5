"""The composition root: turn a :class:`TrainConfig` (plus a user's own parts) into a run's parts.

This is the one place that decides which source, selector, aggregator, env stack, reward model,
policy reward and agent a run uses, and the one place that sets torch's global state (threads,
seeds). :class:`preflab.loop.PreferenceLoop` receives the parts ready-made and only runs rounds
and checkpoints; :func:`preflab.runs.load_run` builds only what inference needs.

The order in which seeds are drawn from the run's generator is part of a run's identity (same
seed, same run): the loop's tag, the source's generator (when the config's source is built), the
reward ensemble's seed, in that order; the loop then continues with the same generator.
"""

from __future__ import annotations

import contextlib
import dataclasses
import json
import logging
from collections.abc import Iterator
from pathlib import Path
from typing import TYPE_CHECKING, Any

import numpy as np
import torch
from stable_baselines3.common.base_class import BaseAlgorithm
from stable_baselines3.common.off_policy_algorithm import OffPolicyAlgorithm
from stable_baselines3.common.on_policy_algorithm import OnPolicyAlgorithm
from stable_baselines3.common.vec_env import VecEnv

from preflab.aggregate import Aggregator, make_aggregator
from preflab.aggregate.capped import CappedLabels, SampledWindows
from preflab.config import LLMSourceConfig, TrainConfig, VLMOptions
from preflab.device import agent_device, resolve_device
from preflab.env_families import episode_limit, headless_gl
from preflab.envs import EnvSpec, make_vec_env
from preflab.errors import ConfigError, StoreError
from preflab.loop import Hooks, RunParts, make_clock
from preflab.policy.agents import make_agent
from preflab.policy.algos import is_on_policy
from preflab.policy.hyperparams import effective_hyperparams, write_hyperparams
from preflab.policy.presets import (
    PRESET_SOURCES,
    budget_note,
    check_rollout,
    env_family,
    preset,
)
from preflab.policy.reward_wrapper import LearnedRewardVecEnv, SegmentRecorder
from preflab.policy.rollout_relabel import RolloutRelabel
from preflab.policy.shaping import LiveRating, PolicyReward, route_policy_reward
from preflab.policy.termination import AbsorbingTail, horizon_of, with_termination
from preflab.reward.ensemble import RewardEnsemble
from preflab.reward.models import make_reward_model
from preflab.reward.trainer import RewardTrainer
from preflab.rundir.runwarnings import ReportsWarnings, RunWarnings
from preflab.rundir.tracking import make_trackers, policy_logger
from preflab.runstate import Checkpoint
from preflab.runstate.agentstate import restore_policy
from preflab.seeding import derive_seed, make_rng, seed_torch
from preflab.selection.selectors import (
    DisagreementSelector,
    RandomSelector,
    RankingSelector,
    Selector,
)
from preflab.sources.base import FeedbackSource, undo_window_of
from preflab.sources.ratings import RatingSource
from preflab.sources.routing.router import RoutingSource, WatchesRewardModel
from preflab.sources.studio_bridge import StudioBridge
from preflab.sources.synthetic_queries import SegmentMaker
from preflab.sources.teacher import SyntheticTeacher, load_score, margin_teacher_of
from preflab.store import FeedbackStore

if TYPE_CHECKING:
    from preflab.llm.client import ChatClient, ResponseCache
    from preflab.vlm import VLMJudge

log = logging.getLogger(__name__)

EnvOrModel = EnvSpec | BaseAlgorithm
"""What a user may pass as ``env``: an env id or factory, or an SB3 model to continue training."""

_AUTO_AGGREGATOR = {
    "teacher": "identity",
    "store": "identity",
    "crowd": "sml",
    "llm": "confidence",
    "vlm": "confidence",
    "scalar": "window",
    "route": "identity",
}
"""The aggregator ``--aggregator auto`` picks for each source."""

SELECTORS = (
    "auto",
    "random",
    "disagreement",
    "entropy",
    "groupwise",
    "ranking",
    "transitions",
    "policy-aligned",
)
"""Selector names ``--selector`` takes."""


def set_torch_globals(config: TrainConfig) -> None:
    """The run's global torch state: thread count and seeds (the only global side effects;
    :func:`preflab.runs.release_run` gives the caller's thread count back when the run ends)."""
    torch.set_num_threads(config.torch_threads)
    seed_torch(config.seed)


def to_device(model: RewardEnsemble, device: torch.device) -> RewardEnsemble:
    """``model`` moved to ``device``; on the CPU it is left untouched (built there), so a CPU
    run is exactly what it was before devices existed."""
    return model if device.type == "cpu" else model.to(device)


def make_source(
    config: TrainConfig, store: FeedbackStore, rng: np.random.Generator
) -> FeedbackSource:
    """The source ``config.source`` names, with its options from the config."""
    if config.source == "teacher":
        return make_teacher(config, rng)
    if config.source == "crowd":
        from preflab.crowd.source import CrowdSource

        return CrowdSource(config.crowd, rng)
    if config.source == "llm":
        from preflab.llm import LLMJudge, PromptTemplate

        o = config.llm
        client = chat_client(o, cache=store.llm_cache)
        template = PromptTemplate.load(o.template or config.env_id)
        return LLMJudge(client, config.env_id, template=template, n_queries=o.n_queries)
    if config.source == "vlm":
        return make_vlm_judge(config.vlm, task=config.task, cache=store.llm_cache)
    if config.source == "route":
        return make_routing_source(config, store, rng)
    if config.source == "scalar":
        from preflab.sources.evaluators import population
        from preflab.sources.raters import SimulatedRaters

        s = config.scalar
        return SimulatedRaters(
            population(s.population, s.n_evaluators, rng),
            config.n_envs,
            rng,
            scale=s.quality_scale,
        )
    from preflab.sources.human import StoreSource

    return StoreSource(store)


def make_teacher(
    config: TrainConfig, rng: np.random.Generator, *, annotator_id: str = "teacher"
) -> SyntheticTeacher:
    """The synthetic teacher of ``--teacher.*`` (its score function loaded when one is named)."""
    score = load_score(config.teacher.score) if config.teacher.score else None
    return SyntheticTeacher(config.teacher, rng, annotator_id=annotator_id, reward_fn=score)


def chat_client(
    options: LLMSourceConfig | VLMOptions, *, cache: ResponseCache | None, **more: Any
) -> ChatClient:
    """The OpenAI-compatible client of an LLM or VLM source's options (``more``: further
    :class:`preflab.llm.client.ClientConfig` fields), caching answers in ``cache``."""
    from preflab.llm.client import ChatClient, ClientConfig

    o = options
    config = ClientConfig(
        base_url=o.base_url,
        model=o.model,
        api_key_env=o.api_key_env,
        temperature=o.temperature,
        concurrency=o.concurrency,
        timeout_s=o.timeout_s,
        **more,
    )
    return ChatClient(config, cache=cache)


def make_vlm_judge(options: VLMOptions, *, task: str, cache: ResponseCache | None) -> VLMJudge:
    """A :class:`VLMJudge` from ``--vlm.*`` options, caching answers in ``cache`` (the run's
    store)."""
    from preflab.llm.usage import load_prices
    from preflab.vlm import FrameSpec, VLMJudge, VLMTemplate

    o = options
    client = chat_client(
        o, cache=cache, max_tokens=o.max_tokens, deadline_s=max(o.timeout_s * 3, 180.0)
    )
    return VLMJudge(
        client,
        task=task,
        template=VLMTemplate.load(o.prompt, o.template),
        frames=FrameSpec(
            count=o.frames,
            size=o.image_size,
            format=o.format,
            layout=o.layout,
            jpeg_quality=o.jpeg_quality,
        ),
        samples=o.samples,
        view=o.view,
        prices=load_prices(o.prices, o.model) if o.prices else None,
    )


def make_routing_source(
    config: TrainConfig, store: FeedbackStore, rng: np.random.Generator
) -> RoutingSource:
    """The router of ``--route.*`` with its AI judge and people; each draws from a generator of
    its own, seeded from ``rng`` in a fixed order (router, AI, people)."""
    mine = np.random.default_rng(derive_seed(rng))
    ai = make_route_ai(config, store, np.random.default_rng(derive_seed(rng)))
    people = make_route_people(config, store, np.random.default_rng(derive_seed(rng)))
    return RoutingSource(config.route, mine, ai=ai, people=people, store=store)


def make_route_ai(
    config: TrainConfig, store: FeedbackStore, rng: np.random.Generator
) -> FeedbackSource:
    """The router's AI judge, ``--route.ai``: the simulated judge, or the vision-language judge
    of ``--vlm.*`` shown frames ('vlm') or the key steps' states in words ('llm')."""
    r = config.route
    if r.ai == "simulated":
        from preflab.sources.simulated_judge import SimulatedJudge

        return SimulatedJudge(r.judge, rng)
    options = config.vlm if r.ai == "vlm" else dataclasses.replace(config.vlm, view="states")
    return make_vlm_judge(options, task=config.task, cache=store.llm_cache)


def make_route_people(
    config: TrainConfig, store: FeedbackStore, rng: np.random.Generator
) -> FeedbackSource:
    """The router's people, ``--route.people``: the studio's (the store), a simulated crowd, or
    the synthetic teacher standing in for them as 'oracle'."""
    r = config.route
    if r.people == "store":
        from preflab.sources.human import StoreSource

        return StoreSource(store)
    if r.people == "crowd":
        from preflab.crowd.source import CrowdSource

        return CrowdSource(config.crowd, rng)
    return make_teacher(config, rng, annotator_id="oracle")


def find_hooks(source: FeedbackSource, selector: Selector) -> Hooks:
    """What ``source`` and ``selector`` do beyond their protocols (the loop's hooks)."""
    return Hooks(
        ratings=source if isinstance(source, RatingSource) else None,
        segment_maker=selector if isinstance(selector, SegmentMaker) else None,
        margin_teacher=margin_teacher_of(source),  # the teacher, or the router's people
        undo_window=undo_window_of(source),
    )


def make_selector(
    name: str,
    *,
    oversample: int | None = None,
    rank_size: int | None = None,
    aligned_episodes: int | None = None,
) -> Selector:
    """Selector by name: 'random', 'disagreement' (variance), 'entropy', 'groupwise' (paper
    000), 'ranking' (sets of ``rank_size`` clips) or 'policy-aligned' (QPA: random pairs from
    the ``aligned_episodes`` most recent episodes); ``oversample`` sets the candidate factor
    of the disagreement and ranking selectors."""
    kw: dict[str, Any] = {} if oversample is None else {"oversample": oversample}
    if name == "random":
        return RandomSelector()
    if name in ("disagreement", "entropy"):
        return DisagreementSelector(score="variance" if name == "disagreement" else name, **kw)
    if name == "groupwise":
        from preflab.selection.groupwise import GroupwiseSelector

        return GroupwiseSelector()
    if name == "ranking":
        if rank_size is not None:
            kw["k"] = rank_size
        return RankingSelector(**kw)
    if name == "auto":
        return DisagreementSelector(score="variance", **kw)
    if name == "policy-aligned":
        from preflab.selection.policy_aligned import QPA_EPISODES, PolicyAlignedSelector

        return PolicyAlignedSelector(episodes=aligned_episodes or QPA_EPISODES)
    if name == "transitions":
        raise ConfigError(
            "the 'transitions' selector samples states of the run's env: it is built by "
            "make_run_selector(config), or from Python as preflab.llm.TransitionSelector(env_id, "
            "n_pairs)"
        )
    raise ConfigError(
        f"unknown selector {name!r}; expected one of {', '.join(repr(s) for s in SELECTORS)}"
    )


def make_run_selector(config: TrainConfig) -> Selector:
    """The selector ``config.selector`` names; rating streams need none (nothing is asked)."""
    if config.source == "scalar":
        from preflab.sources.raters import NoQueries

        return NoQueries()
    name = config.selector_in_use
    if name == "transitions":
        from preflab.llm.transitions import TransitionSelector

        # its own seed: the same pairs again after a resume (its cursor is checkpointed)
        return TransitionSelector(config.env_id, config.total_labels, seed=config.seed)
    if name == "random":
        return make_selector("random")
    return make_selector(
        name,
        oversample=config.oversample,
        rank_size=config.rank_size,
        aligned_episodes=config.aligned_episodes,
    )


def make_run_aggregator(config: TrainConfig) -> Aggregator:
    """The aggregator ``config.aggregator`` names ('auto' picks the source's natural one)."""
    name = _AUTO_AGGREGATOR[config.source] if config.aggregator == "auto" else config.aggregator
    s = config.scalar
    if config.source == "store" and config.aggregator == "auto":
        return people_aggregator(config)
    if name == "window":
        return SampledWindows(
            window=s.window, delta=s.delta, max_labels=s.max_labels, seed=config.seed
        )
    if name == "voting":
        voting = make_aggregator("voting", window=s.window, delta=s.delta, seed=config.seed)
        return CappedLabels(inner=voting, max_labels=s.max_labels, seed=config.seed)
    return make_aggregator(name)


def people_aggregator(config: TrainConfig) -> Aggregator:
    """People in the studio: one label per judgement (identity) and, from their ratings of the
    published episodes, Pref-GUIDE's windowed labels (Algorithm 1: ``scalar.window`` items,
    no preference within ``scalar.delta``, at most ``scalar.max_labels``; an episode of fewer
    items is one window)."""
    from preflab.aggregate.combined import CombinedAggregator
    from preflab.aggregate.identity import IdentityAggregator

    s = config.scalar
    windows = SampledWindows(
        window=s.window,
        delta=s.delta,
        max_labels=s.max_labels,
        seed=config.seed,
        short_streams=True,
    )
    return CombinedAggregator(parts=(IdentityAggregator(), windows))


def open_store(config: TrainConfig, run_dir: Path, *, create: bool = True) -> FeedbackStore:
    """The run's store: ``config.store_url``, or SQLite inside the run directory; made only when
    ``create`` (a new run: a resumed one refuses a lost store rather than start an empty one)."""
    return FeedbackStore(
        config.store_url or run_dir / "feedback.db",
        array_dir=run_dir / "segments",
        create=create,
    )


def inference_parts(
    config: TrainConfig,
    checkpoint: Checkpoint | None,
    *,
    env: EnvSpec | None = None,
    device: str | None = None,
) -> tuple[BaseAlgorithm, RewardEnsemble]:
    """The trained agent and reward model of a run, for inference: built from the run's config,
    their weights from ``checkpoint`` (untrained when it is None or the fresh start), on
    ``device`` (default: the config's). No store, no learned-reward env stack, no global side
    effects (torch's RNG is left as it was)."""
    dev = resolve_device(config.device if device is None else device)
    spec: EnvSpec = env if env is not None else config.env_id
    probe = make_vec_env(spec, 1, seed=config.seed)  # only for its spaces
    try:
        obs_space, act_space = probe.observation_space, probe.action_space
        hyper = agent_hyper(config)
        if not is_on_policy(config.algo):
            hyper["buffer_size"] = 1  # no replay buffer is needed to act
        with torch.random.fork_rng(devices=[]):
            agent = make_agent(
                config.algo,
                probe,
                seed=None,
                net_arch=list(config.net_arch),
                backend=config.backend,
                device=agent_device(config.backend, dev),
                **hyper,
            )
            model = to_device(make_reward_model(obs_space, act_space, config.reward), dev)
    finally:
        probe.close()
    if checkpoint is not None and not checkpoint.state.get("fresh", True):
        try:
            restore_policy(agent, checkpoint.tensors["agent"])
            model.load_state_dict(checkpoint.tensors["ensemble"])
        except (RuntimeError, ValueError, KeyError, TypeError) as exc:
            raise StoreError(
                f"the checkpoint does not fit this run's config (different environment, agent or "
                f"reward network?): {str(exc).splitlines()[0]}"
            ) from exc
    model.eval()
    return agent, model


# ----- the agent's hyperparameters (issue #26): presets per env family, hyperparams.json -----
def agent_hyper(config: TrainConfig) -> dict[str, Any]:
    """The SB3 constructor arguments of the run's agent: its env family's preset under
    ``--agent-kwargs``; a user's PPO batch_size that does not divide the rollout is refused."""
    user = config.agent_overrides()
    hyper = preset(
        config.algo, config.n_envs, config.steps_per_round, overrides=user, env_id=config.env_id
    )
    check_rollout(config.algo, hyper, user, config.n_envs)
    return hyper


def replay_hyper(config: TrainConfig, venv: VecEnv) -> dict[str, Any]:
    """The agent's replay-buffer arguments: QPA's hybrid replay with ``--replay.hybrid``
    (:mod:`preflab.policy.hybrid_replay`; its window is N × the env's episode limit), else
    none (SB3's own buffer)."""
    if not config.replay.hybrid:
        return {}
    from preflab.policy.hybrid_replay import hybrid_buffer_kwargs

    limit = episode_limit(venv.get_attr("spec")[0])
    if not limit:
        raise ConfigError(
            f"--replay.hybrid sizes its recent window as replay.recent_episodes × the episode "
            f"limit, and {config.env_id} has none; register the env with max_episode_steps (or "
            "wrap it in TimeLimit), or drop --replay.hybrid"
        )
    return hybrid_buffer_kwargs(
        config.replay, horizon=limit, n_envs=config.n_envs, seed=config.seed
    )


def record_run_hyperparams(
    config: TrainConfig, run_dir: str | Path, agent: BaseAlgorithm, env: EnvOrModel | None
) -> None:
    """:func:`record_hyperparams` of a run's agent built by :func:`assemble` (``env``: the one
    assemble was given; a user's SB3 model keeps its own arguments). The runs call it once the
    run really starts (its loop built, a resumed checkpoint restored), so a refused start or
    resume writes no ``hyperparams.json``."""
    given = {} if isinstance(env, BaseAlgorithm) else agent_hyper(config)
    record_hyperparams(config, Path(run_dir), agent, given)


def record_hyperparams(
    config: TrainConfig, run_dir: Path, agent: BaseAlgorithm, given: dict[str, Any]
) -> None:
    """Write the agent's effective hyperparameters to ``RUN_DIR/hyperparams.json`` and say in
    the terminal when SB3's collection blocks make the run longer than ``--total-steps``."""
    family = env_family(config.env_id)
    write_hyperparams(
        run_dir,
        {
            "algo": config.algo,
            "sb3_class": f"{type(agent).__module__}.{type(agent).__name__}",
            "env_id": config.env_id,
            "env_family": family,
            "preset_source": PRESET_SOURCES[family].replace("{algo}", config.algo),
            "agent_kwargs": dict(config.agent_overrides()),
            "hyperparams": effective_hyperparams(agent, given),
        },
    )
    n_steps = getattr(agent, "n_steps", None)
    freq = getattr(agent, "train_freq", None)
    actual = {"n_steps": n_steps} if is_on_policy(config.algo) else {}
    if freq is not None and not is_on_policy(config.algo):
        actual = {"train_freq": (freq.frequency, freq.unit.value)}
    note = budget_note(
        config.algo,
        actual,
        total_steps=config.total_steps,
        initial_steps=config.initial_steps,
        steps_per_round=config.steps_per_round,
        n_envs=config.n_envs,
    )
    if note:
        log.warning(note)


@contextlib.contextmanager
def _closed_on_failure(store: FeedbackStore) -> Iterator[None]:
    """Close ``store`` when the block fails (a run that does not start holds no open store)."""
    try:
        yield
    except BaseException:
        store.close()
        raise


def assemble(
    config: TrainConfig,
    run_dir: str | Path,
    *,
    env: EnvOrModel | None = None,
    source: FeedbackSource | None = None,
    selector: Selector | None = None,
    aggregator: Aggregator | None = None,
    bridge: StudioBridge | None = None,
    new_store: bool = True,
) -> RunParts:
    """Build a run's parts from ``config``; a user's own ``env`` (id, factory or SB3 model),
    ``source``, ``selector``, ``aggregator`` or studio ``bridge`` replaces the config's.
    ``new_store=False`` (a resume): the run's store must exist (:func:`open_store`).

    Sets torch's global state (:func:`set_torch_globals`). A studio bridge is made for a source
    whose judgements arrive through the store (people in the studio) unless one is given. Writes
    no file of its own beyond the store (and the trackers' logs): ``hyperparams.json`` is written
    by :func:`record_run_hyperparams` once the run starts; the store is closed again when
    building a later part fails.
    """
    c = config
    run_dir = Path(run_dir)
    if c.log_clip_every:
        headless_gl()  # the clips render MuJoCo; its GL backend is fixed when it first loads
    hyper = agent_hyper(c)  # refuses a bad rollout/batch combination before anything is made
    device = resolve_device(c.device)
    set_torch_globals(c)
    rng = make_rng(c.seed)
    tag = derive_seed(rng)
    store = open_store(c, run_dir, create=new_store)
    with _closed_on_failure(store):  # no open connection (nor SQLite -wal/-shm) left behind
        if source is None:
            source = make_source(c, store, np.random.default_rng(derive_seed(rng)))
        if bridge is None and source.persists:
            bridge = StudioBridge(store)

        model = env if isinstance(env, BaseAlgorithm) else None
        env_spec: EnvSpec = c.env_id if env is None or isinstance(env, BaseAlgorithm) else env
        env_spec = with_termination(env_spec, c.termination)  # opt-in; the same env when off
        base = make_vec_env(env_spec, c.n_envs, seed=c.seed)
        recorder = SegmentRecorder(
            base, c.segment_length, env_id=c.env_id, absorbing=c.termination.absorbing
        )
        ensemble = make_reward_model(  # MLP, or convolutional for image observations
            base.observation_space, base.action_space, c.reward, seed=derive_seed(rng)
        )
        ensemble = to_device(ensemble, device)
        routing = route_policy_reward(
            c.policy_reward,
            algo=c.algo,
            use_actions=c.reward.use_actions,
            relabel=c.relabel,
            absorbing=c.termination.absorbing,
        )
        reward = PolicyReward(
            c.policy_reward,
            model=ensemble,
            live=source if isinstance(source, LiveRating) else None,
            clock=lambda: recorder.steps,
        )
        defer = routing.on_policy and reward.deferrable
        venv = LearnedRewardVecEnv(recorder, reward, defer=defer)
        tail = AbsorbingTail(venv, reward, horizon=horizon_of(base)) if routing.absorbing else None
        agent_env = tail if tail is not None else venv
        if model is not None:
            model.set_env(agent_env)
            agent = model
        else:
            agent = make_agent(
                c.algo,
                agent_env,
                seed=c.seed,
                net_arch=list(c.net_arch),
                run_steps=c.total_steps - c.initial_steps,
                backend=c.backend,
                device=agent_device(c.backend, device),
                **hyper | replay_hyper(c, base),
            )
        trackers = make_trackers(c.log, run_dir, json.loads(c.to_json()))
        if "tensorboard" in c.log:  # the policy's own metrics beside PrefLab's
            agent.set_logger(policy_logger(run_dir))
        if tail is not None:
            # every SB3 algorithm that learns from rewards is on- or off-policy and has a gamma
            assert isinstance(agent, OnPolicyAlgorithm | OffPolicyAlgorithm)
            tail.gamma = float(agent.gamma)
        selector = selector or make_run_selector(c)
        warnings = RunWarnings()
        if isinstance(source, ReportsWarnings):  # e.g. the LLM judge's unreadable answers
            source.warnings = warnings
        if isinstance(source, WatchesRewardModel):  # routing: the model answers what it is sure of
            source.watch_model(lambda: reward.model if reward.fitted else None)
        return RunParts(
            store=store,
            source=source,
            selector=selector,
            aggregator=aggregator or make_run_aggregator(c),
            rng=rng,
            tag=tag,
            env_spec=env_spec,
            recorder=recorder,
            venv=venv,
            tail=tail,
            agent=agent,
            reward=reward,
            trainer=RewardTrainer(ensemble, c.fit),
            callback=RolloutRelabel(reward) if defer else None,
            clock=make_clock(c),
            hooks=find_hooks(source, selector),
            warnings=warnings,
            bridge=bridge,
            trackers=trackers,
        )
