import numpy as np
import pytest

from preflab.crowd import (
    CrowdConfig,
    User,
    answer_pairs,
    discounted_returns,
    error_rates,
    sample_users,
    truth_labels,
)
from preflab.errors import ConfigError, DataError


def test_users_drawn_in_the_paper_ranges_with_minority_last():
    users = sample_users(CrowdConfig(n_users=50, n_minority=20), np.random.default_rng(0))
    assert len(users) == 50 and len({u.id for u in users}) == 50
    assert all(
        0.1 <= u.beta <= 10 and 0.98 <= u.gamma <= 1 and 0 <= u.epsilon <= 0.2 for u in users
    )
    assert [u.group for u in users] == [0] * 30 + [1] * 20


def test_discounted_returns_by_hand():
    users = [User(id="a", beta=1, gamma=0.5, epsilon=0), User(id="b", beta=1, gamma=1.0, epsilon=0)]
    r = np.array([[1.0, 2.0, 4.0]])
    np.testing.assert_allclose(discounted_returns(users, r), [[0.25 * 1 + 0.5 * 2 + 4], [7.0]])


def test_rational_users_match_truth_and_epsilon_one_flips():
    rng = np.random.default_rng(1)
    ra, rb = rng.normal(size=(200, 5)), rng.normal(size=(200, 5))
    truth = truth_labels(ra, rb)
    perfect = [User(id="p", beta=1e6, gamma=1.0, epsilon=0.0)]
    contrary = [User(id="c", beta=1e6, gamma=1.0, epsilon=1.0)]
    np.testing.assert_array_equal(answer_pairs(perfect, ra, rb, rng)[0], truth)
    np.testing.assert_array_equal(answer_pairs(contrary, ra, rb, rng)[0], -truth)


def test_answer_probability_follows_the_model():
    rng = np.random.default_rng(2)
    n = 40_000
    ra, rb = np.full((n, 1), 1.0), np.zeros((n, 1))
    user = [User(id="u", beta=0.5, gamma=1.0, epsilon=0.1)]
    votes = answer_pairs(user, ra, rb, rng, return_scale=2.0)
    p_a = 1 / (1 + np.exp(-0.5 * 1.0 / 2.0))
    expected = p_a * 0.9 + (1 - p_a) * 0.1
    assert abs((votes == 1).mean() - expected) < 4 * np.sqrt(expected * (1 - expected) / n)


def test_groups_judge_by_their_own_reward():
    rng = np.random.default_rng(3)
    users = [
        User(id="m", beta=1e6, gamma=1, epsilon=0, group=0),
        User(id="n", beta=1e6, gamma=1, epsilon=0, group=1),
    ]
    ra = {0: np.ones((3, 2)), 1: np.zeros((3, 2))}
    rb = {0: np.zeros((3, 2)), 1: np.ones((3, 2))}
    votes = answer_pairs(users, ra, rb, rng)
    np.testing.assert_array_equal(votes, [[1, 1, 1], [-1, -1, -1]])
    with pytest.raises(DataError, match="group 1"):
        answer_pairs(users, {0: ra[0]}, {0: rb[0]}, rng)


def test_error_rates_ignore_missing_and_ties():
    votes = np.array([[1, -1, 0, 1], [1, 1, 1, 1]])
    truth = np.array([1, 1, 1, 0])
    np.testing.assert_allclose(error_rates(votes, truth), [0.5, 0.0])


def test_bad_configs():
    with pytest.raises(ConfigError):
        CrowdConfig(n_users=3, n_minority=4)
    with pytest.raises(ConfigError):
        CrowdConfig(answer_rate=0.0)
    with pytest.raises(ConfigError):
        CrowdConfig(gamma_range=(0.9, 1.1))
