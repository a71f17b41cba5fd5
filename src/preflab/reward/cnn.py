"""A convolutional reward ensemble for image observations (paper 002, appendix A.2).

Each member: the stacked frames (C = 4 for Atari, uint8 0..255, turned into floats in [0, 1]
only here) go through 4 convolutional layers of 7×7, 5×5, 3×3 and 3×3 kernels with strides
3, 2, 1 and 1 and 16 filters each, each followed by batch normalisation, dropout (0.5) and a
leaky ReLU (α = 0.01); then a 64-unit fully connected layer (leaky ReLU) and a scalar.

It is a :class:`~preflab.reward.ensemble.RewardEnsemble`: the same trainer (bootstrap, holdout,
adaptive ℓ2 per member, the ε random-answer term), the same per-member output normalisation,
the same ``predict`` → (members, batch) and ``segment_returns`` → (members, N) that selectors
use. Inference runs in chunks, so a pool of segments never needs all its frame stacks at once.

Inference (eval mode, no autograd: relabelling rollouts, selection, output statistics) runs a
folded copy of the members (:class:`FoldedMembers`): each batch norm folded into its
convolution, dropout dropped (identity at eval), the 1/255 pixel scale folded into the first
layer's weights, in the NCHW layout, one uint8 → float conversion shared by all members. It is
rebuilt lazily whenever any parameter or batch-norm statistic changed (optimizer steps,
``load_state_dict``, training-mode forwards), so it always gives the unfolded model's outputs
(to float rounding). ``preflab bench atari_speed`` measures it against the unfolded members.
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from dataclasses import asdict
from pathlib import Path
from typing import cast

import numpy as np
import torch
from torch import nn
from torch.nn import functional as F
from torch.nn.utils.fusion import fuse_conv_bn_weights

from preflab.device import cpu_tensors
from preflab.errors import ConfigError, DataError
from preflab.reward.batch import SegmentBatch
from preflab.reward.ensemble import RewardConfig, RewardEnsemble

CONV_LAYERS: tuple[tuple[int, int], ...] = ((7, 3), (5, 2), (3, 1), (3, 1))
"""(kernel, stride) of the four convolutional layers (appendix A.2)."""
LEAK = 0.01
"""Leaky-ReLU slope α."""
CHUNK_STEPS = 1024
"""Frame stacks per forward pass when predicting on many steps (bounds memory)."""


def conv_out(size: int) -> int:
    """Side of the last feature map for an input side ``size`` (0 when too small)."""
    for k, s in CONV_LAYERS:
        if size < k:
            return 0
        size = (size - k) // s + 1
    return size


def min_image_side() -> int:
    """Smallest image side the four layers accept."""
    side = 1
    while conv_out(side) < 1:
        side += 1
    return side


def to_float(x: torch.Tensor, channels_last: bool = True) -> torch.Tensor:
    """uint8 images (B, C, H, W) → float32 in [0, 1], laid out channels-last when asked (the
    layout change is done on the uint8 data, 4× less to move than on floats)."""
    if channels_last:
        x = x.contiguous(memory_format=torch.channels_last)
    return x.to(torch.float32).mul_(1.0 / 255.0)


class ConvMember(nn.Module):
    """One member: conv stack → 64-unit layer (+ the action, when used) → scalar reward."""

    def __init__(self, obs_shape: Sequence[int], act_dim: int, config: RewardConfig) -> None:
        super().__init__()
        c, h, w = obs_shape
        f = config.cnn_filters
        layers: list[nn.Module] = []
        for k, s in CONV_LAYERS:
            layers.append(nn.Conv2d(c, f, k, s))
            if config.cnn_batch_norm:
                layers.append(nn.BatchNorm2d(f))
            if config.cnn_dropout > 0:
                layers.append(nn.Dropout(config.cnn_dropout))
            layers.append(nn.LeakyReLU(LEAK))
            c = f
        self.conv = nn.Sequential(*layers)
        self.fc = nn.Linear(f * conv_out(h) * conv_out(w) + act_dim, config.cnn_hidden)
        self.out = nn.Linear(config.cnn_hidden, 1)
        self.channels_last = True
        """Train in channels-last memory format (inference uses :class:`FoldedMembers`)."""

    def forward(self, x: torch.Tensor, acts: torch.Tensor | None = None) -> torch.Tensor:
        """x (B, C, H, W) uint8 (or already :func:`to_float` 'ed) → (B,) raw rewards."""
        if x.dtype == torch.uint8:
            x = to_float(x, self.channels_last)
        h = self.conv(x).flatten(1)
        if acts is not None:
            h = torch.cat([h, acts.to(h.dtype)], dim=1)
        h = nn.functional.leaky_relu(self.fc(h), LEAK)
        return cast(torch.Tensor, self.out(h).squeeze(-1))


class FoldedMembers:
    """An inference-only copy of eval-mode :class:`ConvMember` s with batch norms folded into
    their convolutions, dropout removed and the uint8 scale 1/255 folded into the first layer.

    Tensors are detached copies (NCHW-contiguous); build a new one when the weights change
    (:meth:`ConvRewardEnsemble.folded` does that lazily). Measured on this project's 2-core
    machine (torch 2.13 CPU, one thread, 80 frame stacks): merging the members into one network
    (first layer 48 filters on the shared input, grouped convolutions after it) was no faster
    per layer (first layer 9.3 vs 3 × 16 filters 9.2 ms, second 5.2 vs 5.2 ms) and slower end to
    end, and channels-last was slower than NCHW, so the members stay separate, in NCHW, and
    share only the input conversion.
    """

    def __init__(self, members: Sequence[ConvMember]) -> None:
        self.layers: list[list[tuple[torch.Tensor, torch.Tensor, int]]] = []
        self.fc: list[tuple[torch.Tensor, torch.Tensor]] = []
        self.out: list[tuple[torch.Tensor, torch.Tensor]] = []
        with torch.no_grad():
            for member in members:
                layers: list[tuple[torch.Tensor, torch.Tensor, int]] = []
                for mod in member.conv:
                    if isinstance(mod, nn.Conv2d):
                        w = mod.weight.detach().clone()
                        b = (
                            mod.bias.detach().clone()
                            if mod.bias is not None
                            else torch.zeros(mod.out_channels, device=mod.weight.device)
                        )
                        layers.append((w, b, int(mod.stride[0])))
                    elif isinstance(mod, nn.BatchNorm2d):
                        w, b, stride = layers[-1]
                        assert mod.running_mean is not None and mod.running_var is not None
                        fw, fb = fuse_conv_bn_weights(
                            w, b, mod.running_mean, mod.running_var, mod.eps, mod.weight, mod.bias
                        )
                        layers[-1] = (fw.detach(), fb.detach(), stride)
                    elif not isinstance(mod, nn.Dropout | nn.LeakyReLU):
                        raise TypeError(f"cannot fold a {type(mod).__name__} layer")
                w0, b0, s0 = layers[0]
                layers[0] = (w0 * (1.0 / 255.0), b0, s0)  # conv(x / 255) = conv_{w / 255}(x)
                self.layers.append(
                    [
                        (w.contiguous(memory_format=torch.contiguous_format), b.contiguous(), s)
                        for w, b, s in layers
                    ]
                )
                self.fc.append((member.fc.weight.detach().clone(), member.fc.bias.detach().clone()))
                self.out.append(
                    (member.out.weight.detach().clone(), member.out.bias.detach().clone())
                )

    def __call__(self, x: torch.Tensor, acts: torch.Tensor | None = None) -> torch.Tensor:
        """uint8 images (B, C, H, W) → raw rewards of every member (M, B)."""
        xf = x.to(torch.float32)  # once for all members; 1/255 is in the first layer's weights
        outs = []
        for layers, (fw, fb), (ow, ob) in zip(self.layers, self.fc, self.out, strict=True):
            h = xf
            for w, b, s in layers:
                h = F.leaky_relu_(F.conv2d(h, w, b, s), LEAK)
            h = h.flatten(1)
            if acts is not None:
                h = torch.cat([h, acts.to(h.dtype)], dim=1)
            h = F.leaky_relu_(F.linear(h, fw, fb), LEAK)
            outs.append(F.linear(h, ow, ob).squeeze(-1))
        return torch.stack(outs)


class ConvRewardEnsemble(RewardEnsemble):
    """M convolutional members r̂_m(s) (or r̂_m(s, a) with ``use_actions``) on uint8 images."""

    out_mean: torch.Tensor
    out_std: torch.Tensor
    mix_mean: torch.Tensor
    mix_std: torch.Tensor

    def __init__(
        self,
        obs_shape: Sequence[int],
        act_dim: int,
        config: RewardConfig | None = None,
        *,
        seed: int = 0,
    ) -> None:
        nn.Module.__init__(self)
        self.config = config or RewardConfig(kind="cnn")
        if self.config.abs_inputs:
            raise ConfigError(
                "abs_inputs applies to MLP reward models, not to image observations; drop it"
            )
        shape = tuple(int(x) for x in obs_shape)
        if len(shape) != 3 or min(shape) < 1:
            raise ConfigError(
                f"a convolutional reward model needs image observations (C, H, W), got {shape}"
            )
        side = min_image_side()
        if conv_out(shape[1]) < 1 or conv_out(shape[2]) < 1:
            raise ConfigError(
                f"images of {shape[1]}×{shape[2]} are too small for the convolutional reward "
                f"model (at least {side}×{side}); resize them (e.g. gymnasium.wrappers."
                "ResizeObservation to 84×84) or flatten them and use kind='mlp'"
            )
        self.obs_shape = shape
        self.obs_dim = int(np.prod(shape))
        self.act_dim = act_dim if self.config.use_actions else 0
        with torch.random.fork_rng(devices=[]):
            torch.manual_seed(seed)
            self.members = nn.ModuleList(
                ConvMember(shape, self.act_dim, self.config) for _ in range(self.config.members)
            )
        self.fold_inference = True
        """Run eval-mode, no-grad inference through :meth:`folded` (False: the members as
        they are; for comparison in ``preflab bench atari_speed``)."""
        self._folded: FoldedMembers | None = None
        self._folded_key: tuple[tuple[int, int], ...] = ()
        self.set_channels_last(True)
        self.register_buffer("out_mean", torch.zeros(self.config.members))
        self.register_buffer("out_std", torch.ones(self.config.members))
        self.register_buffer("mix_mean", torch.zeros(()))
        self.register_buffer("mix_std", torch.ones(()))
        self.eval()

    def _conv_members(self) -> list[ConvMember]:
        """The members with their type (an ``nn.ModuleList`` is typed as holding ``nn.Module``)."""
        return cast("list[ConvMember]", list(self.members))

    def _weights_key(self) -> tuple[tuple[int, int], ...]:
        """(storage address, in-place version) of every parameter and buffer of the members:
        changes with every optimizer step, ``load_state_dict`` and batch-norm statistics update."""
        return tuple(
            (t.data_ptr(), t._version)
            for t in (*self.members.parameters(), *self.members.buffers())
        )

    def folded(self) -> FoldedMembers:
        """The folded inference copy of the members, rebuilt when any weight changed."""
        key = self._weights_key()
        if self._folded is None or key != self._folded_key:
            self._folded = FoldedMembers(self._conv_members())
            self._folded_key = key
        return self._folded

    def set_channels_last(self, on: bool) -> None:
        """Channels-last convolutions (the default; faster on CPU, see ``preflab bench
        atari_speed``) or the contiguous NCHW layout."""
        fmt = torch.channels_last if on else torch.contiguous_format
        self.members.to(memory_format=fmt)  # type: ignore[call-overload]  # torch's stub lacks it
        for m in self._conv_members():
            m.channels_last = on

    # ----- inputs -------------------------------------------------------------------------
    def _check(self, obs: torch.Tensor) -> None:
        if tuple(obs.shape[-3:]) != self.obs_shape or obs.ndim < 4:
            raise DataError(
                f"image observations must end in (C, H, W) = {self.obs_shape} like the reward "
                f"model's, got shape {tuple(obs.shape)}; use a reward model built for this "
                "environment (frames stacked channels-first)"
            )
        if obs.dtype != torch.uint8:
            raise DataError(
                f"image observations must be uint8 (0..255), got {obs.dtype}; the network "
                "converts them to float itself (pass frames as stored, not scaled)"
            )

    def fit_input_stats(self, batch: SegmentBatch) -> None:
        """Nothing to fit: pixels are scaled to [0, 1] and batch normalisation does the rest."""
        del batch

    # ----- forward -------------------------------------------------------------------------
    def forward_members(self, obs: torch.Tensor, acts: torch.Tensor | None) -> torch.Tensor:
        """Per-member images (M, R, T, C, H, W) → raw step rewards (M, R, T)."""
        self._check(obs)
        _m, r, t = obs.shape[:3]
        dev = self.device
        out = []
        for k, member in enumerate(self.members):
            a = acts[k].reshape(r * t, -1).to(dev) if self.act_dim and acts is not None else None
            out.append(member(obs[k].reshape(r * t, *self.obs_shape).to(dev), a).reshape(r, t))
        return torch.stack(out)

    def add_l2_grad(self, l2: list[float]) -> None:
        """ℓ2 on every conv and linear weight of member m with coefficient l2[m]."""
        with torch.no_grad():
            for coef, member in zip(l2, self.members, strict=True):
                for mod in member.modules():
                    if isinstance(mod, nn.Conv2d | nn.Linear) and mod.weight.grad is not None:
                        mod.weight.grad.add_(2.0 * coef * mod.weight)

    def forward_raw(self, obs: torch.Tensor, acts: torch.Tensor | None = None) -> torch.Tensor:
        """Raw step rewards of every member for images (*lead, C, H, W): (members, *lead).
        Runs in chunks along the first axis (a strided frame-stack view is copied a chunk at a
        time); in eval mode without autograd through the folded members (:meth:`folded`)."""
        self._check(obs)
        lead = tuple(obs.shape[:-3])
        if len(lead) == 1:
            obs = obs[:, None]
            acts = acts[:, None] if acts is not None else None
        per_row = int(np.prod(obs.shape[1:-3]))
        rows = max(1, CHUNK_STEPS // max(per_row, 1))
        fast = self.fold_inference and not self.training and not torch.is_grad_enabled()
        dev = self.device  # a chunk at a time goes there (a pool's frames need not fit on it)
        outs = []
        for s in range(0, obs.shape[0], rows):
            o = obs[s : s + rows]
            n = int(np.prod(o.shape[:-3]))
            x = o.reshape(n, *self.obs_shape).to(dev)
            a = (
                acts[s : s + rows].reshape(n, -1).to(dev)
                if self.act_dim and acts is not None
                else None
            )
            if self.act_dim and a is None:
                raise DataError("this reward model uses actions (use_actions=True); pass acts")
            if fast:
                outs.append(self.folded()(x, a).reshape(-1, *o.shape[:-3]))
                continue
            xf = to_float(
                x, self._conv_members()[0].channels_last
            )  # once per chunk, shared by members
            outs.append(
                torch.stack([mem(xf, a) for mem in self.members]).reshape(-1, *o.shape[:-3])
            )
        return torch.cat(outs, dim=1).reshape(self.n_members, *lead)

    @torch.no_grad()
    def predict(
        self,
        obs: np.ndarray | torch.Tensor,
        acts: np.ndarray | torch.Tensor | None = None,
        *,
        normalise: bool = True,
    ) -> np.ndarray:
        """Per-step rewards of every member for a batch of frame stacks (batch, C, H, W) uint8:
        shape (members, batch); one batched pass per member (chunked for very large batches)."""
        obs_t = obs if torch.is_tensor(obs) else torch.from_numpy(np.ascontiguousarray(obs))
        if obs_t.ndim != 4:
            raise DataError(
                f"predict expects image obs of shape (batch, C, H, W) = (batch, "
                f"{', '.join(map(str, self.obs_shape))}), got {tuple(obs_t.shape)}"
            )
        return self._predict_checked(obs_t, acts, normalise)

    @torch.no_grad()
    def fit_reward_stats(self, batch: SegmentBatch) -> None:
        """Re-standardise the policy's reward on the real steps of ``batch`` (chunked)."""
        batch = batch.to(self.device)
        r = self.forward_raw(batch.obs, batch.acts if self.act_dim else None)  # (M, N, T)
        r = (r - self.out_mean[:, None, None]) / self.out_std[:, None, None]
        mixed = r.mean(0)[batch.mask > 0]
        self.mix_mean.copy_(mixed.mean())
        self.mix_std.copy_(mixed.std().clamp_min(1e-6) if mixed.numel() > 1 else torch.ones(()))

    # ----- persistence ---------------------------------------------------------------------
    def save(self, directory: str | Path) -> None:
        """``reward_config.json`` (with the image shape) and ``reward_state.pt`` (state_dict)."""
        d = Path(directory)
        d.mkdir(parents=True, exist_ok=True)
        meta = {
            "config": asdict(self.config),
            "obs_dim": self.obs_dim,
            "obs_shape": list(self.obs_shape),
            "act_dim": self.act_dim,
        }
        (d / "reward_config.json").write_text(json.dumps(meta, indent=2))
        torch.save(cpu_tensors(self.state_dict()), d / "reward_state.pt")  # loads on any device
