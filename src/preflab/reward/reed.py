"""REED's dynamics-aware pre-training of the reward model (Metcalf et al., CoRL 2023, "Rewards
Encoding Environment Dynamics"): before every reward fit, the layers of each reward member that
encode a state-action pair are trained, without labels, to predict a representation of the next
state, on transitions (s, a, s') the agent has seen; the preference fit then starts from them.

For member m with hidden layers φ_m (all but the reward's output layer) and first layer
x ↦ W₀x + b₀ on the standardised input x = [s̃; ã]:

* the state-action representation is h = φ_m(s̃, ã) (the last hidden layer);
* the next state's representation is the first layer's state part, z = σ(W₀ˢ s̃' + b₀) (σ the
  member's activation, W₀ˢ the columns of W₀ that read the state): it plays REED's state encoder,
  which its reward model shares with the representation network;
* a predictor P (linear, hidden width → first-layer width) and a projector Q (linear, first-layer
  width → ``projection``) give u_i = Q(P(h_i)) and v_i = Q(z_i), v computed without gradient
  (REED's stop-gradient on the target side);
* the loss is REED's contrastive variant, SimCLR's NT-Xent over the 2B vectors of a minibatch of
  B transitions: with û = u/‖u‖ and cos the dot product of normalised vectors,
  ℓ_i = −ln( exp(cos(w_i, w_i⁺)/τ) / Σ_{k ≠ i} exp(cos(w_i, w_k)/τ) ) over w = (u_1..u_B, v_1..v_B),
  w_i⁺ its partner (u_i ↔ v_i), averaged over the 2B vectors and summed over members.

Only the hidden layers and the two heads move (REED's representation network has no reward
output); the reward's output layer keeps its weights. Each member draws its own minibatches. The
optimiser (SGD by default, REED's) is new for every pre-training phase, as REED builds a new
trainer before every reward update; the heads P and Q carry from fit to fit and are in every
checkpoint (:meth:`preflab.reward.trainer.RewardTrainer.reed_state`).

Where PrefLab differs from the authors' code (``reed/algorithms/reed.py``,
``next_state_representation_consistency.py``): REED's reward network has separate state and
action encoders before a fused trunk, while PrefLab's member reads [s; a] in one first layer, so
the next state is encoded by that layer's state columns (the action's columns left out, i.e. the
mean action of the standardised inputs); REED trains 20 epochs over 80 % of the replay buffer in
minibatches of 12 before each update (walker_walk, cheetah_run), PrefLab ``steps`` minibatches of
``batch_size`` drawn with replacement (the authors' budget is far beyond 2 CPU cores); the
projection width is a setting (REED ties it to its 20-wide state embedding on walker, 17 on
cheetah); dropout is not applied during pre-training.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Literal

import numpy as np
import torch
from torch import nn

from preflab.errors import ConfigError, DataError
from preflab.reward.batch import SegmentBatch
from preflab.reward.ensemble import RewardEnsemble


@dataclass(frozen=True, kw_only=True)
class ReedConfig:
    """REED's self-supervised dynamics pre-training before every reward fit (off by default).
    Defaults are the authors' walker_walk/cheetah_run settings where PrefLab can follow them."""

    on: bool = False
    """Pre-train the reward members' hidden layers to predict the next state's representation
    before every reward fit (REED, contrastive variant). Off: the fit starts from the last fit's
    weights as always."""
    steps: int = 1000
    """Minibatch steps per pre-training phase (REED: 20 epochs over the replay buffer in batches
    of 12, far more; see docs/guide/frontier-methods.md)."""
    batch_size: int = 128
    """Transitions per member per step; NT-Xent's negatives are the other 2·batch − 2 vectors
    (REED: 12)."""
    lr: float = 1e-3
    """Learning rate of the pre-training optimiser (REED: 1e-3)."""
    optimizer: Literal["sgd", "adam"] = "sgd"
    """'sgd' (REED's) or 'adam'; a new one for every pre-training phase, as in REED."""
    temperature: float = 0.5
    """τ of the NT-Xent loss (REED: 0.5)."""
    projection: int = 20
    """Width of the projection both representations are compared in (REED: 20 on walker_walk,
    17 on cheetah_run, the width of its state embedding)."""
    data: Literal["replay", "segments"] = "replay"
    """Where the transitions come from: 'replay' = an off-policy agent's replay buffer (REED's),
    'segments' = consecutive steps of the pool's recent segments (any agent)."""

    def __post_init__(self) -> None:
        if self.steps < 1 or self.batch_size < 2 or self.projection < 1:
            raise ConfigError(
                f"fit.reed needs steps ≥ 1, batch_size ≥ 2 (NT-Xent needs negatives) and "
                f"projection ≥ 1, got {self.steps}, {self.batch_size}, {self.projection}"
            )
        if not (math.isfinite(self.lr) and self.lr > 0):
            raise ConfigError(f"fit.reed.lr must be > 0 (REED: 1e-3), got {self.lr}")
        if not (math.isfinite(self.temperature) and self.temperature > 0):
            raise ConfigError(
                f"fit.reed.temperature must be > 0 (REED: 0.5), got {self.temperature}"
            )
        if self.optimizer not in ("sgd", "adam"):
            raise ConfigError(f"fit.reed.optimizer must be 'sgd' or 'adam', got {self.optimizer!r}")
        if self.data not in ("replay", "segments"):
            raise ConfigError(f"fit.reed.data must be 'replay' or 'segments', got {self.data!r}")


def nt_xent(u: torch.Tensor, v: torch.Tensor, temperature: float) -> torch.Tensor:
    """SimCLR's NT-Xent loss of paired vectors ``u`` and ``v`` (..., B, K): the mean over the 2B
    vectors w of −ln softmax over the other 2B − 1 vectors of cos(w, ·)/τ, taken at w's partner;
    returns the leading shape (one loss per member)."""
    b = u.shape[-2]
    w = nn.functional.normalize(torch.cat([u, v], dim=-2), dim=-1)  # (..., 2B, K)
    sim = w @ w.transpose(-1, -2) / temperature
    eye = torch.eye(2 * b, dtype=torch.bool, device=w.device)
    sim = sim.masked_fill(eye, float("-inf"))
    partner = torch.cat([torch.arange(b, 2 * b), torch.arange(0, b)]).to(w.device)
    log_p = torch.log_softmax(sim, dim=-1)  # (..., 2B, 2B)
    picked = log_p.gather(-1, partner.expand(*log_p.shape[:-2], -1)[..., None])[..., 0]
    return -picked.mean(-1)


def segment_transitions(batch: SegmentBatch) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Every (s_t, a_t, s_{t+1}) of consecutive real steps of flat-observation segments:
    observations (N, D), actions (N, A), next observations (N, D)."""
    if batch.obs.ndim != 3:
        raise DataError("REED's pre-training needs flat observations, not images")
    both = (batch.mask[:, :-1] > 0) & (batch.mask[:, 1:] > 0)
    obs = batch.obs[:, :-1][both]
    return (
        obs.cpu().numpy(),
        batch.acts[:, :-1][both].cpu().numpy(),
        batch.obs[:, 1:][both].cpu().numpy(),
    )


class ReedHeads(nn.Module):
    """REED's predictor P and projector Q of every member, stacked like the ensemble's layers:
    P_m: hidden width → first-layer width, Q_m: first-layer width → projection."""

    def __init__(
        self, ensemble: RewardEnsemble, projection: int, gen: torch.Generator | None = None
    ) -> None:
        super().__init__()
        check_reed_ensemble(ensemble)
        m = ensemble.n_members
        h_last, h_first = ensemble.config.hidden[-1], ensemble.config.hidden[0]
        self.pred_w = nn.Parameter(_uniform((m, h_last, h_first), h_last, gen))
        self.pred_b = nn.Parameter(_uniform((m, 1, h_first), h_last, gen))
        self.proj_w = nn.Parameter(_uniform((m, h_first, projection), h_first, gen))
        self.proj_b = nn.Parameter(_uniform((m, 1, projection), h_first, gen))
        self.to(ensemble.device)

    def predicted(self, h: torch.Tensor) -> torch.Tensor:
        """u = Q(P(h)) of state-action representations h (M, B, hidden width): (M, B, K)."""
        return self.projected(torch.baddbmm(self.pred_b, h, self.pred_w))

    def projected(self, z: torch.Tensor) -> torch.Tensor:
        """Q(z) of next-state representations z (M, B, first-layer width): (M, B, K)."""
        return torch.baddbmm(self.proj_b, z, self.proj_w)


def _uniform(shape: tuple[int, ...], fan_in: int, gen: torch.Generator | None) -> torch.Tensor:
    """nn.Linear's initialisation, U(±1/√fan_in)."""
    bound = 1.0 / math.sqrt(max(fan_in, 1))
    return (torch.rand(shape, generator=gen) * 2 - 1) * bound


def check_reed_ensemble(ensemble: RewardEnsemble) -> None:
    """A ConfigError unless ``ensemble`` is an MLP with hidden layers on raw inputs (REED's
    layers map onto it; see the module docstring)."""
    from preflab.reward.cnn import ConvRewardEnsemble

    c = ensemble.config
    if isinstance(ensemble, ConvRewardEnsemble) or not c.hidden or c.abs_inputs:
        raise ConfigError(
            "fit.reed needs an MLP reward model with hidden layers on raw inputs (reward.kind "
            "'mlp', reward.hidden not empty, no reward.abs_inputs); turn fit.reed.on off or "
            "change the reward model"
        )


def reed_losses(
    ensemble: RewardEnsemble,
    heads: ReedHeads,
    obs: torch.Tensor,
    acts: torch.Tensor,
    next_obs: torch.Tensor,
    temperature: float,
) -> torch.Tensor:
    """Each member's NT-Xent loss (M,) on its own transitions ``obs``, ``acts``, ``next_obs``
    (M, B, ·), differentiable in the hidden layers and the heads (the target side is not)."""
    h = ensemble.hidden_features(obs, acts)  # (M, B, H_last)
    u = heads.predicted(h)
    with torch.no_grad():
        v = heads.projected(ensemble.state_features(next_obs))
    return nt_xent(u, v, temperature)


def reed_pretrain(
    ensemble: RewardEnsemble,
    heads: ReedHeads,
    obs: np.ndarray,
    acts: np.ndarray,
    next_obs: np.ndarray,
    config: ReedConfig,
    gen: torch.Generator,
) -> list[float]:
    """``config.steps`` steps of REED's loss on transitions (``obs`` (N, D), ``acts`` (N, A),
    ``next_obs`` (N, D)), every member its own minibatch of ``config.batch_size`` drawn with
    replacement; the ensemble's input standardisation must already be set (the fit's). Returns
    the loss of each step (the members' mean)."""
    n = len(obs)
    if n < 2 or len(acts) != n or len(next_obs) != n:
        raise DataError(
            f"REED's pre-training needs as many observations, actions and next observations, at "
            f"least 2; got {len(obs)}, {len(acts)}, {len(next_obs)}"
        )
    dev = ensemble.device
    o = torch.as_tensor(obs, dtype=torch.float32).reshape(n, -1)
    a = torch.as_tensor(acts, dtype=torch.float32).reshape(n, -1)
    o2 = torch.as_tensor(next_obs, dtype=torch.float32).reshape(n, -1)
    trained = [*list(ensemble.weights)[:-1], *list(ensemble.biases)[:-1], *heads.parameters()]
    opt: torch.optim.Optimizer = (
        torch.optim.SGD(trained, lr=config.lr)
        if config.optimizer == "sgd"
        else torch.optim.Adam(trained, lr=config.lr)
    )
    m = ensemble.n_members
    was_training = ensemble.training
    ensemble.train()
    losses = []
    for _ in range(config.steps):
        idx = torch.randint(0, n, (m, config.batch_size), generator=gen)
        loss = reed_losses(
            ensemble, heads, o[idx].to(dev), a[idx].to(dev), o2[idx].to(dev), config.temperature
        ).sum()
        opt.zero_grad(set_to_none=True)
        loss.backward()
        opt.step()
        losses.append(float(loss.detach()) / m)
    ensemble.zero_grad(set_to_none=True)  # the fit's optimiser sees none of these gradients
    ensemble.train(was_training)
    return losses
