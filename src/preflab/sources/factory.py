"""The feedback source and aggregator a run's config names (``--source``, ``--aggregator``)."""

from __future__ import annotations

import numpy as np

from preflab.aggregate import Aggregator, make_aggregator
from preflab.config import TrainConfig
from preflab.selection import Selector, make_selector
from preflab.sources.base import FeedbackSource
from preflab.store import FeedbackStore

_AUTO = {
    "teacher": "identity",
    "store": "identity",
    "crowd": "sml",
    "llm": "confidence",
    "scalar": "window",
}


def make_source(
    config: TrainConfig, store: FeedbackStore, rng: np.random.Generator
) -> FeedbackSource:
    """The source ``config.source`` names, with its options from the config."""
    if config.source == "teacher":
        from preflab.teacher import SyntheticTeacher

        return SyntheticTeacher(config.teacher, rng)
    if config.source == "crowd":
        from preflab.crowd.source import CrowdSource

        return CrowdSource(config.crowd, rng)
    if config.source == "llm":
        from preflab.llm import ChatClient, ClientConfig, LLMJudge, PromptTemplate

        o = config.llm
        client = ChatClient(
            ClientConfig(
                base_url=o.base_url,
                model=o.model,
                api_key_env=o.api_key_env,
                temperature=o.temperature,
                concurrency=o.concurrency,
                timeout_s=o.timeout_s,
            ),
            cache=store,
        )
        template = PromptTemplate.load(o.template or config.env_id)
        return LLMJudge(client, config.env_id, template=template, n_queries=o.n_queries)
    if config.source == "scalar":
        from preflab.scalar.evaluators import population
        from preflab.scalar.source import SimulatedRaters

        o = config.scalar
        return SimulatedRaters(
            population(o.population, o.n_evaluators, rng),
            config.n_envs,
            rng,
            scale=o.quality_scale,
        )
    from preflab.sources.human import StoreSource

    return StoreSource(store)


def make_run_selector(config: TrainConfig) -> Selector:
    """The selector ``config.selector`` names; rating streams need none (nothing is asked)."""
    if config.source == "scalar":
        from preflab.scalar.source import NoQueries

        return NoQueries()
    kw = {} if config.selector == "random" else {"oversample": config.oversample}
    return make_selector(config.selector, **kw)


def make_run_aggregator(config: TrainConfig) -> Aggregator:
    """The aggregator ``config.aggregator`` names ('auto' picks the source's natural one)."""
    name = _AUTO[config.source] if config.aggregator == "auto" else config.aggregator
    o = config.scalar
    if name == "window":
        from preflab.scalar.guide import SampledWindows

        return SampledWindows(
            window=o.window, delta=o.delta, max_labels=o.max_labels, seed=config.seed
        )
    if name == "voting":
        from preflab.scalar.guide import CappedLabels

        voting = make_aggregator("voting", window=o.window, delta=o.delta, seed=config.seed)
        return CappedLabels(inner=voting, max_labels=o.max_labels, seed=config.seed)
    return make_aggregator(name)
