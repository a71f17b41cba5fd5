"""``fit_reward_stats``: the policy's reward (members normalised, averaged, re-standardised) has
mean 0 and standard deviation 1 over the real steps it was fit on, MLP and CNN alike, and the
padding of a short segment plays no part in it."""

from __future__ import annotations

import numpy as np
import pytest
import torch

from preflab.reward import RewardConfig, RewardEnsemble, SegmentBatch
from preflab.reward.cnn import ConvRewardEnsemble, min_image_side
from preflab.reward.numpy_forward import SMALL_BATCH_ROWS

T = 6
SHORT = 2
"""Real steps of the one short segment (the rest of its T steps are padding)."""


def _with_short_segment(obs: np.ndarray, acts: np.ndarray, pad: float) -> SegmentBatch:
    """``obs`` / ``acts`` (N, T, ...) as a batch whose last segment has SHORT real steps and
    ``pad`` in every observation and action of its padding."""
    obs, acts = obs.copy(), acts.copy()
    obs[-1, SHORT:] = pad
    acts[-1, SHORT:] = pad
    batch = SegmentBatch.from_arrays(obs, acts)
    mask = torch.ones(len(obs), T)
    mask[-1, SHORT:] = 0
    return SegmentBatch(ids=batch.ids, obs=batch.obs, acts=batch.acts, mask=mask)


def _real_steps(obs: np.ndarray, acts: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """The real steps of :func:`_with_short_segment`'s batch, gathered here by hand."""
    o = np.concatenate([obs[:-1].reshape(-1, *obs.shape[2:]), obs[-1, :SHORT]])
    a = np.concatenate([acts[:-1].reshape(-1, acts.shape[-1]), acts[-1, :SHORT]])
    return o, a


def _assert_standardised(reward: np.ndarray, n_steps: int) -> None:
    """Mean 0 and sample standard deviation 1 (ddof 1: the convention of every statistic the
    ensemble fits, ``torch.std``'s default, as in ``fit_input_stats`` and ``fit_output_stats``)."""
    assert reward.shape == (n_steps,)
    assert abs(float(np.mean(reward))) < 1e-5
    assert float(np.std(reward, ddof=1)) == pytest.approx(1.0, abs=1e-5)


@pytest.mark.parametrize("full", [2, 8])  # 14 real steps (NumPy forward), 50 (torch's)
def test_mlp_reward_is_standardised_on_the_real_steps_and_padding_is_ignored(full: int) -> None:
    rng = np.random.default_rng(full)
    obs = rng.normal(loc=0.5, scale=2.0, size=(full + 1, T, 3)).astype(np.float32)
    acts = rng.normal(size=(full + 1, T, 1)).astype(np.float32)
    ens = RewardEnsemble(3, 1, RewardConfig(members=3, hidden=(16,)), seed=0)
    fit_on = SegmentBatch.from_arrays(rng.normal(size=(5, T, 3)), rng.normal(size=(5, T, 1)))
    ens.fit_input_stats(fit_on)
    ens.fit_output_stats(fit_on)  # members' own normalisation: not the batch below

    ens.fit_reward_stats(_with_short_segment(obs, acts, pad=0.0))
    stats = (float(ens.mix_mean), float(ens.mix_std))
    real_obs, real_acts = _real_steps(obs, acts)
    n = full * T + SHORT
    assert (n <= SMALL_BATCH_ROWS) == (full == 2)
    _assert_standardised(ens.reward(real_obs, real_acts), n)
    assert abs(stats[0]) > 1e-3 and abs(stats[1] - 1) > 1e-3  # the stats did move

    ens.fit_reward_stats(_with_short_segment(obs, acts, pad=1e3))
    assert (float(ens.mix_mean), float(ens.mix_std)) == pytest.approx(stats, rel=1e-6, abs=1e-7)
    _assert_standardised(ens.reward(real_obs, real_acts), n)


def test_cnn_reward_is_standardised_on_the_real_steps_and_padding_is_ignored() -> None:
    side = min_image_side() + 4
    rng = np.random.default_rng(3)
    frames = rng.integers(0, 120, size=(4, T, 1, side, side), dtype=np.uint8)
    acts = rng.normal(size=(4, T, 2)).astype(np.float32)
    cfg = RewardConfig(kind="cnn", members=2, cnn_filters=4, cnn_hidden=8)
    ens = ConvRewardEnsemble((1, side, side), 2, cfg, seed=0)
    fit_on = SegmentBatch.from_arrays(
        rng.integers(0, 255, size=(3, T, 1, side, side), dtype=np.uint8),
        rng.normal(size=(3, T, 2)),
    )
    ens.fit_output_stats(fit_on)

    ens.fit_reward_stats(_with_short_segment(frames, acts, pad=0))
    stats = (float(ens.mix_mean), float(ens.mix_std))
    real_obs, real_acts = _real_steps(frames, acts)
    n = 3 * T + SHORT
    _assert_standardised(ens.reward(real_obs, real_acts), n)
    assert abs(stats[0]) > 1e-3 and abs(stats[1] - 1) > 1e-3

    # the brightest frames and huge actions on the padding: nothing changes
    ens.fit_reward_stats(_with_short_segment(frames, acts, pad=255))
    assert (float(ens.mix_mean), float(ens.mix_std)) == pytest.approx(stats, rel=1e-6, abs=1e-7)
    _assert_standardised(ens.reward(real_obs, real_acts), n)
