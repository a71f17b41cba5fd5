from math import comb

import numpy as np
import pytest

from preflab.errors import ConfigError, DataError
from preflab.kinds.rating_streams import stream_values
from preflab.kinds.rating_windows import (
    DEFAULT_DELTA,
    binary_majority,
    vote_labels,
    window_labels,
    window_pairs,
)
from preflab.records import Rating


def algorithm_1_by_hand(f, n, delta):
    out = []
    for i in range(len(f) - n + 1):
        w = list(range(i, i + n))
        for x in range(n):
            for y in range(x + 1, n):
                a, b = w[x], w[y]
                lab = 0.5 if abs(f[a] - f[b]) < delta else (1.0 if f[a] > f[b] else 0.0)
                out.append((a, b, lab))
    return out


def test_default_delta_is_five_percent_of_the_range():
    assert pytest.approx(0.1) == DEFAULT_DELTA


def test_hand_computed_stream_window_3():
    f = [0.0, 0.5, 0.55, -0.2]
    res = window_labels(f, window=3)
    # windows (0,1,2) and (1,2,3): (N − n + 1)·C(n, 2) = 2·3 = 6 pairs, in loop order
    assert res.pairs.tolist() == [[0, 1], [0, 2], [1, 2], [1, 2], [1, 3], [2, 3]]
    assert res.p.tolist() == [0.0, 0.0, 0.5, 0.5, 1.0, 1.0]


@pytest.mark.parametrize(("n_items", "window"), [(25, 10), (10, 10), (7, 2), (40, 5)])
def test_counts_and_labels_match_algorithm_1(n_items, window):
    rng = np.random.default_rng(n_items)
    f = np.round(rng.uniform(-1, 1, n_items), 2)
    res = window_labels(f, window=window, delta=0.15)
    assert len(res) == (n_items - window + 1) * comb(window, 2)
    ref = algorithm_1_by_hand(f, window, 0.15)
    assert [(int(a), int(b), float(p)) for (a, b), p in zip(res.pairs, res.p, strict=True)] == ref


def test_margin_is_strict_less_than_delta():
    res = window_labels([0.0, 0.1, 0.25], window=3, delta=0.1)
    # |0 − 0.1| = 0.1 is not < δ → strict preference; |0.1 − 0.25| = 0.15 → strict
    assert res.p.tolist() == [0.0, 0.0, 0.0]
    assert window_labels([0.0, 0.05], window=2).p.tolist() == [0.5]


def test_a_gap_of_delta_after_float_rounding_is_not_below_delta():
    """0.3 − 0.2 is 0.0999… and 0.4 − 0.3 is 0.1000… in floats: both are a gap of δ = 0.1
    (the slider's ±0.1 keys), so both are strict preferences, as Algorithm 1's |Δ| < δ says."""
    res = window_labels([0.2, 0.3, 0.4, 0.3, 0.2, -0.1, -0.2], window=2, delta=0.1)
    assert res.p.tolist() == [0.0, 0.0, 1.0, 1.0, 1.0, 1.0]
    assert window_labels([0.3, 0.2999], window=2, delta=0.1).p.tolist() == [0.5]


def test_short_stream_gives_no_pairs():
    assert len(window_labels([0.1, 0.2], window=10)) == 0


@pytest.mark.parametrize("bad", [[0.1, np.nan, 0.2], [0.1, 1.5], [[0.1, 0.2]]])
def test_bad_ratings(bad):
    with pytest.raises(DataError):
        window_labels(bad, window=2)


def test_window_must_hold_a_pair():
    with pytest.raises(ConfigError):
        window_pairs(10, 1)


def test_vote_labels_hand_computed():
    preds = np.array([[0.0, 1.0, 1.05], [2.0, 0.0, 0.5], [0.0, 0.0, 0.0]])
    pairs = np.array([[0, 1], [1, 2], [0, 2]])
    # pair (0,1): votes 0, 1, 0.5 → 0.5 ; (1,2): 0.5, 0, 0.5 → 1/3 ; (0,2): 0, 1, 0.5 → 0.5
    np.testing.assert_allclose(vote_labels(preds, pairs, delta=0.1), [0.5, 1 / 3, 0.5])
    np.testing.assert_allclose(binary_majority([0.5, 1 / 3, 0.9]), [0.5, 0.0, 1.0])


def test_vote_labels_with_window_pairs_equals_algorithm_2_loop():
    rng = np.random.default_rng(0)
    preds = rng.normal(size=(4, 15))
    pairs = window_pairs(15, 5)
    got = vote_labels(preds, pairs, 0.3)
    for k, (a, b) in enumerate(pairs):
        c = 0.0
        for j in range(4):
            d = preds[j, a] - preds[j, b]
            c += 0.5 if abs(d) < 0.3 else (1.0 if d > 0 else 0.0)
        assert got[k] == pytest.approx(c / 4)


def test_vote_labels_bad_input():
    with pytest.raises(DataError):
        vote_labels(np.array([[0.0, np.nan]]), np.array([[0, 1]]), 0.1)
    with pytest.raises(DataError):
        vote_labels(np.zeros((2, 3)), np.array([[0, 3]]), 0.1)
    with pytest.raises(ConfigError):
        vote_labels(np.zeros((2, 3)), np.array([[0, 1]]), -1.0)


def r(step, t, v, who="e1", stream="s1"):
    return Rating(annotator_id=who, stream_id=stream, step=step, t=t, value=v)


def test_stream_values_checks_time_order():
    steps, _times, values = stream_values([r(0, 0.0, 0.1), r(1, 0.5, -0.2), r(2, 1.0, 0.3)])
    assert steps.tolist() == [0, 1, 2] and values.tolist() == [0.1, -0.2, 0.3]
    with pytest.raises(DataError, match="share timestamp"):
        stream_values([r(0, 0.0, 0.1), r(1, 0.0, 0.2)])
    with pytest.raises(DataError, match="not sorted"):
        stream_values([r(0, 1.0, 0.1), r(1, 0.5, 0.2)])
    with pytest.raises(DataError, match="mix"):
        stream_values([r(0, 0.0, 0.1), r(1, 0.5, 0.2, who="e2")])
    with pytest.raises(DataError):
        Rating(annotator_id="e", stream_id="s", step=0, t=0.0, value=1.2)
