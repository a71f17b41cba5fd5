import numpy as np
import pytest

from preflab.aggregate import aggregate_groups, find_viewpoints, sml
from preflab.errors import ConfigError, DataError


def test_two_separated_clusters_are_found():
    rng = np.random.default_rng(0)
    w = np.concatenate([rng.normal(0.12, 0.01, 30), rng.normal(-0.05, 0.01, 10)])
    vp = find_viewpoints(w, max_groups=4)
    assert vp.n_groups == 2
    np.testing.assert_array_equal(vp.assignment, [0] * 30 + [1] * 10)
    assert vp.bic.shape == (4,) and np.argmin(vp.bic) == 1


def test_one_cluster_is_one_group():
    rng = np.random.default_rng(1)
    vp = find_viewpoints(rng.normal(0.2, 0.02, 60))
    assert vp.n_groups == 1 and (vp.assignment == 0).all()


def test_minority_crowd_separates_and_groups_aggregate_their_own_truth():
    rng = np.random.default_rng(2)
    n_q = 300
    y_major = rng.choice([-1, 1], n_q)
    y_minor = np.where(rng.random(n_q) < 0.2, y_major, -y_major)  # mostly opposite reward
    acc = rng.uniform(0.75, 0.9, 40)
    truth = np.vstack([np.tile(y_major, (28, 1)), np.tile(y_minor, (12, 1))])
    votes = np.where(rng.random((40, n_q)) < acc[:, None], truth, -truth)
    res = sml(votes)
    vp = find_viewpoints(res.weights)
    assert vp.n_groups == 2
    np.testing.assert_array_equal(vp.assignment, [0] * 28 + [1] * 12)
    labels = aggregate_groups(votes, vp)
    assert (labels[0] != y_major).mean() < 0.02
    assert (labels[1] != y_minor).mean() < 0.05


def test_bad_weights():
    with pytest.raises(DataError):
        find_viewpoints(np.array([0.1, np.nan]))
    with pytest.raises(ConfigError):
        find_viewpoints(np.array([0.1, 0.2]), max_groups=0)


def test_tiny_components_are_not_chosen():
    w = np.array([0.45, 0.41, 0.40, 0.40, 0.39, 0.38, 0.12, 0.03, 0.02, -0.02])
    vp = find_viewpoints(w, max_groups=4)
    assert np.bincount(vp.assignment).min() >= 3
    assert vp.n_groups <= 2


def test_a_group_whose_answers_do_not_covary_takes_the_majority():
    """Four people who always answer left (+1) on every query: their answers never covary, so
    SML has nothing to weigh (a DataError) and the group takes its majority, +1 everywhere."""
    from preflab.aggregate.viewpoints import Viewpoints

    votes = np.ones((4, 6))
    vp = Viewpoints(
        n_groups=1, assignment=np.zeros(4, np.int64), means=np.zeros(1), bic=np.zeros(1)
    )
    with pytest.raises(DataError):
        sml(votes)
    (labels,) = aggregate_groups(votes, vp)
    np.testing.assert_array_equal(labels, np.ones(6))
