"""The shared record builders: documented defaults, draw order and refusals."""

import numpy as np
import pytest

from preflab.errors import DataError
from preflab.records import Segment
from preflab.testing.factories import (
    DEFAULT_LENGTH,
    make_judgement,
    make_query,
    make_segment,
    make_segments,
    random_segment,
)


def test_make_segment_fills_zeros_and_takes_the_length_from_the_arrays() -> None:
    s = make_segment()
    assert (s.length, s.obs.shape, s.acts.shape) == (DEFAULT_LENGTH, (DEFAULT_LENGTH, 3), (4, 1))
    assert not s.obs.any() and not s.acts.any() and s.true_return == 0.0
    assert s.id == Segment.content_id(s.obs, s.acts)
    r = make_segment("r", true_rewards=[1.0, 2.0], obs_dim=2, act_dim=3)
    assert (r.id, r.obs.shape, r.acts.shape, r.true_return) == ("r", (2, 2), (2, 3), 3.0)
    a = make_segment(acts=np.ones((6, 2)))
    assert a.obs.shape == (6, 3) and a.id != make_segment(length=6, act_dim=2).id


def test_random_segment_draws_obs_then_acts_then_rewards() -> None:
    rng = np.random.default_rng(4)
    obs, acts, rew = rng.normal(size=(3, 2)), rng.normal(size=(3, 1)), rng.normal(size=3)
    s = random_segment(np.random.default_rng(4), length=3)
    np.testing.assert_array_equal(s.obs, obs.astype(np.float32))
    np.testing.assert_array_equal(s.acts, acts.astype(np.float32))
    np.testing.assert_array_equal(s.true_rewards, rew.astype(np.float32))
    # without action draws the rewards are the next draws after the observations
    rng = np.random.default_rng(4)
    obs, rew = rng.normal(size=(3, 2)), rng.normal(size=3)
    t = random_segment(np.random.default_rng(4), length=3, random_acts=False)
    assert not t.acts.any()
    np.testing.assert_array_equal(t.true_rewards, rew.astype(np.float32))


def test_make_segments_numbers_ids_episodes_and_rounds() -> None:
    segs = make_segments(3, rng=np.random.default_rng(0), id_prefix="s", episode=range(3))
    assert [s.id for s in segs] == ["s0", "s1", "s2"] and [s.episode for s in segs] == [0, 1, 2]
    again = make_segments(3, rng=np.random.default_rng(0), round=[2, 0, 1])
    assert [s.round for s in again] == [2, 0, 1] and {s.episode for s in again} == {-1}
    assert [s.id for s in again] == [Segment.content_id(s.obs, s.acts) for s in segs]
    with pytest.raises(DataError, match="2 values for 3 segments"):
        make_segments(3, rng=np.random.default_rng(0), episode=[0, 1])


def test_make_query_and_judgement() -> None:
    assert (make_query("q").kind, make_query("q").a, make_query("q").b) == ("pair", ("a",), ("b",))
    g = make_query("g", ["a", "c"], "b")
    assert (g.kind, g.a, g.b) == ("group", ("a", "c"), ("b",))
    r = make_query("r", ["x", "y"], (), kind="rating")
    assert (r.kind, r.b) == ("rating", ())
    j = make_judgement("j", "q", "u", 0.5, meta={"sample": 1})
    assert (j.source, j.created_at, j.p, dict(j.meta)) == ("human", 0.0, 0.5, {"sample": 1})
    with pytest.raises(DataError):
        make_judgement("j", "q", "u", 2.0)
