"""The one offline Bradley–Terry fit, :func:`preflab.reward.offline.fit_reward_model`."""

from __future__ import annotations

import numpy as np

from preflab.reward import FitConfig, LabelBatch, RewardConfig, SegmentBatch
from preflab.reward.offline import fit_reward_model


def _data(seed: int) -> tuple[SegmentBatch, LabelBatch, np.ndarray]:
    rng = np.random.default_rng(seed)
    obs = rng.normal(size=(40, 4, 2)).astype(np.float32)
    true = obs[:, :, 0].sum(1)  # the reward is the first feature
    a, b = rng.integers(0, 40, 300), rng.integers(0, 40, 300)
    keep = a != b
    a, b = a[keep], b[keep]
    labels = LabelBatch.from_arrays(a, b, (true[a] > true[b]).astype(np.float32))
    return SegmentBatch.from_arrays(obs), labels, true


def test_learns_the_labels_and_is_reproducible() -> None:
    batch, labels, true = _data(0)
    kw = {
        "obs_dim": 2,
        "act_dim": 0,
        "reward": RewardConfig(members=2, hidden=(16,), use_actions=False),
        "fit": FitConfig(epochs=30, batch_size=64),
    }
    m1 = fit_reward_model(batch, labels, np.random.default_rng(5), **kw)
    m2 = fit_reward_model(batch, labels, np.random.default_rng(5), **kw)
    r1 = m1.segment_returns(batch)
    assert r1.shape == (2, 40)
    np.testing.assert_array_equal(r1, m2.segment_returns(batch))
    assert np.corrcoef(r1.mean(0), true)[0, 1] > 0.8
