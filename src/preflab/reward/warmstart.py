"""RIME's warm start (Cheng et al., ICML 2024, §4.2): before its first preference fit the reward
model is fitted to the intrinsic reward of PEBBLE's unsupervised pre-training, so that it starts
where the agent's reward has been (the state-entropy reward it explored with) instead of from
random weights, and the switch from intrinsic to learned reward does not throw the agent's value
estimates away.

The target of a transition is its k-NN state-entropy reward standardised over the pre-training's
transitions and divided by its largest magnitude, z = (d − mean d)/max|d − mean d|, in [−1, 1] as
the authors' code scales it; each member's per-step reward is fitted to it by mean squared error
(summed over members, one minibatch shared by all), with the reward fit's own optimiser.

Where PrefLab differs: the authors fit 5 minibatches of 1,024 after every pre-training step,
while the agent explores (45,000 steps on DMC); PrefLab fits ``steps`` minibatches once, when
pre-training has ended, on the whole replay buffer's transitions. The model's input
standardisation is set on those transitions; the preference fit then re-standardises on the
labelled segments, as every fit does.
"""

from __future__ import annotations

import numpy as np
import torch

from preflab.errors import DataError
from preflab.reward.batch import SegmentBatch
from preflab.reward.ensemble import RewardEnsemble
from preflab.reward.trainer import member_step_rewards


def intrinsic_targets(distances: np.ndarray) -> np.ndarray:
    """RIME's scaling of intrinsic rewards: (d − mean d) / max|d − mean d| (all 0 when every d
    is equal)."""
    d = np.asarray(distances, np.float64)
    centred = d - d.mean()
    top = float(np.abs(centred).max()) if d.size else 0.0
    return (centred / top if top > 0 else np.zeros_like(d)).astype(np.float32)


def warm_start(
    ensemble: RewardEnsemble,
    optimizer: torch.optim.Optimizer,
    obs: np.ndarray,
    acts: np.ndarray,
    target: np.ndarray,
    *,
    steps: int,
    batch_size: int,
    gen: torch.Generator,
) -> list[float]:
    """Fit every member's per-step reward on transitions (``obs`` (N, D), ``acts`` (N, A)) to
    ``target`` (N,) by ``steps`` Adam steps of summed mean squared error on shared minibatches;
    the loss of each step (summed over members)."""
    n = len(target)
    if n == 0 or len(obs) != n or len(acts) != n:
        raise DataError(
            f"warm start needs as many observations, actions and targets, at least one; got "
            f"{len(obs)}, {len(acts)}, {n}"
        )
    batch = SegmentBatch(
        ids=tuple(str(i) for i in range(n)),
        obs=torch.as_tensor(obs, dtype=torch.float32)[:, None, :],
        acts=torch.as_tensor(acts, dtype=torch.float32)[:, None, :],
        mask=torch.ones(n, 1),
    ).to(ensemble.device)  # the fit runs where the model is (no-op moves on the CPU)
    ensemble.fit_input_stats(batch)
    goal = torch.as_tensor(target, dtype=torch.float32).to(ensemble.device)
    m = ensemble.n_members
    was_training = ensemble.training
    ensemble.train()
    losses = []
    for _ in range(steps):
        idx = torch.randint(0, n, (min(batch_size, n),), generator=gen).to(ensemble.device)
        rows = idx[None, :].expand(m, -1)
        r = member_step_rewards(ensemble, batch, rows)[..., 0]  # (M, B)
        loss = ((r - goal[idx][None, :]) ** 2).mean(-1).sum()
        optimizer.zero_grad(set_to_none=True)
        loss.backward()
        optimizer.step()
        losses.append(float(loss.detach()))
    ensemble.train(was_training)
    return losses
