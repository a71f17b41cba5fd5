"""An ensemble of per-step reward networks with per-member output normalisation.

Every prediction goes through :meth:`RewardEnsemble.predict`, which returns shape
(members, batch); with :meth:`RewardEnsemble.segment_returns` it implements
:class:`preflab.reward.protocol.RewardModel`, all that selectors and sources use. The reward given to a policy is each member normalised independently
(zero mean, unit std over the states it was fit on), then averaged (Christiano et al. 2017).
"""

from __future__ import annotations

import itertools
import json
import math
from collections.abc import Callable
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Literal, cast

import numpy as np
import torch
from torch import nn

from preflab.device import cpu_tensors
from preflab.errors import ConfigError, DataError
from preflab.reward.batch import SegmentBatch
from preflab.reward.numpy_forward import SMALL_BATCH_ROWS, NumpyMembers, version_key


@dataclass(frozen=True, kw_only=True)
class RewardConfig:
    """Architecture of the reward ensemble."""

    members: int = 3
    """Number of networks in the ensemble (1 disables disagreement-based selection)."""
    hidden: tuple[int, ...] = (64, 64)
    """Hidden layer widths of each member's MLP."""
    use_actions: bool = True
    """Feed the action as well as the observation (r(s, a) instead of r(s))."""
    dropout: float = 0.0
    """Dropout probability after each hidden layer (0 disables it)."""
    activation: str = "leaky_relu"
    """Hidden activation: 'leaky_relu', 'relu' or 'tanh'."""
    kind: Literal["auto", "mlp", "cnn"] = "auto"
    """Member network: 'mlp' for flat observations, 'cnn' for images (Christiano et al. 2017, appendix A.2:
    4 conv layers 7×7, 5×5, 3×3, 3×3, strides 3, 2, 1, 1, then a 64-unit layer), or 'auto'
    (cnn for image observation spaces, else mlp)."""
    cnn_filters: int = 16
    """Filters of each convolutional layer (kind 'cnn')."""
    cnn_dropout: float = 0.5
    """Dropout on the convolutional layers (kind 'cnn'; Christiano et al. 2017 use 0.5)."""
    cnn_batch_norm: bool = True
    """Batch normalisation on the convolutional layers (kind 'cnn')."""
    cnn_hidden: int = 64
    """Width of the fully connected layer after the convolutions (kind 'cnn')."""
    abs_inputs: bool = False
    """Append |x| of every raw input (kind 'mlp'): a kink at 0 for signed inputs such as
    relative offsets, so a score can peak where an offset is 0 (e.g. the agent on the goal of a
    grid world) without having to learn the kink from the few pairs that cross it."""

    def __post_init__(self) -> None:
        if self.kind not in ("auto", "mlp", "cnn"):
            raise ConfigError(f"kind must be 'auto', 'mlp' or 'cnn', got {self.kind!r}")
        if not 0.0 <= self.cnn_dropout < 1.0:
            raise ConfigError(f"cnn_dropout must be in [0, 1), got {self.cnn_dropout}")
        if self.cnn_filters < 1 or self.cnn_hidden < 1:
            raise ConfigError(
                f"cnn_filters and cnn_hidden must be ≥ 1, got {self.cnn_filters}, {self.cnn_hidden}"
            )
        if self.members < 1:
            raise ConfigError(f"members must be ≥ 1, got {self.members}")
        if self.abs_inputs and self.kind == "cnn":
            raise ConfigError("abs_inputs applies to MLP reward models; set kind='mlp' or drop it")
        if not 0.0 <= self.dropout < 1.0:
            raise ConfigError(f"dropout must be in [0, 1), got {self.dropout}")
        if self.activation not in _ACTIVATIONS:
            raise ConfigError(
                f"activation must be one of {sorted(_ACTIVATIONS)}, got {self.activation!r}"
            )
        if any(h < 1 for h in self.hidden):
            raise ConfigError(f"hidden widths must be ≥ 1, got {self.hidden}")


_FOLDED_STATS = ("in_mean", "in_std", "out_mean", "out_std", "mix_mean", "mix_std")
"""The buffers :class:`preflab.reward.numpy_forward.NumpyMembers` folds into its layers."""

_MEMBER_CHAIN_ROWS = 512
"""From this many shared input rows on, :meth:`RewardEnsemble.net` evaluates one member at a
time: on CPU about 4× faster at 20,000 rows (3 members, 32×32), while a few rows (SAC's
per-step reward) are faster through the 3 batched ops (``benchmarks/probes/inference_paths.py``
times both paths by batch size and width)."""

_ACTIVATIONS: dict[str, Callable[[torch.Tensor], torch.Tensor]] = {
    "leaky_relu": nn.functional.leaky_relu,
    "relu": torch.relu,
    "tanh": torch.tanh,
}


class RewardEnsemble(nn.Module):
    """Members r̂_m(s, a); inputs standardised with statistics of the data they were fit on.

    Prediction: :meth:`predict` (per-step rewards, (members, batch)), :meth:`reward` (the
    policy's reward, (batch,)) and :meth:`segment_returns` (members, N); preference
    probabilities and the ensemble's disagreement derive from segment returns
    (:func:`preflab.reward.preference_probs`, :func:`preflab.reward.pair_variance`). Training
    (:class:`preflab.reward.RewardTrainer`) uses the differentiable :meth:`segment_returns_t`
    and :meth:`forward_members`."""

    # buffers registered in __init__ (saved in the state_dict)
    in_mean: torch.Tensor
    in_std: torch.Tensor
    out_mean: torch.Tensor
    out_std: torch.Tensor
    mix_mean: torch.Tensor
    mix_std: torch.Tensor

    def __init__(
        self, obs_dim: int, act_dim: int, config: RewardConfig | None = None, *, seed: int = 0
    ) -> None:
        super().__init__()
        self.config = config or RewardConfig()
        if obs_dim < 1:
            raise ConfigError(f"obs_dim must be ≥ 1, got {obs_dim}")
        self.obs_dim = obs_dim
        self.act_dim = act_dim if self.config.use_actions else 0
        inp = (self.obs_dim + self.act_dim) * (2 if self.config.abs_inputs else 1)
        # Stacked members: layer k has weight (M, in, out) and bias (M, 1, out), initialised like
        # nn.Linear; one batched matmul evaluates every member at once on a few rows (training,
        # where each member has its own rows, and large batches run one addmm chain per member:
        # see net).
        gen = torch.Generator().manual_seed(seed)
        widths = [inp, *self.config.hidden, 1]
        self.weights = nn.ParameterList()
        self.biases = nn.ParameterList()
        m = self.config.members
        for w_in, w_out in itertools.pairwise(widths):
            bound = 1.0 / math.sqrt(max(w_in, 1))
            self.weights.append(
                nn.Parameter((torch.rand(m, w_in, w_out, generator=gen) * 2 - 1) * bound)
            )
            self.biases.append(
                nn.Parameter((torch.rand(m, 1, w_out, generator=gen) * 2 - 1) * bound)
            )
        self._act = _ACTIVATIONS[self.config.activation]
        self.register_buffer("in_mean", torch.zeros(inp))
        self.register_buffer("in_std", torch.ones(inp))
        self.register_buffer("out_mean", torch.zeros(self.config.members))
        self.register_buffer("out_std", torch.ones(self.config.members))
        # Mean/std of the member-averaged normalised reward on recent rollouts: averaging
        # members that disagree shrinks the variance, so the policy's reward is re-standardised.
        self.register_buffer("mix_mean", torch.zeros(()))
        self.register_buffer("mix_std", torch.ones(()))
        self._numpy: NumpyMembers | None = None  # see _numpy_members
        self.eval()

    @property
    def n_members(self) -> int:
        return self.config.members

    @property
    def device(self) -> torch.device:
        """Where the members' tensors are (``model.to(device)`` moves them): inputs are moved
        there, predictions come back as NumPy arrays on the CPU."""
        return self._buffers["out_mean"].device  # type: ignore[union-attr]  # registered in __init__

    # ----- inputs -------------------------------------------------------------------------
    def _inputs(self, obs: torch.Tensor, acts: torch.Tensor | None) -> torch.Tensor:
        if obs.shape[-1] != self.obs_dim:
            raise DataError(
                f"observation dimension {obs.shape[-1]} does not match the reward model's {self.obs_dim}; "
                "use a reward model built for this environment"
            )
        if self.act_dim:
            if acts is None:
                raise DataError("this reward model uses actions (use_actions=True); pass acts")
            if acts.shape[-1] != self.act_dim:
                raise DataError(
                    f"action dimension {acts.shape[-1]} does not match the reward model's {self.act_dim}"
                )
            x = torch.cat(
                [obs.to(self.in_mean.device), acts.to(self.in_mean.device, obs.dtype)], -1
            )
        else:
            x = obs.to(self.in_mean.device)
        return (self._features(x) - self.in_mean) / self.in_std

    def _features(self, x: torch.Tensor) -> torch.Tensor:
        """Raw inputs → the network's inputs before standardisation (|x| appended if asked)."""
        return torch.cat([x, x.abs()], dim=-1) if self.config.abs_inputs else x

    def fit_input_stats(self, batch: SegmentBatch) -> None:
        """Standardise inputs with the mean/std of the real (unpadded) steps of ``batch``."""
        m = batch.mask.reshape(-1) > 0
        x = batch.obs.reshape(-1, batch.obs_dim)[m]
        if self.act_dim:
            x = torch.cat([x, batch.acts.reshape(-1, batch.act_dim)[m]], dim=-1)
        x = self._features(x)
        self.in_mean.copy_(x.mean(0))
        self.in_std.copy_(
            x.std(0).clamp_min(1e-6) if x.shape[0] > 1 else torch.ones_like(self.in_std)
        )

    # ----- prediction ---------------------------------------------------------------------
    def net(self, x: torch.Tensor) -> torch.Tensor:
        """Members on standardised inputs: x (rows, in) shared, or (members, rows, in) per member;
        returns (members, rows)."""
        # the layers' tensors straight from the ParameterLists' registries: indexing a
        # ParameterList costs a string conversion and a getattr per layer, which dominates a
        # one-row forward (SAC's per-step reward)
        # (typed Parameter | None, but every entry is a Parameter: appended in __init__)
        ws = cast("list[torch.Tensor]", list(self.weights._parameters.values()))
        bs = cast("list[torch.Tensor]", list(self.biases._parameters.values()))
        if x.ndim == 3:  # training: one addmm chain per member (its backward on CPU costs about
            # 30% less than baddbmm's, whose input gradients come out strided)
            return torch.stack([self._member(x[m], ws, bs, m) for m in range(x.shape[0])])
        if x.shape[0] >= _MEMBER_CHAIN_ROWS:  # large batches (a rollout, the pool): per member
            return torch.stack([self._member(x, ws, bs, m) for m in range(len(ws[0]))])
        h = torch.matmul(x, ws[0]) + bs[0]
        for w, b in zip(ws[1:], bs[1:], strict=True):
            h = self._act(h)
            if self.config.dropout > 0:
                h = nn.functional.dropout(h, self.config.dropout, self.training)
            h = torch.baddbmm(b, h, w)
        return h.squeeze(-1)

    def _member(
        self, x: torch.Tensor, ws: list[torch.Tensor], bs: list[torch.Tensor], m: int
    ) -> torch.Tensor:
        """Member ``m`` on standardised rows x (rows, in), its own or shared: (rows,)."""
        h = torch.addmm(bs[0][m], x, ws[0][m])
        for w, b in zip(ws[1:], bs[1:], strict=True):
            h = self._act(h)
            if self.config.dropout > 0:
                h = nn.functional.dropout(h, self.config.dropout, self.training)
            h = torch.addmm(b[m], h, w[m])
        return h.squeeze(-1)

    def forward_members(self, obs: torch.Tensor, acts: torch.Tensor | None) -> torch.Tensor:
        """Per-member inputs (M, R, T, ...) → raw step rewards (M, R, T): member m sees row m
        (its own bootstrap minibatch). Used by the trainer."""
        x = self._inputs(obs, acts if self.act_dim else None)
        return self.net(x.reshape(self.n_members, -1, x.shape[-1])).reshape(
            obs.shape[0], obs.shape[1], -1
        )

    def hidden_features(self, obs: torch.Tensor, acts: torch.Tensor | None) -> torch.Tensor:
        """Each member's last hidden layer (before its output layer) on its own rows: ``obs``
        (M, B, obs_dim) and ``acts`` (M, B, act_dim) give (M, B, hidden[-1]); differentiable,
        no dropout (REED's state-action representation, :mod:`preflab.reward.reed`)."""
        h = self._inputs(obs, acts if self.act_dim else None)
        for w, b in zip(list(self.weights)[:-1], list(self.biases)[:-1], strict=True):
            h = self._act(torch.baddbmm(b, h, w))
        return h

    def state_features(self, obs: torch.Tensor) -> torch.Tensor:
        """Each member's first hidden layer on the state part of its input alone, σ(W₀ˢ s̃ + b₀)
        with s̃ the standardised ``obs`` (M, B, obs_dim) and W₀ˢ the weights that read the state:
        (M, B, hidden[0]) (REED's next-state representation, :mod:`preflab.reward.reed`)."""
        d = self.obs_dim
        s = (obs.to(self.in_mean.device) - self.in_mean[:d]) / self.in_std[:d]
        return self._act(torch.baddbmm(self.biases[0], s, self.weights[0][:, :d]))

    def add_l2_grad(self, l2: list[float]) -> None:
        """Add the gradient of Σ_m l2[m]·‖W_m‖² (weights only, one coefficient per member)."""
        coef = torch.tensor(l2, dtype=torch.float32, device=self.device)[:, None, None]
        with torch.no_grad():
            for wp in self.weights:
                if wp.grad is not None:
                    wp.grad.add_(2.0 * coef * wp)

    def forward_raw(self, obs: torch.Tensor, acts: torch.Tensor | None = None) -> torch.Tensor:
        """Un-normalised per-step rewards of every member: shape (members, *obs.shape[:-1])."""
        x = self._inputs(obs, acts)
        lead = x.shape[:-1]
        return self.net(x.reshape(-1, x.shape[-1])).reshape(self.n_members, *lead)

    def predict(
        self,
        obs: np.ndarray | torch.Tensor,
        acts: np.ndarray | torch.Tensor | None = None,
        *,
        normalise: bool = True,
    ) -> np.ndarray:
        """Per-step rewards of every member for a batch of steps: shape (members, batch).

        ``obs`` is (batch, obs_dim) and ``acts`` (batch, act_dim). With ``normalise`` each
        member's output is standardised by the statistics from its last fit.
        """
        small = self._small_inputs(obs, acts)
        if small is not None:
            return self._numpy_members().predict(small, normalise=normalise).astype(np.float32)
        obs_t = torch.as_tensor(
            np.asarray(obs, np.float32) if not torch.is_tensor(obs) else obs, dtype=torch.float32
        )
        if obs_t.ndim != 2:
            raise DataError(
                f"predict expects obs of shape (batch, obs_dim), got {tuple(obs_t.shape)}"
            )
        with torch.no_grad():
            return self._predict_checked(obs_t, acts, normalise)

    def _small_inputs(
        self, obs: np.ndarray | torch.Tensor, acts: np.ndarray | torch.Tensor | None
    ) -> np.ndarray | None:
        """The raw input rows (rows, features) of a few well-shaped NumPy rows, for the NumPy
        forward pass (one off-policy step's reward; :mod:`preflab.reward.numpy_forward`), or
        None for torch to do it (and to raise any shape error)."""
        if torch.is_tensor(obs) or torch.is_tensor(acts):
            return None
        x = np.asarray(obs)
        if x.ndim != 2 or x.shape[0] > SMALL_BATCH_ROWS or x.shape[1] != self.obs_dim:
            return None
        if self.training and self.config.dropout > 0:
            return None
        if self.act_dim:
            if acts is None:
                return None
            a = np.asarray(acts)
            a = a[:, None] if a.ndim == 1 else a
            if a.shape != (x.shape[0], self.act_dim):
                return None
            x = np.concatenate([x, a], axis=1)
        if self.config.abs_inputs:
            x = np.concatenate([x, np.abs(x)], axis=1)
        return x.astype(np.float32)  # the rounding torch's path does

    def _numpy_members(self) -> NumpyMembers:
        """NumPy copies of the layers, taken again whenever a weight or statistic changed."""
        # straight from the registries: each Module attribute lookup costs microseconds
        modules, buffers = self._modules, self._buffers
        ws = cast("list[torch.Tensor]", list(modules["weights"]._parameters.values()))  # type: ignore[union-attr]
        bs = cast("list[torch.Tensor]", list(modules["biases"]._parameters.values()))  # type: ignore[union-attr]
        stats = cast("list[torch.Tensor]", [buffers[name] for name in _FOLDED_STATS])
        cached = self._numpy
        if cached is None or cached.key != version_key([*ws, *bs, *stats]):
            cached = NumpyMembers.copy_of(ws, bs, stats, self.config.activation)
            self._numpy = cached
        return cached

    def _predict_checked(
        self, obs_t: torch.Tensor, acts: np.ndarray | torch.Tensor | None, normalise: bool
    ) -> np.ndarray:
        """The part of :meth:`predict` after the subclass has checked ``obs``'s shape."""
        acts_t = None
        if acts is not None and self.act_dim:
            acts_t = torch.as_tensor(
                np.asarray(acts, np.float32) if not torch.is_tensor(acts) else acts,
                dtype=torch.float32,
            )
            if acts_t.ndim == 1:
                acts_t = acts_t[:, None]
        out = self.forward_raw(obs_t, acts_t)
        if normalise:
            out = (out - self.out_mean[:, None]) / self.out_std[:, None]
        return out.cpu().numpy()

    def reward(
        self, obs: np.ndarray | torch.Tensor, acts: np.ndarray | torch.Tensor | None = None
    ) -> np.ndarray:
        """The reward for the policy: members normalised independently, averaged, then
        re-standardised with :meth:`fit_reward_stats` (zero mean, unit variance): (batch,)."""
        small = self._small_inputs(obs, acts)
        if small is not None:
            return self._numpy_members().reward(small).astype(np.float32)
        members = self.predict(obs, acts, normalise=True)
        mixed: np.ndarray = (members.mean(0) - float(self.mix_mean)) / float(self.mix_std)
        return mixed

    @torch.no_grad()
    def reward_and_disagreement(
        self, obs: np.ndarray | torch.Tensor, acts: np.ndarray | torch.Tensor | None = None
    ) -> tuple[np.ndarray, np.ndarray]:
        """:meth:`reward` and the members' standard deviation (normalised members, in the
        reward's units: divided by its re-standardising scale), each (batch,). The deviation
        is RUNE's exploration bonus (Liang et al. 2022)."""
        members = self.predict(obs, acts, normalise=True)
        scale = float(self.mix_std)
        return (members.mean(0) - float(self.mix_mean)) / scale, members.std(0) / scale

    @torch.no_grad()
    def fit_reward_stats(self, batch: SegmentBatch) -> None:
        """Re-standardise the policy's reward on the real steps of ``batch`` (recent rollouts)."""
        m = batch.mask.reshape(-1) > 0
        obs = batch.obs.reshape(-1, batch.obs_dim)[m]
        acts = batch.acts.reshape(-1, batch.act_dim)[m] if self.act_dim else None
        mixed = torch.from_numpy(self.predict(obs, acts, normalise=True).mean(0))
        self.mix_mean.copy_(mixed.mean())
        self.mix_std.copy_(mixed.std().clamp_min(1e-6) if mixed.numel() > 1 else torch.ones(()))

    def segment_returns_t(
        self, batch: SegmentBatch, rows: torch.Tensor | None = None
    ) -> torch.Tensor:
        """Differentiable raw returns Σ_t r̂_m of segments (all, or ``rows``): (members, n)."""
        batch = batch.to(self.device)
        obs, acts, mask = batch.obs, batch.acts, batch.mask
        if rows is not None:
            obs, acts, mask = obs[rows], acts[rows], mask[rows]
        r = self.forward_raw(obs, acts if self.act_dim else None)
        return (r * mask).sum(-1)

    @torch.no_grad()
    def segment_returns(self, batch: SegmentBatch, *, normalise: bool = False) -> np.ndarray:
        """Returns of every segment under every member: (members, N)."""
        batch = batch.to(self.device)
        r = self.forward_raw(batch.obs, batch.acts if self.act_dim else None)
        if normalise:
            r = (r - self.out_mean[:, None, None]) / self.out_std[:, None, None]
        return (r * batch.mask).sum(-1).cpu().numpy()

    @torch.no_grad()
    def fit_output_stats(self, batch: SegmentBatch) -> None:
        """Per-member mean/std of raw step rewards over the real steps of ``batch``."""
        batch = batch.to(self.device)
        r = self.forward_raw(batch.obs, batch.acts if self.act_dim else None)  # (M, N, T)
        m = batch.mask > 0
        vals = r[:, m]  # (M, steps)
        self.out_mean.copy_(vals.mean(1))
        self.out_std.copy_(
            vals.std(1).clamp_min(1e-6) if vals.shape[1] > 1 else torch.ones_like(self.out_std)
        )

    # ----- persistence (state_dict + JSON, no pickle of modules) -----------------------------
    def save(self, directory: str | Path) -> None:
        """Write ``reward_config.json`` and ``reward_state.pt`` (a state_dict) to ``directory``."""
        d = Path(directory)
        d.mkdir(parents=True, exist_ok=True)
        meta = {"config": asdict(self.config), "obs_dim": self.obs_dim, "act_dim": self.act_dim}
        (d / "reward_config.json").write_text(json.dumps(meta, indent=2))
        torch.save(cpu_tensors(self.state_dict()), d / "reward_state.pt")  # loads on any device
