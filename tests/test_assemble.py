"""The composition root: which parts a config makes, and that a user's own parts replace them."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest
import torch

from preflab.aggregate import IdentityAggregator, SMLAggregator
from preflab.aggregate.capped import CappedLabels, SampledWindows
from preflab.aggregate.combined import CombinedAggregator
from preflab.assemble import (
    assemble,
    find_hooks,
    make_routing_source,
    make_run_aggregator,
    make_selector,
    make_source,
)
from preflab.config import TrainConfig
from preflab.errors import ConfigError
from preflab.policy.shaping import PolicyRewardConfig
from preflab.selection.selectors import DisagreementSelector, RandomSelector
from preflab.sources.routing.router import RoutingSource
from preflab.sources.studio_bridge import StudioBridge
from preflab.sources.teacher import SyntheticTeacher, bpref_teacher
from preflab.store import FeedbackStore


def test_selectors_by_name() -> None:
    assert isinstance(make_selector("random"), RandomSelector)
    ent = make_selector("entropy", oversample=7)
    assert isinstance(ent, DisagreementSelector) and ent.score == "entropy"
    assert ent.oversample == 7
    with pytest.raises(ConfigError, match="'random', 'disagreement', 'entropy', 'groupwise'"):
        make_selector("best")


@pytest.mark.parametrize(
    ("source", "aggregator", "kind"),
    [
        ("teacher", "auto", IdentityAggregator),
        ("crowd", "auto", SMLAggregator),
        ("store", "auto", CombinedAggregator),  # judgements and ratings of episodes
        ("scalar", "auto", SampledWindows),
        ("scalar", "voting", CappedLabels),
    ],
)
def test_the_aggregator_follows_the_source(source: str, aggregator: str, kind: type) -> None:
    live = PolicyRewardConfig(live_steps=100) if source == "scalar" else PolicyRewardConfig()
    cfg = TrainConfig.smoke(source=source, aggregator=aggregator, policy_reward=live)
    assert isinstance(make_run_aggregator(cfg), kind)


def test_parts_of_a_teacher_run_and_their_wiring(tmp_path: Path) -> None:
    threads = torch.get_num_threads()
    try:
        parts = assemble(TrainConfig.smoke(torch_threads=2), tmp_path)
        assert torch.get_num_threads() == 2  # the one place that sets torch's global state
    finally:
        torch.set_num_threads(threads)
    assert isinstance(parts.source, SyntheticTeacher)
    assert parts.bridge is None  # nobody answers in the studio
    assert not parts.reward.fitted and parts.reward.model is parts.trainer.ensemble
    assert parts.venv.venv is parts.recorder and parts.agent.get_env() is not None
    assert parts.venv.defer and parts.callback is not None  # PPO relabels whole rollouts
    parts.venv.close()
    parts.store.close()


def test_people_get_a_studio_bridge_and_off_policy_learners_no_deferral(tmp_path: Path) -> None:
    parts = assemble(TrainConfig.smoke(source="store", algo="sac"), tmp_path)
    assert isinstance(parts.bridge, StudioBridge)
    assert not parts.venv.defer and parts.callback is None
    parts.venv.close()
    parts.store.close()


def test_a_users_own_parts_replace_the_configs(tmp_path: Path) -> None:
    mine = RandomSelector()
    agg = IdentityAggregator()
    parts = assemble(
        TrainConfig.smoke(selector="disagreement"), tmp_path, selector=mine, aggregator=agg
    )
    assert parts.selector is mine and parts.aggregator is agg
    parts.venv.close()
    parts.store.close()


def test_a_part_that_cannot_be_built_leaves_no_store_open(tmp_path: Path) -> None:
    """The store is opened first; when a later part fails (here the teacher's score function),
    assemble closes it again: no SQLite -wal/-shm files are left beside feedback.db."""
    from preflab.sources.teacher import TeacherConfig

    config = TrainConfig.smoke(teacher=TeacherConfig(score="no_such_module_here:score"))
    with pytest.raises(ConfigError, match="no_such_module_here"):
        assemble(config, tmp_path)
    assert sorted(p.name for p in tmp_path.iterdir()) == ["feedback.db", "segments"]


@pytest.mark.parametrize("source", ["teacher", "route"])
def test_the_loop_sets_the_margin_of_bprefs_teacher_alone_or_routed(
    tmp_path: Path, source: str
) -> None:
    """B-Pref's equal teacher gets the loop's margin hook as the run's source and as the
    router's people (``--route.people oracle``); the plain oracle, which has no relative rule,
    gets none either way."""
    store = FeedbackStore(tmp_path / "feedback.db")
    try:
        for name, hooked in (("bpref-equal", True), ("bpref-oracle", False)):
            config = TrainConfig.smoke(source=source, teacher=bpref_teacher(name))
            built = make_routing_source if source == "route" else make_source
            made = built(config, store, np.random.default_rng(0))
            teacher = made.people if isinstance(made, RoutingSource) else made
            assert isinstance(teacher, SyntheticTeacher)
            hook = find_hooks(made, RandomSelector()).margin_teacher
            assert hook is (teacher if hooked else None)
    finally:
        store.close()
