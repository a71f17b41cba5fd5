"""A :class:`RoutingSource` from a run's config (``--source route`` and ``--route.*``)."""

from __future__ import annotations

import dataclasses
from typing import TYPE_CHECKING

import numpy as np

from preflab.seeding import derive_seed
from preflab.sources.base import FeedbackSource
from preflab.sources.routing.router import RoutingSource
from preflab.store import FeedbackStore

if TYPE_CHECKING:
    from preflab.config import TrainConfig


def make_ai(config: TrainConfig, store: FeedbackStore, rng: np.random.Generator) -> FeedbackSource:
    """The AI judge ``config.route.ai`` names."""
    r = config.route
    if r.ai == "simulated":
        from preflab.sources.simulated_judge import SimulatedJudge

        return SimulatedJudge(r.judge, rng)
    from preflab.vlm.build import make_vlm_judge

    options = config.vlm if r.ai == "vlm" else dataclasses.replace(config.vlm, view="states")
    return make_vlm_judge(options, task=config.task, cache=store.llm_cache)


def make_people(
    config: TrainConfig, store: FeedbackStore, rng: np.random.Generator
) -> FeedbackSource:
    """People as ``config.route.people`` names them."""
    r = config.route
    if r.people == "store":
        from preflab.sources.human import StoreSource

        return StoreSource(store)
    if r.people == "crowd":
        from preflab.crowd.source import CrowdSource

        return CrowdSource(config.crowd, rng)
    from preflab.sources.teacher import SyntheticTeacher, load_score

    score = load_score(config.teacher.score) if config.teacher.score else None
    return SyntheticTeacher(config.teacher, rng, annotator_id="oracle", reward_fn=score)


def make_routing_source(
    config: TrainConfig, store: FeedbackStore, rng: np.random.Generator
) -> RoutingSource:
    """The router with its AI judge and people; each draws from a generator of its own, seeded
    from ``rng`` in a fixed order (router, AI, people)."""
    mine = np.random.default_rng(derive_seed(rng))
    ai = make_ai(config, store, np.random.default_rng(derive_seed(rng)))
    people = make_people(config, store, np.random.default_rng(derive_seed(rng)))
    return RoutingSource(config.route, mine, ai=ai, people=people, store=store)
