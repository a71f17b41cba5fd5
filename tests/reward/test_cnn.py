"""The convolutional reward ensemble (paper 002, appendix A.2) on a tiny image task."""

from __future__ import annotations

import numpy as np
import pytest
import torch
from gymnasium import spaces

from preflab.errors import ConfigError, DataError
from preflab.pixels.toy import SIDE, SQUARE, square_frame, square_reward
from preflab.policy.evaluate import reward_agreement
from preflab.records import Label, Segment
from preflab.reward import LabelBatch, RewardConfig, RewardEnsemble, RewardTrainer, SegmentBatch
from preflab.reward.cnn import CONV_LAYERS, ConvRewardEnsemble, min_image_side
from preflab.reward.models import load_reward_model, make_reward_model
from preflab.reward.protocol import RewardModel
from preflab.reward.trainer import FitConfig
from preflab.seeding import seed_torch
from preflab.testing.factories import make_segment

T = 3


def square_segments(n: int, rng: np.random.Generator) -> list[Segment]:
    """Segments of T single frames (C = 1) of the bright-square task; reward = f(column)."""
    out = []
    for _ in range(n):
        xs = rng.integers(0, SIDE - SQUARE + 1, T)
        ys = rng.integers(0, SIDE - SQUARE + 1, T)
        obs = np.stack([square_frame(int(x), int(y)) for x, y in zip(xs, ys, strict=True)])[:, None]
        acts = np.zeros((T, 1), np.float32)
        out.append(make_segment(obs=obs, acts=acts, true_rewards=square_reward(xs)))
    return out


def noiseless_labels(segs: list[Segment], n: int, rng: np.random.Generator) -> list[Label]:
    labels = []
    while len(labels) < n:
        i, j = rng.choice(len(segs), 2, replace=False)
        ra, rb = segs[i].true_return, segs[j].true_return
        if ra != rb:
            labels.append(Label(a=segs[i].id, b=segs[j].id, p=1.0 if ra > rb else 0.0))
    return labels


def test_architecture_follows_appendix_a2() -> None:
    ens = ConvRewardEnsemble((4, 84, 84), 6, RewardConfig(kind="cnn", members=2, use_actions=False))
    member = ens.members[0]
    convs = [m for m in member.conv if isinstance(m, torch.nn.Conv2d)]
    assert [(c.kernel_size[0], c.stride[0]) for c in convs] == list(CONV_LAYERS)
    assert [(k, s) for k, s in CONV_LAYERS] == [(7, 3), (5, 2), (3, 1), (3, 1)]
    assert all(c.out_channels == 16 for c in convs) and convs[0].in_channels == 4
    assert sum(isinstance(m, torch.nn.BatchNorm2d) for m in member.conv) == 4
    drops = [m for m in member.conv if isinstance(m, torch.nn.Dropout)]
    assert len(drops) == 4 and all(d.p == 0.5 for d in drops)
    leaks = [m for m in member.conv if isinstance(m, torch.nn.LeakyReLU)]
    assert len(leaks) == 4 and all(m.negative_slope == 0.01 for m in leaks)
    assert member.fc.out_features == 64 and member.out.out_features == 1
    # 84 → 26 → 11 → 9 → 7
    assert member.fc.in_features == 16 * 7 * 7
    assert isinstance(ens, RewardModel)


@pytest.mark.parametrize("seed", [0, pytest.param(1, marks=pytest.mark.slow)])
def test_learns_a_pixel_reward_from_noiseless_labels(seed: int) -> None:
    """Seed 0 runs by default; seed 1, the same check on another draw (8 s of CPU), with -m slow
    (docs/guide/test-time.md)."""
    seed_torch(seed)  # dropout draws from torch's global generator, as in the loop (seeded there)
    rng = np.random.default_rng(seed)
    train = square_segments(160, rng)
    test = square_segments(60, rng)
    labels = noiseless_labels(train, 400, rng)
    batch = SegmentBatch.from_segments(train)
    ens = ConvRewardEnsemble(
        (1, SIDE, SIDE), 1, RewardConfig(kind="cnn", members=2, use_actions=False), seed=seed
    )
    trainer = RewardTrainer(ens, FitConfig(epochs=4, batch_size=16, lr=2e-3))
    trainer.fit(batch, LabelBatch.from_labels(labels, batch.index()), rng)
    held = SegmentBatch.from_segments(test)
    truth = np.array([s.true_return for s in test])
    acc, corr = reward_agreement(ens, held, truth, np.random.default_rng(99), n_pairs=2000)
    assert acc >= 0.95, (acc, corr)
    # one prediction method: (members, batch) for a batch of frames
    frames = held.obs[:, 0]
    assert ens.predict(frames.numpy()).shape == (2, len(test))
    assert ens.segment_returns(held).shape == (2, len(test))


def test_auto_kind_picks_cnn_for_images_and_mlp_for_vectors() -> None:
    img = spaces.Box(0, 255, (84, 84, 4), np.uint8)
    flat = spaces.Box(-1, 1, (5,), np.float32)
    act = spaces.Discrete(3)
    assert isinstance(make_reward_model(img, act, RewardConfig(members=1)), ConvRewardEnsemble)
    m = make_reward_model(flat, act, RewardConfig(members=1))
    assert type(m) is RewardEnsemble
    with pytest.raises(ConfigError, match="'cnn' needs image observations"):
        make_reward_model(flat, act, RewardConfig(kind="cnn"))
    with pytest.raises(ConfigError, match="cannot take image observations"):
        make_reward_model(img, act, RewardConfig(kind="mlp"))
    with pytest.raises(ConfigError, match="too small"):
        make_reward_model(spaces.Box(0, 255, (7, 7, 3), np.uint8), act, RewardConfig())
    assert min_image_side() == 43


def test_shape_and_dtype_errors_are_clear() -> None:
    ens = ConvRewardEnsemble((4, 84, 84), 0, RewardConfig(kind="cnn", members=2, use_actions=False))
    with pytest.raises(DataError, match=r"\(C, H, W\) = \(4, 84, 84\)"):
        ens.predict(np.zeros((2, 3, 84, 84), np.uint8))
    with pytest.raises(DataError, match="must be uint8"):
        ens.predict(np.zeros((2, 4, 84, 84), np.float32))
    with pytest.raises(DataError, match=r"\(batch, C, H, W\)"):
        ens.predict(np.zeros((4, 84, 84), np.uint8))
    with pytest.raises(DataError, match="must be uint8"):
        Segment(
            id="s",
            obs=np.zeros((5, 4, 84, 84), np.float32),
            acts=np.zeros((5, 1)),
            true_rewards=np.zeros(5),
        )
    with pytest.raises(DataError, match="must be uint8"):
        SegmentBatch.from_arrays(np.zeros((2, 5, 4, 84, 84), np.float32))
    flat = Segment(id="f", obs=np.zeros((5, 3)), acts=np.zeros((5, 1)), true_rewards=np.zeros(5))
    img = Segment(
        id="i",
        obs=np.zeros((5, 4, 84, 84), np.uint8),
        acts=np.zeros((5, 1)),
        true_rewards=np.zeros(5),
    )
    with pytest.raises(DataError, match="same environment"):
        SegmentBatch.from_segments([img, flat])


def test_save_load_round_trip(tmp_path) -> None:
    ens = ConvRewardEnsemble(
        (4, 84, 84), 0, RewardConfig(kind="cnn", members=2, use_actions=False), seed=3
    )
    ens.save(tmp_path)
    back = load_reward_model(tmp_path)
    assert isinstance(back, ConvRewardEnsemble)
    x = np.random.default_rng(0).integers(0, 255, (3, 4, 84, 84), dtype=np.uint8)
    np.testing.assert_allclose(back.predict(x), ens.predict(x), rtol=1e-5)
