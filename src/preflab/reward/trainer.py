"""Fit a reward ensemble on preference labels (Christiano et al. 2017, §2.2).

Each member trains on |D| labels drawn with replacement; the labels it never drew (≈ 1/e of
the data) are its validation set. The loss is the cross-entropy between the soft label and
P' = (1 − ε)·σ(R̂_a − R̂_b) + ε/2, with ε = 0.1 by default (a 10% chance of a uniformly random
answer). Each member's ℓ2 coefficient is adapted after every epoch so that its validation loss
stays between 1.1 and 1.5 × its training loss.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field

import numpy as np
import torch

from preflab.errors import ConfigError, DataError
from preflab.reward.batch import LabelBatch, SegmentBatch
from preflab.reward.ensemble import RewardEnsemble
from preflab.seeding import derive_seed


@dataclass(frozen=True, kw_only=True)
class FitConfig:
    """How the ensemble is fit to labels."""

    epochs: int = 20
    """Passes over each member's bootstrap sample per fit."""
    batch_size: int = 64
    """Labels per gradient step."""
    lr: float = 1e-3
    """Adam learning rate."""
    random_answer: float = 0.1
    """ε: probability that an answer is uniformly random; P' = (1 − ε)·P + ε/2."""
    bootstrap: bool = True
    """Draw each member's |D| training labels with replacement (out-of-bag ≈ 1/e validates)."""
    holdout: float = 1 / math.e
    """Validation fraction when bootstrap is off (the paper's 1/e)."""
    l2_init: float = 1e-3
    """Initial ℓ2 coefficient of every member."""
    adapt_l2: bool = True
    """Adapt ℓ2 to keep validation loss within ``l2_band`` × training loss."""
    l2_band: tuple[float, float] = (1.1, 1.5)
    """Target ratio band of validation to training loss."""
    l2_factor: float = 1.5
    """Multiplicative step of the ℓ2 adaptation."""
    l2_limits: tuple[float, float] = (1e-6, 10.0)
    """Bounds of the ℓ2 coefficient."""
    min_steps: int = 0
    """Minimum gradient steps per fit (useful while labels are few)."""
    max_steps: int = 100_000
    """Cap on gradient steps per fit."""

    def __post_init__(self) -> None:
        if self.epochs < 1 or self.batch_size < 1:
            raise ConfigError(f"epochs and batch_size must be ≥ 1, got {self.epochs}, {self.batch_size}")
        if not 0.0 <= self.random_answer < 1.0:
            raise ConfigError(f"random_answer must be in [0, 1), got {self.random_answer}")
        if not 0.0 < self.holdout < 1.0:
            raise ConfigError(f"holdout must be in (0, 1), got {self.holdout}")
        if not 0 < self.l2_band[0] < self.l2_band[1]:
            raise ConfigError(f"l2_band must be (low, high) with 0 < low < high, got {self.l2_band}")
        if self.lr <= 0:
            raise ConfigError(f"lr must be > 0, got {self.lr}")


@dataclass
class FitReport:
    """What a fit did, per member."""

    train_loss: list[float] = field(default_factory=list)
    val_loss: list[float] = field(default_factory=list)
    l2: list[float] = field(default_factory=list)
    steps: int = 0
    n_labels: int = 0


def preference_loss(
    ret_a: torch.Tensor, ret_b: torch.Tensor, p: torch.Tensor, weight: torch.Tensor, random_answer: float
) -> torch.Tensor:
    """Weighted soft cross-entropy of Bradley–Terry with a random-answer floor; per member.

    ``ret_a``/``ret_b`` are (members, L); returns (members,).
    """
    logit = ret_a - ret_b
    if random_answer > 0:
        eps = random_answer
        # log P' = log((1-ε)σ(x) + ε/2), computed stably in log space
        log_pa = torch.logaddexp(math.log1p(-eps) + torch.nn.functional.logsigmoid(logit), torch.tensor(math.log(eps / 2)))
        log_pb = torch.logaddexp(math.log1p(-eps) + torch.nn.functional.logsigmoid(-logit), torch.tensor(math.log(eps / 2)))
    else:
        log_pa = torch.nn.functional.logsigmoid(logit)
        log_pb = torch.nn.functional.logsigmoid(-logit)
    ce = -(p * log_pa + (1 - p) * log_pb)
    return (ce * weight).sum(-1) / weight.sum().clamp_min(1e-12)


class RewardTrainer:
    """Fits a :class:`RewardEnsemble`; keeps each member's ℓ2 coefficient between fits."""

    def __init__(self, ensemble: RewardEnsemble, config: FitConfig | None = None) -> None:
        self.ensemble = ensemble
        self.config = config or FitConfig()
        m = ensemble.n_members
        self.l2 = [self.config.l2_init] * m
        # ℓ2 on weights (not biases) as coupled weight decay: the gradient of l2·‖w‖² is 2·l2·w
        self.optimizers = [
            torch.optim.Adam(
                [{"params": [p for n, p in mem.named_parameters() if n.endswith("weight")], "weight_decay": 0.0},
                 {"params": [p for n, p in mem.named_parameters() if not n.endswith("weight")], "weight_decay": 0.0}],
                lr=self.config.lr)
            for mem in ensemble.members
        ]
        self._sync_l2()

    def set_l2(self, values: list[float]) -> None:
        """Restore ℓ2 coefficients (e.g. from a checkpoint)."""
        self.l2 = [float(v) for v in values]
        self._sync_l2()

    def _sync_l2(self) -> None:
        for opt, l2 in zip(self.optimizers, self.l2, strict=True):
            opt.param_groups[0]["weight_decay"] = 2.0 * l2

    def _split(self, n: int, rng: np.random.Generator) -> list[tuple[np.ndarray, np.ndarray]]:
        out = []
        for _ in range(self.ensemble.n_members):
            if self.config.bootstrap:
                train = rng.integers(0, n, size=n)
                val = np.setdiff1d(np.arange(n), train)
            else:
                perm = rng.permutation(n)
                k = max(1, int(round(self.config.holdout * n))) if n > 1 else 0
                val, train = perm[:k], perm[k:]
            if val.size == 0:  # tiny data: validate on the training labels
                val = np.unique(train)
            out.append((train, val))
        return out

    def fit(self, segments: SegmentBatch, labels: LabelBatch, rng: np.random.Generator,
            *, epochs: int | None = None) -> FitReport:
        """Fit every member on its own bootstrap sample of ``labels``; update normalisation."""
        n = len(labels)
        if n == 0:
            raise DataError("no labels to fit the reward model on; collect judgements first")
        if int(labels.a.max()) >= len(segments) or int(labels.b.max()) >= len(segments):
            raise DataError("labels refer to rows beyond the segment batch")
        cfg = self.config
        ens = self.ensemble
        ens.fit_input_stats(segments)
        splits = self._split(n, rng)
        n_epochs = epochs or cfg.epochs
        steps_per_epoch = max(1, math.ceil(n / cfg.batch_size))
        n_epochs = max(n_epochs, math.ceil(cfg.min_steps / steps_per_epoch))
        n_epochs = min(n_epochs, max(1, cfg.max_steps // steps_per_epoch))
        gen = torch.Generator().manual_seed(derive_seed(rng))
        report = FitReport(n_labels=n)
        ens.train()
        for _epoch in range(n_epochs):
            for m, (train_idx, _val) in enumerate(splits):
                member = ens.members[m]
                opt = self.optimizers[m]
                order = torch.from_numpy(train_idx)[torch.randperm(len(train_idx), generator=gen)]
                for start in range(0, len(order), cfg.batch_size):
                    idx = order[start : start + cfg.batch_size]
                    rows = torch.cat([labels.a[idx], labels.b[idx]])
                    x = ens._inputs(segments.obs[rows], segments.acts[rows] if ens.act_dim else None)
                    r = (member(x).squeeze(-1) * segments.mask[rows]).sum(-1)
                    k = len(idx)
                    loss = preference_loss(r[None, :k], r[None, k:], labels.p[idx], labels.weight[idx],
                                           cfg.random_answer)[0]
                    opt.zero_grad(set_to_none=True)
                    loss.backward()
                    opt.step()
                    report.steps += 1
            if cfg.adapt_l2:
                self._adapt_l2(segments, labels, splits)
        ens.eval()
        tr, va = self.losses(segments, labels, splits)
        report.train_loss, report.val_loss, report.l2 = tr, va, list(self.l2)
        ens.fit_output_stats(segments)
        return report

    @torch.no_grad()
    def losses(self, segments: SegmentBatch, labels: LabelBatch,
               splits: list[tuple[np.ndarray, np.ndarray]]) -> tuple[list[float], list[float]]:
        """Unregularised train and validation loss of each member on its split."""
        was_training = self.ensemble.training
        self.ensemble.eval()
        ret = self.ensemble.segment_returns_t(segments)  # (M, N)
        ra, rb = ret[:, labels.a], ret[:, labels.b]
        per = preference_loss_elementwise(ra, rb, labels.p, self.config.random_answer)
        tr, va = [], []
        for m, (t, v) in enumerate(splits):
            w = labels.weight
            tr.append(float((per[m, t] * w[t]).sum() / w[t].sum().clamp_min(1e-12)))
            va.append(float((per[m, v] * w[v]).sum() / w[v].sum().clamp_min(1e-12)))
        self.ensemble.train(was_training)
        return tr, va

    def _adapt_l2(self, segments: SegmentBatch, labels: LabelBatch,
                  splits: list[tuple[np.ndarray, np.ndarray]]) -> None:
        tr, va = self.losses(segments, labels, splits)
        lo, hi = self.config.l2_band
        lmin, lmax = self.config.l2_limits
        for m in range(self.ensemble.n_members):
            ratio = va[m] / max(tr[m], 1e-8)
            if ratio > hi:
                self.l2[m] = min(lmax, self.l2[m] * self.config.l2_factor)
            elif ratio < lo:
                self.l2[m] = max(lmin, self.l2[m] / self.config.l2_factor)
        self._sync_l2()


def preference_loss_elementwise(ret_a: torch.Tensor, ret_b: torch.Tensor, p: torch.Tensor,
                                random_answer: float) -> torch.Tensor:
    """Per-label cross-entropy of :func:`preference_loss`: (members, L)."""
    return preference_loss(ret_a[..., None], ret_b[..., None], p[:, None], torch.ones(1), random_answer)
