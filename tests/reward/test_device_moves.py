"""The reward model's tensors go where the model is: with the model on torch's ``meta`` device
(shapes only, no data: the one device besides the CPU that a CPU-only torch has), every path
below mixes devices only if an input, a mask or a draw were left on the CPU, which torch
refuses ("Tensor on device cpu is not on the expected device meta"). The values themselves
cannot be checked on ``meta``; on the CPU every move is a no-op (tests/test_device.py and the
exact-resume tests keep the CPU path exact)."""

from __future__ import annotations

import numpy as np
import torch

from preflab.reward.batch import LabelBatch, SegmentBatch
from preflab.reward.cnn import ConvRewardEnsemble
from preflab.reward.ensemble import RewardConfig, RewardEnsemble
from preflab.reward.trainer import _member_losses, crop_windows

META = torch.device("meta")


def _batch(rng: np.random.Generator, n: int = 6, t: int = 5) -> SegmentBatch:
    return SegmentBatch.from_arrays(
        rng.normal(size=(n, t, 3)).astype(np.float32), rng.normal(size=(n, t, 2))
    )


def test_a_model_elsewhere_takes_cpu_segments() -> None:
    ens = RewardEnsemble(3, 2, RewardConfig(members=2, hidden=(8,))).to(META)
    assert ens.device == META
    batch = _batch(np.random.default_rng(0))
    assert batch.to(torch.device("cpu")) is batch  # nothing moves on the CPU
    out = ens.segment_returns_t(batch)
    assert out.device == META and out.shape == (2, 6)
    assert ens.forward_raw(batch.obs[0], batch.acts[0]).device == META


def test_the_fits_tensors_follow_the_model() -> None:
    ens = RewardEnsemble(3, 2, RewardConfig(members=2, hidden=(8,))).to(META)
    ens.train()
    segments = _batch(np.random.default_rng(1)).to(META)
    labels = LabelBatch.from_arrays(np.array([0, 2]), np.array([1, 3]), np.array([1.0, 0.0]))
    labels = labels.to(META)
    assert labels.p.device == META and labels.to(META) is labels
    rows = torch.tensor([[0, 1, 2, 3], [2, 3, 4, 5]], device=META)
    # (member_returns itself reads a count back to the host, which meta tensors cannot do)
    pick = torch.tensor([[0, 1], [2, 3]])  # member m's own rows
    steps = ens.forward_members(segments.obs[pick], segments.acts[pick])
    ret = (steps * segments.mask[pick]).sum(-1)
    assert ret.device == META and ret.shape == (2, 2)
    gen = torch.Generator().manual_seed(0)  # draws on the CPU generator, then moved
    crop = crop_windows(segments, rows, 2, gen)
    assert crop.device == META and crop.shape == (2, 4, 5)
    p = torch.ones(2, 2, device=META)
    assert _member_losses(ret[:, :1], ret[:, 1:], p[:, :1], p[:, :1], 0.1).device == META
    for w in ens.weights:
        w.grad = torch.zeros_like(w)
    ens.add_l2_grad([1e-3, 1e-3])


def test_frame_stacks_move_once_and_keep_their_view() -> None:
    rng = np.random.default_rng(2)
    frames = rng.integers(0, 255, size=(9, 48, 48), dtype=np.uint8)
    from preflab.testing.factories import make_segment

    stacks = np.stack([frames[i : i + 4] for i in range(6)])  # (6, 4, 48, 48): sliding stacks
    seg = make_segment(obs=stacks, acts=np.zeros((6, 1), np.float32))
    batch = SegmentBatch.from_segments([seg, seg])
    assert batch.obs._base is not None  # the strided view over the frames
    moved = batch.to(META)
    assert moved.obs.shape == batch.obs.shape and moved.obs.stride() == batch.obs.stride()
    ens = ConvRewardEnsemble((4, 48, 48), 0, RewardConfig(kind="cnn", members=2)).to(META)
    ens.train()
    out = ens.forward_raw(batch.obs[:, :3])  # CPU frames, a chunk at a time to the model
    assert out.device == META and out.shape == (2, 2, 3)
