"""QPA's policy-aligned queries: both segments of a query come from the N most recent episodes."""

from __future__ import annotations

import numpy as np
import pytest

from preflab.assemble import SELECTORS, make_run_selector, make_selector
from preflab.config import TrainConfig
from preflab.errors import ConfigError, DataError
from preflab.selection.policy_aligned import (
    QPA_EPISODES,
    PolicyAlignedSelector,
    recent_episode_segments,
)
from preflab.selection.selectors import DisagreementSelector
from preflab.testing.factories import make_segments


def _pool(episodes: list[int]) -> list:
    """Segments ``s0 … s{n-1}``, oldest first, segment i cut from episode ``episodes[i]``."""
    return make_segments(
        len(episodes), rng=np.random.default_rng(0), id_prefix="s", episode=episodes
    )


def test_queries_never_leave_the_window_and_cover_it() -> None:
    # 15 episodes of 3 segments each, oldest first: the 10 newest are episodes 5 … 14
    pool = _pool([e for e in range(15) for _ in range(3)])
    by_id = {s.id: s for s in pool}
    qs = PolicyAlignedSelector(episodes=10).select(pool, None, 400, np.random.default_rng(1))
    assert len(qs) == 400
    drawn = {sid for q in qs for sid in (*q.a, *q.b)}
    assert {by_id[sid].episode for sid in drawn} == set(range(5, 15))  # none older, all inside
    assert drawn == {s.id for s in pool if s.episode >= 5}  # every window segment is drawn
    assert all(q.meta["selector"] == "policy-aligned-random" for q in qs)


def test_recency_is_that_of_an_episodes_newest_segment() -> None:
    # two envs side by side: episodes 0 and 1_000_000 interleave; episode 2 ended long ago
    pool = _pool([2, 2, 0, 1_000_000, 0, 1_000_000, 0])
    got = recent_episode_segments(pool, 2)
    assert [s.id for s in got] == ["s2", "s3", "s4", "s5", "s6"]
    assert [s.id for s in recent_episode_segments(pool, 1)] == ["s2", "s4", "s6"]
    assert len(recent_episode_segments(pool, 3)) == 7


def test_the_window_grows_until_it_holds_a_pair() -> None:
    # the newest episode has one segment: a pair needs the one before it too
    pool = _pool([0, 0, 1, 1, 2])
    assert [s.id for s in recent_episode_segments(pool, 1)] == ["s2", "s3", "s4"]


def test_segments_without_an_episode_are_refused() -> None:
    pool = make_segments(4, rng=np.random.default_rng(0), id_prefix="s")  # episode = -1
    with pytest.raises(DataError, match="episode index"):
        PolicyAlignedSelector().select(pool, None, 2, np.random.default_rng(0))


def test_another_selector_can_pick_inside_the_window() -> None:
    pool = _pool([e for e in range(6) for _ in range(2)])
    sel = PolicyAlignedSelector(episodes=2, within=DisagreementSelector(score="entropy"))
    qs = sel.select(pool, None, 10, np.random.default_rng(0))  # untrained: random inside
    assert {sid for q in qs for sid in (*q.a, *q.b)} <= {"s8", "s9", "s10", "s11"}


def test_config_and_names_take_the_papers_values() -> None:
    assert QPA_EPISODES == 10  # QPA's N on DeepMind Control (run_QPA.sh: max_reward_buffer_size)
    assert TrainConfig().aligned_episodes == 10
    assert PolicyAlignedSelector().episodes == 10
    assert "policy-aligned" in SELECTORS
    sel = make_run_selector(TrainConfig(selector="policy-aligned", aligned_episodes=3))
    assert isinstance(sel, PolicyAlignedSelector) and sel.episodes == 3
    assert make_selector("policy-aligned") == PolicyAlignedSelector()
    with pytest.raises(ConfigError, match="aligned_episodes"):
        TrainConfig(aligned_episodes=0)
    with pytest.raises(ConfigError, match="1 episode"):
        PolicyAlignedSelector(episodes=0)
