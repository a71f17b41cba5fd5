"""The folded inference path of the convolutional reward ensemble equals the unfolded members."""

from __future__ import annotations

import numpy as np
import torch

from preflab.reward import RewardConfig
from preflab.reward.cnn import ConvRewardEnsemble

SHAPE = (2, 48, 48)


def _ensemble(use_actions: bool) -> ConvRewardEnsemble:
    ens = ConvRewardEnsemble(
        SHAPE, 3, RewardConfig(kind="cnn", members=2, use_actions=use_actions), seed=1
    )
    with torch.no_grad():  # non-trivial batch-norm statistics and affine parameters
        g = torch.Generator().manual_seed(0)
        for mod in ens.modules():
            if isinstance(mod, torch.nn.BatchNorm2d):
                mod.running_mean.uniform_(-0.5, 0.5, generator=g)
                mod.running_var.uniform_(0.5, 2.0, generator=g)
                mod.weight.uniform_(0.5, 1.5, generator=g)
                mod.bias.uniform_(-0.2, 0.2, generator=g)
    return ens


def _both(ens: ConvRewardEnsemble, x: torch.Tensor, a: torch.Tensor | None) -> tuple:
    ens.eval()
    with torch.no_grad():
        ens.fold_inference = True
        folded = ens.forward_raw(x, a)
        ens.fold_inference = False
        plain = ens.forward_raw(x, a)
        ens.fold_inference = True
    return folded, plain


def test_folded_equals_unfolded_on_random_inputs() -> None:
    rng = np.random.default_rng(0)
    x = torch.from_numpy(rng.integers(0, 256, (5, *SHAPE), dtype=np.uint8))
    for use_actions in (False, True):
        ens = _ensemble(use_actions)
        a = torch.from_numpy(rng.random((5, 3), dtype=np.float32)) if use_actions else None
        for channels_last in (True, False):
            ens.set_channels_last(channels_last)
            folded, plain = _both(ens, x, a)
            torch.testing.assert_close(folded, plain, atol=1e-5, rtol=1e-5)
        # predict takes the folded path (eval mode, no autograd)
        np.testing.assert_allclose(
            ens.predict(x.numpy(), a.numpy() if a is not None else None),
            ((plain - ens.out_mean[:, None]) / ens.out_std[:, None]).numpy(),
            atol=1e-5,
            rtol=1e-5,
        )


def test_folded_copy_follows_training_steps_and_loaded_weights() -> None:
    rng = np.random.default_rng(1)
    x = torch.from_numpy(rng.integers(0, 256, (6, *SHAPE), dtype=np.uint8))
    ens = _ensemble(False)
    before, _ = _both(ens, x, None)
    opt = torch.optim.SGD(ens.parameters(), lr=0.1)
    ens.train()
    raw = ens.forward_raw(x)  # training mode: the members themselves, with autograd
    assert raw.requires_grad
    raw.sum().backward()
    opt.step()  # weights and batch-norm statistics changed
    folded, plain = _both(ens, x, None)
    assert not torch.allclose(folded, before)
    torch.testing.assert_close(folded, plain, atol=1e-5, rtol=1e-5)
    other = _ensemble(False)
    other.load_state_dict(ens.state_dict())
    torch.testing.assert_close(_both(other, x, None)[0], plain, atol=1e-5, rtol=1e-5)
    with torch.no_grad():
        ens.members[0].fc.weight.mul_(2.0)  # any in-place change triggers a rebuild
    folded, plain = _both(ens, x, None)
    torch.testing.assert_close(folded, plain, atol=1e-5, rtol=1e-5)
    assert ens.folded() is ens.folded()  # unchanged weights: the copy is reused


def test_set_channels_last_keeps_the_reward_standardisation() -> None:
    """Switching the memory layout of a fitted ensemble leaves its output statistics alone (it
    used to re-register them as zeros/ones)."""
    ens = _ensemble(False)
    with torch.no_grad():
        ens.out_mean.fill_(0.25)
        ens.out_std.fill_(2.0)
        ens.mix_mean.fill_(-0.5)
        ens.mix_std.fill_(3.0)
    ens.train()
    ens.set_channels_last(False)
    assert ens.training  # the layout switch does not change the mode either
    assert torch.equal(ens.out_mean, torch.full((2,), 0.25))
    assert torch.equal(ens.out_std, torch.full((2,), 2.0))
    assert float(ens.mix_mean) == -0.5 and float(ens.mix_std) == 3.0
