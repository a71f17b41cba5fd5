import numpy as np
import pytest
import scipy.sparse as sp

from preflab.aggregate import as_votes, majority, votes_from_probabilities
from preflab.errors import DataError


def brute_force_majority(votes: np.ndarray) -> np.ndarray:
    out = []
    for k in range(votes.shape[1]):
        plus = sum(1 for i in range(votes.shape[0]) if votes[i, k] == 1)
        minus = sum(1 for i in range(votes.shape[0]) if votes[i, k] == -1)
        out.append(1 if plus > minus else -1 if minus > plus else 0)
    return np.array(out)


def test_majority_matches_brute_force_on_random_votes_with_missing():
    rng = np.random.default_rng(0)
    for _ in range(20):
        votes = rng.choice([-1, 0, 1], size=(rng.integers(1, 12), rng.integers(1, 40)))
        np.testing.assert_array_equal(majority(votes), brute_force_majority(votes))
        np.testing.assert_array_equal(majority(sp.csr_matrix(votes)), brute_force_majority(votes))


def test_majority_ties_and_unanswered_give_zero():
    votes = np.array([[1, 0, 1], [-1, 0, 1], [0, 0, -1]])
    np.testing.assert_array_equal(majority(votes), [0, 0, 1])


@pytest.mark.parametrize(
    "bad",
    [
        np.array([[1, 2], [0, 1]]),
        np.array([[1, np.nan], [0, 1]]),
        np.array([1, -1, 0]),
        np.zeros((0, 3)),
    ],
)
def test_bad_votes_raise_data_error(bad):
    with pytest.raises(DataError):
        majority(bad)


def test_as_votes_requires_answers_when_asked():
    with pytest.raises(DataError, match="answered no query"):
        as_votes(np.array([[1, -1], [0, 0], [1, 1]]), require_answers=True)


def test_votes_from_probabilities():
    p = np.array([1.0, 0.0, 0.5, np.nan, 0.7, 0.2])
    np.testing.assert_array_equal(votes_from_probabilities(p), [1, -1, 0, 0, 1, -1])
