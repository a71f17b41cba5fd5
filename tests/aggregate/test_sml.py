import numpy as np
import pytest
import scipy.sparse as sp
from scipy import optimize, stats

from preflab.aggregate import majority, sml
from preflab.errors import ConfigError, DataError


def simulated_crowd(rng, n_ann, n_q, acc, answer_rate=1.0):
    y = rng.choice([-1, 1], size=n_q)
    correct = rng.random((n_ann, n_q)) < acc[:, None]
    votes = np.where(correct, y, -y)
    votes[rng.random((n_ann, n_q)) >= answer_rate] = 0
    return votes, y


def independent_rank_one(votes):
    """Parisi's SML by another route: np.cov, then least squares on the off-diagonal entries."""
    c = np.cov(votes.astype(float), bias=True)
    m = c.shape[0]
    iu = np.triu_indices(m, k=1)

    def resid(r):
        return (np.outer(r, r) - c)[iu]

    r0 = np.sqrt(np.clip(np.abs(np.diag(c)), 1e-3, None)) * 0.5
    r = optimize.least_squares(resid, r0, xtol=1e-14, ftol=1e-14, gtol=1e-14).x
    if (r < 0).sum() > (r > 0).sum():
        r = -r
    return r / np.linalg.norm(r), r


def test_sml_matches_independent_rank_one_derivation_on_dense_crowd():
    rng = np.random.default_rng(1)
    acc = rng.uniform(0.55, 0.9, size=9)
    votes, _ = simulated_crowd(rng, 9, 600, acc)
    res = sml(votes, diagonal="fit")
    v_ref, r_ref = independent_rank_one(votes)
    np.testing.assert_allclose(res.weights, v_ref, atol=1e-5)
    np.testing.assert_allclose(res.eigenvalue, r_ref @ r_ref, rtol=1e-5)
    np.testing.assert_array_equal(res.labels, np.sign(votes.T @ v_ref))


def test_empirical_diagonal_is_lead_eigenvector_of_covariance():
    rng = np.random.default_rng(2)
    votes, _ = simulated_crowd(rng, 7, 400, rng.uniform(0.6, 0.9, size=7))
    res = sml(votes, diagonal="empirical")
    _, vecs = np.linalg.eigh(np.cov(votes.astype(float), bias=True))
    v = vecs[:, -1] * (1 if (vecs[:, -1] > 0).sum() >= 4 else -1)
    np.testing.assert_allclose(res.weights, v, atol=1e-8)


def test_auto_follows_paper_003_on_dense_crowds_and_fits_sparse_ones():
    """Paper 003 defines v̂ as the lead eigenvector of the empirical covariance; 'auto' uses it
    when every annotator answered every query, the rank-one fit otherwise."""
    rng = np.random.default_rng(7)
    acc = rng.uniform(0.55, 0.9, size=8)
    votes, _ = simulated_crowd(rng, 8, 500, acc)
    auto = sml(votes, diagonal="auto").weights
    np.testing.assert_array_equal(auto, sml(votes, diagonal="empirical").weights)
    gappy = votes.copy()
    gappy[0, :50] = 0
    np.testing.assert_array_equal(
        sml(gappy, diagonal="auto").weights, sml(gappy, diagonal="fit").weights
    )
    # the library's default is the rank-one fit, dense or not (crowd_fig2's comparison)
    np.testing.assert_array_equal(sml(votes).weights, sml(votes, diagonal="fit").weights)
    assert not np.array_equal(sml(votes).weights, auto)
    with pytest.raises(ConfigError, match="auto"):
        sml(votes, diagonal="mean")


@pytest.mark.parametrize(("diagonal", "atol"), [("fit", 0.05), ("empirical", 0.06)])
def test_sml_ranks_annotators_and_beats_majority_with_spread_of_accuracies(diagonal, atol):
    """Both estimators rank annotators and beat the majority; the empirical diagonal (paper
    003's v̂) biases the accuracy estimates a little more (the diagonal is not rank one)."""
    rng = np.random.default_rng(3)
    acc = np.concatenate([rng.uniform(0.85, 0.95, 3), rng.uniform(0.52, 0.62, 12)])
    votes, y = simulated_crowd(rng, 15, 2000, acc)
    res = sml(votes, diagonal=diagonal)
    assert stats.spearmanr(res.weights, acc).statistic > 0.8
    assert (res.labels != y).mean() < (majority(votes) != y).mean()
    assert np.all(res.weights[:3] > np.max(res.weights[3:]))
    np.testing.assert_allclose(res.accuracy, acc, atol=atol)


def test_sml_with_missing_answers_sparse_input():
    rng = np.random.default_rng(4)
    acc = np.concatenate([rng.uniform(0.85, 0.95, 10), rng.uniform(0.5, 0.65, 30)])
    votes, y = simulated_crowd(rng, 40, 3000, acc, answer_rate=0.3)
    dense = sml(votes)
    sparse = sml(sp.csr_matrix(votes))
    np.testing.assert_allclose(dense.weights, sparse.weights, atol=1e-10)
    assert stats.spearmanr(sparse.weights, acc).statistic > 0.7
    np.testing.assert_allclose(sparse.accuracy, acc, atol=0.06)
    assert (sparse.labels != y).mean() < (majority(votes) != y).mean()
    assert not sparse.isolated.any()


def test_weights_oriented_so_most_entries_are_positive():
    rng = np.random.default_rng(5)
    votes, _ = simulated_crowd(rng, 5, 500, np.array([0.8, 0.8, 0.8, 0.3, 0.3]))
    res = sml(votes)
    assert (res.weights > 0).sum() == 3
    assert (res.weights[3:] < 0).all()


def test_isolated_annotator_gets_zero_weight():
    rng = np.random.default_rng(6)
    votes, _ = simulated_crowd(rng, 5, 200, np.full(5, 0.8))
    votes = np.concatenate([votes, np.zeros((1, 200), int)], axis=1) if False else votes
    votes = np.hstack([votes, np.zeros((5, 3), int)])
    extra = np.zeros((1, votes.shape[1]), int)
    extra[0, -3:] = 1  # answers only queries nobody else answered
    res = sml(np.vstack([votes, extra]))
    assert res.isolated.tolist() == [False] * 5 + [True]
    assert res.weights[-1] == 0 and np.isnan(res.accuracy[-1])


def test_sml_needs_three_annotators_and_answers():
    with pytest.raises(DataError, match="at least 3 annotators"):
        sml(np.array([[1, -1, 1], [1, 1, -1]]))
    with pytest.raises(DataError, match="answered no query"):
        sml(np.array([[1, -1, 1], [0, 0, 0], [1, 1, -1]]))
    with pytest.raises(DataError):
        sml(np.array([[1, -1, 0.5], [1, 1, 1], [1, 1, -1]]))
    with pytest.raises(DataError, match="share"):
        sml(np.array([[1, 0, 0], [0, 1, 0], [0, 0, 1]]))


@pytest.mark.parametrize("n_ann", [5, 65, 120])
@pytest.mark.parametrize("diagonal", ["fit", "empirical"])
def test_no_covariance_between_annotators_is_a_data_error(n_ann, diagonal):
    """Annotators who share queries but always answer the same side (the centred answers, so
    every covariance, are 0) leave SML nothing to weight them by: a DataError (which callers
    handle by falling back to majority), not ARPACK's "Starting vector is zero" (more than 64
    annotators) nor a weight vector on one arbitrary annotator (fewer)."""
    votes = np.zeros((n_ann, 2 * n_ann))
    for i in range(n_ann):  # i and i + 1 share queries 2i and 2i + 1, everyone answers +1
        votes[i, [2 * i, 2 * i + 1]] = 1
        votes[(i + 1) % n_ann, [2 * i, 2 * i + 1]] = 1
    with pytest.raises(DataError, match="do not covary"):
        sml(votes, diagonal=diagonal)
    # one annotator who answers both sides gives a covariance again
    votes[0, 0] = -1
    votes[0, 2 * n_ann - 2] = -1
    votes[1, 0] = -1
    res = sml(votes, diagonal=diagonal)
    assert np.isfinite(res.weights).all()
