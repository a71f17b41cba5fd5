import gymnasium as gym
import mo_gymnasium  # noqa: F401  (registers mo-hopper-v5)
import numpy as np
import pytest

from preflab.aggregate import Feedback, make_aggregator
from preflab.crowd import CrowdConfig, CrowdSource, User, hopper_forward, hopper_height
from preflab.errors import DataError
from preflab.kinds import PAIR
from preflab.records import Query
from preflab.sources import FeedbackSource
from preflab.testing.factories import make_segment


def test_crowd_source_answers_and_aggregates_to_truth():
    rng = np.random.default_rng(0)
    segs = {f"s{k}": make_segment(f"s{k}", true_rewards=np.full(4, float(k))) for k in range(10)}
    src = CrowdSource(CrowdConfig(n_users=9, beta_range=(50, 50), epsilon_range=(0, 0.1)), rng)
    assert isinstance(src, FeedbackSource)
    qs = [PAIR.query(f"s{i}", f"s{j}") for i, j in [(0, 1), (5, 2), (9, 3), (4, 8)]]
    src.submit(qs, segs)
    js = src.collect()
    assert len(js) == 9 * 4 and src.collect() == []
    assert all(j.source == "crowd" and j.p in (0.0, 1.0) for j in js)
    labels = make_aggregator("majority").labels(
        Feedback(queries={q.id: q for q in qs}, judgements=js)
    )
    assert [lab.p for lab in labels] == [0.0, 1.0, 1.0, 0.0]


def test_sparse_crowd_answers_a_share_of_queries():
    rng = np.random.default_rng(1)
    segs = {
        "a": make_segment("a", true_rewards=[1.0, 1.0]),
        "b": make_segment("b", true_rewards=[0.0, 0.0]),
    }
    src = CrowdSource(CrowdConfig(n_users=20, answer_rate=0.25), rng)
    qs = [PAIR.query("a", "b") for _ in range(200)]
    src.submit(qs, segs)
    share = len(src.collect()) / (20 * 200)
    assert 0.2 < share < 0.3


def test_minority_needs_its_reward_and_pairs_only():
    rng = np.random.default_rng(2)
    users = [User(id="m", beta=1, gamma=1, epsilon=0, group=1)]
    with pytest.raises(DataError, match="reward_fns"):
        CrowdSource(CrowdConfig(n_users=1), rng, users=users)
    src = CrowdSource(CrowdConfig(n_users=2), rng)
    with pytest.raises(DataError, match="pair"):
        src.submit([Query(id="g", kind="group", a=("a",), b=("b", "c"))], {})


def test_hopper_objectives_track_mo_hopper_reward_vector():
    env = gym.make("mo-hopper-v5")
    obs, _ = env.reset(seed=0)
    rng = np.random.default_rng(0)
    obs_list, vec = [], []
    for _ in range(60):
        obs, r, term, trunc, _ = env.step(rng.uniform(-1, 1, 3).astype(np.float32))
        obs_list.append(obs)  # state reached by the step: what mo-hopper's reward is about
        vec.append(r)
        if term or trunc:
            break
    env.close()
    o = np.array(obs_list)
    s = make_segment("h", obs=o, act_dim=3)
    vec = np.array(vec)
    # the last (terminal, unhealthy) step earns no survive bonus in mo-hopper; compare the others
    np.testing.assert_allclose(hopper_height(s)[:-1], vec[:-1, 1], atol=1e-4)
    assert np.corrcoef(hopper_forward(s)[:-1], vec[:-1, 0])[0, 1] > 0.9
    with pytest.raises(DataError):
        hopper_height(make_segment("x", true_rewards=[0.0]))


def test_saved_crowd_state_lists_its_users_as_annotators():
    from preflab.crowd.source import annotators_from_state

    src = CrowdSource(
        CrowdConfig(n_users=3, n_minority=1),
        np.random.default_rng(1),
        reward_fns={1: lambda s: -s.true_rewards},
    )
    got = annotators_from_state(src.state())
    assert [a.id for a in got] == [u.id for u in src.users] == [a.id for a in src.annotators()]
    assert all(a.source == "crowd" and a.meta["simulated"] for a in got)
    assert [(a.meta["beta"], a.meta["epsilon"], a.meta["group"]) for a in got] == [
        (u.beta, u.epsilon, u.group) for u in src.users
    ]
    assert annotators_from_state({"rng": {}}) == []  # another source's state: no users
    with pytest.raises(DataError, match="malformed users"):
        annotators_from_state({"users": [{"id": "u", "bogus": 1}]})
