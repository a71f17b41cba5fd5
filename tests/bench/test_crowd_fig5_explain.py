"""The Fig. 5 explanation's error split, on cases derived by hand."""

from __future__ import annotations

import numpy as np

from preflab.crowd import User
from preflab_bench.crowd_fig5_explain import expected_votes, floor_error, order_flips


def _pair() -> tuple[np.ndarray, np.ndarray]:
    # a: 10 early, nothing late (undiscounted 10); b: 1 at each of the last 3 steps (3).
    # At γ = 0.9 over H = 30: a's weight 0.9^29 ≈ 0.047 → 0.47 < b's 1 + 0.9 + 0.81 = 2.71.
    a = np.zeros((1, 30))
    a[0, 0] = 10.0
    b = np.zeros((1, 30))
    b[0, -3:] = 1.0
    return a, b


def test_myopic_users_lean_the_wrong_way_together_and_gamma_one_users_do_not() -> None:
    a, b = _pair()
    truth = np.array([1])  # a has the higher undiscounted return
    myopic = [User(id=f"u{i}", beta=5.0, gamma=0.9, epsilon=0.1) for i in range(5)]
    far = [User(id=f"v{i}", beta=5.0, gamma=1.0, epsilon=0.1) for i in range(5)]
    assert floor_error(myopic, a, b, truth, return_scale=1.0) == 1.0
    assert floor_error(far, a, b, truth, return_scale=1.0) == 0.0
    assert order_flips(a, b, 0.9) == 1.0
    assert order_flips(a, b, 1.0) == 0.0


def test_expected_vote_is_the_flipped_logistic() -> None:
    a, b = _pair()
    u = User(id="u", beta=0.5, gamma=1.0, epsilon=0.2)
    # Δ = 10 − 3 = 7; P(a) = σ(3.5); E[vote] = (1 − 0.4)(2σ(3.5) − 1)
    p = 1.0 / (1.0 + np.exp(-3.5))
    assert np.isclose(expected_votes([u], a, b)[0, 0], 0.6 * (2 * p - 1))
