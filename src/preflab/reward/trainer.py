"""Fit a reward ensemble on preference labels (Christiano et al. 2017, §2.2).

Each member trains on |D| labels drawn with replacement; the labels it never drew (≈ 1/e of
the data) are its validation set. The loss is the cross-entropy between the soft label and
P' = (1 − ε)·σ(R̂_a − R̂_b) + ε/2, with ε = 0.1 by default (a 10% chance of a uniformly random
answer). Each member's ℓ2 coefficient is adapted after every epoch so that its validation loss
stays between 1.1 and 1.5 × its training loss.

Two options from SURF (Park et al. 2022), both off by default:

* **Pseudo-labels** (``semi_ratio`` μ > 0): every gradient step also draws μ·B random pairs of
  unlabelled segments (the loop's recent pool); each member labels a pair with its own
  prediction, 1[P(a ≻ b) ≥ 0.5], and the pairs it is confident about, max(P, 1 − P) ≥ τ
  (``semi_threshold``), add λ (``semi_weight``) × their cross-entropy, averaged over all μ·B
  pairs as SURF does. The pseudo-label is predicted on the whole segments.
* **Temporal cropping** (``crop`` c > 0): every pair in a step (labelled and unlabelled) draws
  one window length L − U{0..c} (L the pair's shorter valid length), shared by both sides as
  in SURF's ``get_cropping_mask``; each side is summed over a window of that length at a
  random start of its own. SURF samples segments c steps longer at both ends and crops
  lengths L ± c around the labelled middle; PrefLab's segments are the labelled ones, so the
  windows lie inside them.

Both draw from the fit's own generator, so a fit is reproducible from the RNG it is given.

RIME's robust fit (Cheng et al. 2024; ``rime``, off by default): before every epoch the labels
the ensemble finds implausible sit the epoch out and those it confidently contradicts are
flipped (:mod:`preflab.reward.robust`); its statistics carry from fit to fit.

REED's dynamics-aware pre-training (Metcalf et al. 2023; ``reed``, off by default): before a fit
the caller may train the members' hidden layers to predict the next state's representation
(:meth:`RewardTrainer.reed_pretrain`, :mod:`preflab.reward.reed`); its heads carry from fit to
fit.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field, replace
from typing import Any

import numpy as np
import torch

from preflab.errors import ConfigError, DataError
from preflab.reward.batch import LabelBatch, SegmentBatch
from preflab.reward.ensemble import RewardEnsemble
from preflab.reward.qpa_crops import SnippetConfig, snippet_pairs
from preflab.reward.reed import ReedConfig, ReedHeads, check_reed_ensemble, reed_pretrain
from preflab.reward.robust import RimeConfig, RimeFilter
from preflab.seeding import derive_seed


@dataclass(frozen=True, kw_only=True)
class FitConfig:
    """How the ensemble is fit to labels."""

    epochs: int = 10
    """Passes over each member's bootstrap sample per fit (later fits are warm-started)."""
    batch_size: int = 64
    """Labels per gradient step."""
    lr: float = 1e-3
    """Adam learning rate."""
    random_answer: float = 0.1
    """ε: probability that an answer is uniformly random; P' = (1 − ε)·P + ε/2. It does not
    bound the scale: on a hard label the loss still falls as the logit grows."""
    label_smoothing: float = 0.0
    """s: every target p becomes s + (1 − 2s)·p, so a hard label 1 asks for P = 1 − s and
    the Bradley–Terry optimum of a consistent pair is the finite logit log((1 − s)/s)
    (bounds the score scale under exact 0/1 labels). 0 = targets as given."""
    bootstrap: bool = True
    """Draw each member's |D| training labels with replacement (out-of-bag ≈ 1/e validates)."""
    holdout: float = 1 / math.e
    """Validation fraction when bootstrap is off (Christiano et al. 2017 use 1/e); 0 trains on every label
    (validation then uses the training labels, so turn adapt_l2 off)."""
    l2_init: float = 1e-3
    """Initial ℓ2 coefficient of every member."""
    adapt_l2: bool = True
    """Adapt ℓ2 to keep validation loss within ``l2_band`` × training loss (about five times a
    fit; both losses of the model as it is then, in eval mode on whole segments)."""
    l2_band: tuple[float, float] = (1.1, 1.5)
    """Target ratio band of validation to training loss."""
    l2_factor: float = 1.5
    """Multiplicative step of the ℓ2 adaptation."""
    l2_limits: tuple[float, float] = (1e-6, 1.0)
    """Bounds of the ℓ2 coefficient."""
    min_steps: int = 50
    """Minimum gradient steps per fit (while labels are few, epochs alone are too few steps)."""
    warm_min_steps: int | None = None
    """Minimum gradient steps of a warm fit, one that continues from the previous fit's weights
    (``fit(..., warm=True)``; the loop's every fit after the first). None = ``min_steps``;
    0 = ``epochs`` passes only: a warm model already fits all but the newest labels, and the
    floor is then most of a round's fit (PPO rounds every two rollouts)."""
    max_steps: int = 100_000
    """Cap on gradient steps per fit."""
    stop_accuracy: float | None = None
    """B-Pref's early stop: the fit ends after the first epoch in which the members' training
    accuracy, averaged over members, is above this (B-Pref and PEBBLE: 0.97), even before
    ``epochs`` or the step floor. A label counts as right when the member's predicted
    preference takes its side; an equal answer (p = 0.5) never does. B-Pref's code counts an
    equal label right when the member prefers the first segment (its ``argmax`` against a 0.5
    target; ``reward_model.py``), about half of them, so with equal labels B-Pref stops a little
    sooner. None = off."""
    semi_ratio: int = 0
    """SURF's μ: unlabelled pairs (random pairs of recent segments) pseudo-labelled per
    labelled pair in every gradient step. 0 = off."""
    semi_threshold: float = 0.95
    """SURF's τ: a member pseudo-labels an unlabelled pair only when its predicted P(a ≻ b)
    or 1 − P is at least τ."""
    semi_weight: float = 1.0
    """SURF's λ: weight of the pseudo-label loss beside the labelled loss."""
    crop: int = 0
    """SURF's temporal cropping: each pair in a step draws one window length L − U{0..crop}
    (L its shorter valid length), shared by both sides; each side is summed over a window of
    that length at a random start of its own. 0 = off."""
    snippets: SnippetConfig = field(default_factory=SnippetConfig)
    """QPA's data augmentation: each labelled pair of a step counts as ``copies`` pairs of
    random equally long snippets (:mod:`preflab.reward.qpa_crops`; QPA: 20). Off by default."""
    rime: RimeConfig = field(default_factory=RimeConfig)
    """RIME's robust fit: before every epoch, labels whose KL divergence from the ensemble's
    prediction is above a decaying lower bound sit the epoch out and those above an upper bound
    are flipped (``--fit.rime.on``; docs/guide/robust-fit.md). Off by default."""
    reed: ReedConfig = field(default_factory=ReedConfig)
    """REED's dynamics-aware pre-training: before every fit the members' hidden layers learn to
    predict the next state's representation on the agent's transitions (``--fit.reed.on``;
    docs/guide/frontier-methods.md). Off by default."""

    def __post_init__(self) -> None:
        if self.epochs < 1 or self.batch_size < 1:
            raise ConfigError(
                f"epochs and batch_size must be ≥ 1, got {self.epochs}, {self.batch_size}"
            )
        if not 0.0 <= self.random_answer < 1.0:
            raise ConfigError(f"random_answer must be in [0, 1), got {self.random_answer}")
        if not 0.0 <= self.label_smoothing < 0.5:
            raise ConfigError(
                f"label_smoothing must be in [0, 0.5) (0 = off), got {self.label_smoothing}"
            )
        if not 0.0 <= self.holdout < 1.0:
            raise ConfigError(f"holdout must be in [0, 1), got {self.holdout}")
        if self.holdout == 0.0 and not self.bootstrap and self.adapt_l2:
            raise ConfigError(
                "holdout=0 (train on every label) leaves no validation set for adapt_l2; "
                "add --fit.no-adapt-l2 or set --fit.holdout above 0"
            )
        if not 0 < self.l2_band[0] < self.l2_band[1]:
            raise ConfigError(
                f"l2_band must be (low, high) with 0 < low < high, got {self.l2_band}"
            )
        if self.lr <= 0:
            raise ConfigError(f"lr must be > 0, got {self.lr}")
        if self.semi_ratio < 0 or self.crop < 0:
            raise ConfigError(
                f"semi_ratio and crop must be ≥ 0 (0 = off), got {self.semi_ratio}, {self.crop}"
            )
        if self.crop and self.snippets.copies:
            raise ConfigError(
                "fit.crop (SURF's crops) and fit.snippets.copies (QPA's) both crop the labelled "
                "pairs; turn one of them off"
            )
        if not 0.5 <= self.semi_threshold < 1.0:
            raise ConfigError(
                f"semi_threshold τ must be in [0.5, 1) (SURF uses 0.95), got {self.semi_threshold}"
            )
        if not (math.isfinite(self.semi_weight) and self.semi_weight >= 0):
            raise ConfigError(f"semi_weight λ must be finite and ≥ 0, got {self.semi_weight}")
        if self.stop_accuracy is not None and not 0.0 < self.stop_accuracy < 1.0:
            raise ConfigError(
                f"stop_accuracy must be in (0, 1) (B-Pref uses 0.97) or unset, got "
                f"{self.stop_accuracy}"
            )
        if self.min_steps < 0 or (self.warm_min_steps is not None and self.warm_min_steps < 0):
            raise ConfigError(
                f"min_steps and warm_min_steps must be ≥ 0 (warm_min_steps may be None = "
                f"min_steps), got {self.min_steps}, {self.warm_min_steps}"
            )


@dataclass
class FitReport:
    """What a fit did, per member."""

    train_loss: list[float] = field(default_factory=list)
    val_loss: list[float] = field(default_factory=list)
    l2: list[float] = field(default_factory=list)
    steps: int = 0
    epochs: int = 0
    """Epochs run (fewer than planned when ``stop_accuracy`` ended the fit)."""
    n_labels: int = 0
    pseudo_share: float | None = None
    """With pseudo-labels: the share of unlabelled pairs confident enough to be used (over
    every member and step); None when off."""
    rime_trusted: float | None = None
    """With RIME: the share of labels trusted as given in the fit's last epoch; None when off."""
    rime_flipped: float | None = None
    """With RIME: the share of labels flipped in the fit's last epoch; None when off."""


def preference_loss(
    ret_a: torch.Tensor,
    ret_b: torch.Tensor,
    p: torch.Tensor,
    weight: torch.Tensor,
    random_answer: float,
) -> torch.Tensor:
    """Weighted soft cross-entropy of Bradley–Terry with a random-answer floor; per member.

    ``ret_a``/``ret_b`` are (members, L); returns (members,).
    """
    logit = ret_a - ret_b
    if random_answer > 0:
        eps = random_answer
        # log P' = log((1-ε)σ(x) + ε/2), computed stably in log space
        log_pa = torch.logaddexp(
            math.log1p(-eps) + torch.nn.functional.logsigmoid(logit),
            torch.tensor(math.log(eps / 2)),
        )
        log_pb = torch.logaddexp(
            math.log1p(-eps) + torch.nn.functional.logsigmoid(-logit),
            torch.tensor(math.log(eps / 2)),
        )
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
        # One Adam over the stacked members: Adam is elementwise, so members stay independent.
        self.optimizer = torch.optim.Adam(ensemble.parameters(), lr=self.config.lr, fused=True)
        self.rime = RimeFilter(self.config.rime) if self.config.rime.on else None
        """RIME's label filter and its statistics (None when off); in every checkpoint."""
        if self.config.reed.on:
            check_reed_ensemble(ensemble)
        self.reed: ReedHeads | None = None
        """REED's predictor and projector heads, made at the first pre-training (None before,
        and when off); in every checkpoint."""

    def set_l2(self, values: list[float]) -> None:
        """Restore ℓ2 coefficients (e.g. from a checkpoint)."""
        self.l2 = [float(v) for v in values]

    def _split(self, n: int, rng: np.random.Generator) -> list[tuple[np.ndarray, np.ndarray]]:
        out = []
        for _ in range(self.ensemble.n_members):
            if self.config.bootstrap:
                train = rng.integers(0, n, size=n)
                val = np.setdiff1d(np.arange(n), train)
            else:
                perm = rng.permutation(n)
                h = self.config.holdout
                k = max(1, round(h * n)) if n > 1 and h > 0 else 0
                val, train = perm[:k], perm[k:]
            if val.size == 0:  # tiny data: validate on the training labels
                val = np.unique(train)
            out.append((train, val))
        return out

    def fit(
        self,
        segments: SegmentBatch,
        labels: LabelBatch,
        rng: np.random.Generator,
        *,
        epochs: int | None = None,
        warm: bool = False,
        unlabelled: SegmentBatch | None = None,
    ) -> FitReport:
        """Fit every member on its own bootstrap sample of ``labels``; update normalisation.

        ``warm``: the members continue from an earlier fit, so the step floor is
        ``warm_min_steps`` (when set) instead of ``min_steps``. ``unlabelled``: the segments
        SURF's pseudo-labelled pairs are drawn from (needed when ``semi_ratio`` > 0)."""
        n = len(labels)
        if n == 0:
            raise DataError("no labels to fit the reward model on; collect judgements first")
        semi = self.config.semi_ratio > 0
        if semi and (unlabelled is None or len(unlabelled) < 2):
            raise DataError(
                "fit.semi_ratio > 0 (SURF's pseudo-labels) needs at least 2 unlabelled segments "
                "to pair; pass unlabelled=SegmentBatch.from_segments(recent segments)"
            )
        if int(labels.a.max()) >= len(segments) or int(labels.b.max()) >= len(segments):
            raise DataError("labels refer to rows beyond the segment batch")
        dev = self.ensemble.device  # the fit runs where the model is (no-op moves on the CPU)
        segments, labels = segments.to(dev), labels.to(dev)
        unlabelled = None if unlabelled is None else unlabelled.to(dev)
        cfg = self.config
        ens = self.ensemble
        labels = self.targets(labels)
        ens.fit_input_stats(segments)
        splits = self._split(n, rng)
        n_epochs = epochs or cfg.epochs
        steps_per_epoch = max(1, math.ceil(n / cfg.batch_size))
        floor = cfg.min_steps if not warm or cfg.warm_min_steps is None else cfg.warm_min_steps
        n_epochs = max(n_epochs, math.ceil(floor / steps_per_epoch))
        n_epochs = min(n_epochs, max(1, cfg.max_steps // steps_per_epoch))
        gen = torch.Generator().manual_seed(derive_seed(rng))
        report = FitReport(n_labels=n)
        train_idx = torch.from_numpy(np.stack([t for t, _v in splits]))  # (M, n_train), equal sizes
        ens.train()
        adapt_every = max(1, n_epochs // 5)  # about five ℓ2 adjustments per fit
        confident, drawn = 0, 0
        for epoch in range(n_epochs):
            ep_p, ep_w = labels.p, labels.weight
            if self.rime is not None:
                ep_p, ep_w, kept, flips = self.rime.epoch_targets(
                    self._predicted(segments, labels), labels.p, labels.weight
                )
                report.rime_trusted, report.rime_flipped = kept / n, flips / n
            right = torch.zeros(ens.n_members, device=dev)
            seen = torch.zeros(ens.n_members, device=dev)
            order = torch.argsort(torch.rand(train_idx.shape, generator=gen), dim=1)
            perm = torch.gather(train_idx, 1, order)
            for start in range(0, perm.shape[1], cfg.batch_size):
                idx = perm[:, start : start + cfg.batch_size].to(dev)  # (M, B) labels per member
                k = idx.shape[1]
                rows = torch.cat([labels.a[idx], labels.b[idx]], dim=1)  # (M, 2B)
                if cfg.crop:
                    steps = member_step_rewards(ens, segments, rows)  # (M, 2B, T)
                    ret = (steps * crop_windows(segments, rows, cfg.crop, gen)).sum(-1)
                elif cfg.snippets.copies:  # QPA's augmentation: the loss is on τ snippet pairs
                    steps = member_step_rewards(ens, segments, rows)  # (M, 2B, T)
                    ret = steps.sum(-1)
                else:
                    ret = member_returns(ens, segments, rows)  # (M, 2B)
                p, w = ep_p[idx], ep_w[idx]
                pairs = (ret[:, :k], ret[:, k:], p, w)
                if cfg.snippets.copies:
                    lengths = segments.mask.sum(-1).long()[rows]
                    pairs = snippet_pairs(steps, lengths, k, p, w, cfg.snippets, gen)
                member_loss = _member_losses(*pairs, cfg.random_answer)
                loss = member_loss.sum()
                if cfg.stop_accuracy is not None:
                    right += (_agrees(ret[:, :k].detach(), ret[:, k:].detach(), p) * w).sum(-1)
                    seen += w.sum(-1)
                if semi:
                    assert unlabelled is not None
                    u_loss, n_conf = self._pseudo_label_loss(unlabelled, k * cfg.semi_ratio, gen)
                    loss = loss + u_loss
                    confident += n_conf
                    drawn += ens.n_members * k * cfg.semi_ratio
                self.optimizer.zero_grad(set_to_none=True)
                loss.backward()
                ens.add_l2_grad(self.l2)  # coupled ℓ2 on weights, one coefficient per member
                self.optimizer.step()
                report.steps += 1
            report.epochs += 1
            if cfg.adapt_l2 and (epoch + 1) % adapt_every == 0:
                # both losses of the model as it is now, in eval mode on whole segments: the
                # epoch's running training loss had dropout (and crops) on, the validation
                # loss not, so their ratio fell below the band and ℓ2 only ever shrank
                self._adapt_l2(*self._losses(segments, labels, splits))
            accuracy = float((right / seen.clamp_min(1e-12)).mean())
            if cfg.stop_accuracy is not None and accuracy > cfg.stop_accuracy:
                break
        ens.eval()
        tr, va = self._losses(segments, labels, splits)
        report.train_loss, report.val_loss, report.l2 = tr, va, list(self.l2)
        if semi:
            report.pseudo_share = confident / max(drawn, 1)
        ens.fit_output_stats(segments)
        return report

    def _pseudo_label_loss(
        self, unlabelled: SegmentBatch, n_pairs: int, gen: torch.Generator
    ) -> tuple[torch.Tensor, int]:
        """SURF's loss on ``n_pairs`` random unlabelled pairs per member (summed over members),
        and how many (member, pair) were confident enough to count."""
        cfg, ens = self.config, self.ensemble
        n = len(unlabelled)
        shape = (ens.n_members, n_pairs)
        a = torch.randint(0, n, shape, generator=gen)
        b = (a + torch.randint(1, n, shape, generator=gen)) % n  # never the segment itself
        rows = torch.cat([a, b], dim=1).to(ens.device)
        steps = member_step_rewards(ens, unlabelled, rows)  # (M, 2U, T)
        with torch.no_grad():
            whole = steps.sum(-1)
            p_a = torch.sigmoid(whole[:, :n_pairs] - whole[:, n_pairs:])
            target = (p_a >= 0.5).float()
            use = (torch.maximum(p_a, 1 - p_a) >= cfg.semi_threshold).float()
        if cfg.crop:
            steps = steps * crop_windows(unlabelled, rows, cfg.crop, gen)
        ret = steps.sum(-1)
        logit = ret[:, :n_pairs] - ret[:, n_pairs:]
        ce = -(
            target * torch.nn.functional.logsigmoid(logit)
            + (1 - target) * torch.nn.functional.logsigmoid(-logit)
        )
        per_member = (ce * use).mean(-1) * cfg.semi_weight  # SURF: mean over all drawn pairs
        return per_member.sum(), int(use.sum())

    @torch.no_grad()
    def _predicted(self, segments: SegmentBatch, labels: LabelBatch) -> torch.Tensor:
        """The ensemble's P(a ≻ b) of every label: the members' mean of σ(R̂_a − R̂_b)."""
        was_training = self.ensemble.training
        self.ensemble.eval()
        ret = self.ensemble.segment_returns_t(segments)
        self.ensemble.train(was_training)
        return torch.sigmoid(ret[:, labels.a] - ret[:, labels.b]).mean(0)

    def reed_pretrain(
        self,
        obs: np.ndarray,
        acts: np.ndarray,
        next_obs: np.ndarray,
        inputs: SegmentBatch,
        gen: torch.Generator,
    ) -> list[float]:
        """REED's pre-training on transitions (s, a, s') (``obs``, ``acts``, ``next_obs``), the
        members' input standardisation first set on ``inputs`` (the segments the fit that follows
        standardises on); each step's loss. The heads are made from ``gen`` on first use."""
        if not self.config.reed.on:
            raise ConfigError("REED's pre-training is off; set fit.reed.on to use it")
        ens = self.ensemble
        ens.fit_input_stats(inputs.to(ens.device))
        if self.reed is None:
            self.reed = ReedHeads(ens, self.config.reed.projection, gen)
        return reed_pretrain(ens, self.reed, obs, acts, next_obs, self.config.reed, gen)

    def reed_state(self) -> dict[str, torch.Tensor] | None:
        """REED's heads (a state_dict, for checkpoints); None when off or not yet made."""
        return None if self.reed is None else self.reed.state_dict()

    def load_reed_state(self, state: dict[str, torch.Tensor] | None) -> None:
        """Restore :meth:`reed_state` (None leaves the heads to be made at the next
        pre-training)."""
        if state is None or not self.config.reed.on:
            return
        if self.reed is None:
            self.reed = ReedHeads(self.ensemble, self.config.reed.projection)
        self.reed.load_state_dict(state)

    def robust_state(self) -> dict[str, Any] | None:
        """RIME's statistics (plain JSON, for checkpoints); None when RIME is off."""
        return None if self.rime is None else self.rime.state()

    def load_robust_state(self, state: dict[str, Any] | None) -> None:
        """Restore :meth:`robust_state` (a checkpoint without it leaves the filter fresh)."""
        if self.rime is not None and state is not None:
            self.rime.load_state(state)

    def targets(self, labels: LabelBatch) -> LabelBatch:
        """``labels`` with the fit's targets: p smoothed by ``label_smoothing`` (as given if 0)."""
        s = self.config.label_smoothing
        return labels if s == 0 else replace(labels, p=s + (1 - 2 * s) * labels.p)

    def losses(
        self,
        segments: SegmentBatch,
        labels: LabelBatch,
        splits: list[tuple[np.ndarray, np.ndarray]],
    ) -> tuple[list[float], list[float]]:
        """Unregularised train and validation loss of each member on its split."""
        return self._losses(segments, self.targets(labels), splits)

    @torch.no_grad()
    def _losses(
        self,
        segments: SegmentBatch,
        labels: LabelBatch,
        splits: list[tuple[np.ndarray, np.ndarray]],
    ) -> tuple[list[float], list[float]]:
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

    def _adapt_l2(self, tr: list[float], va: list[float]) -> None:
        lo, hi = self.config.l2_band
        lmin, lmax = self.config.l2_limits
        for m in range(self.ensemble.n_members):
            ratio = va[m] / max(tr[m], 1e-8)
            if ratio > hi:
                self.l2[m] = min(lmax, self.l2[m] * self.config.l2_factor)
            elif ratio < lo:
                self.l2[m] = max(lmin, self.l2[m] / self.config.l2_factor)


def member_step_rewards(
    ensemble: RewardEnsemble, segments: SegmentBatch, rows: torch.Tensor
) -> torch.Tensor:
    """Differentiable per-step rewards of segment ``rows[m, j]`` under member m, zero on
    padding: (M, K, T). Each member evaluates its distinct segments once."""
    uniq, inv = unique_rows(rows)
    obs = segments.obs[uniq]
    acts = segments.acts[uniq] if ensemble.act_dim else None
    r = ensemble.forward_members(obs, acts) * segments.mask[uniq]  # (M, U, T)
    return torch.gather(r, 1, inv[..., None].expand(-1, -1, r.shape[-1]))


def crop_windows(
    segments: SegmentBatch, rows: torch.Tensor, crop: int, gen: torch.Generator
) -> torch.Tensor:
    """SURF's temporal cropping as a mask (M, 2K, T). ``rows`` (M, 2K) holds K pairs per member,
    the K first sides then the K second ones, as the trainer builds them. Each pair draws one
    window length, L − U{0..crop} steps (at least 1) with L the pair's shorter valid length,
    shared by both sides (SURF's ``get_cropping_mask``); each side has its own uniform start
    inside its segment's valid steps."""
    k = rows.shape[1] // 2
    if rows.shape[1] != 2 * k:
        raise ValueError(
            f"crop_windows needs rows of K pairs (M, 2K), got shape {tuple(rows.shape)}"
        )
    lengths = segments.mask.sum(-1).long()[rows]  # (M, 2K)
    dev = lengths.device  # the draws come from the CPU generator ``gen``, then move
    cut = torch.randint(0, crop + 1, (rows.shape[0], k), generator=gen).to(dev)
    keep = (torch.minimum(lengths[:, :k], lengths[:, k:]) - cut).clamp_min(1)  # (M, K)
    keep = torch.cat([keep, keep], dim=1)  # one length per pair, both sides
    start = (torch.rand(rows.shape, generator=gen).to(dev) * (lengths - keep + 1)).floor().long()
    t = torch.arange(segments.mask.shape[1], device=dev)
    return ((t >= start[..., None]) & (t < (start + keep)[..., None])).float()


def member_returns(
    ensemble: RewardEnsemble, segments: SegmentBatch, rows: torch.Tensor
) -> torch.Tensor:
    """Differentiable return of segment ``rows[m, j]`` under member m: (M, K).

    Each member evaluates its distinct segments once (a bootstrap minibatch repeats about a
    third of them); the gradient of a repeated segment is the sum over its repeats, as if it
    had been evaluated every time. (With dropout or batch norm, as in the convolutional
    members, the repeats share one dropout mask and count once in the batch statistics.)"""
    uniq, inv = unique_rows(rows)  # (M, U), (M, K)
    obs = segments.obs[uniq]  # (M, U, T, D) or images (M, U, T, C, H, W)
    acts = segments.acts[uniq] if ensemble.act_dim else None
    r = ensemble.forward_members(obs, acts)
    return torch.gather((r * segments.mask[uniq]).sum(-1), 1, inv)


def unique_rows(rows: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
    """Each row's distinct values, and where each entry went: ``rows`` (M, K) int64 gives
    ``uniq`` (M, U) and ``inv`` (M, K) with ``uniq.gather(1, inv) == rows``. U is the largest
    count of distinct values in a row; shorter rows are padded with their own first value."""
    srt, order = torch.sort(rows, dim=1)
    new = torch.ones_like(srt, dtype=torch.bool)
    new[:, 1:] = srt[:, 1:] != srt[:, :-1]
    slot = torch.cumsum(new, dim=1) - 1  # (M, K): the distinct value's column in uniq
    width = int(slot[:, -1].max()) + 1
    uniq = srt[:, :1].expand(-1, width).clone()
    uniq.scatter_(1, slot, srt)
    inv = torch.empty_like(slot)
    inv.scatter_(1, order, slot)
    return uniq, inv


def _agrees(ret_a: torch.Tensor, ret_b: torch.Tensor, p: torch.Tensor) -> torch.Tensor:
    """1 where a member's predicted preference takes the label's side, else 0: all (M, B). An
    equal answer (p = 0.5) takes no side, so it never agrees (B-Pref's code counts it right when
    the member prefers the first segment: :attr:`FitConfig.stop_accuracy`)."""
    diff = ret_a - ret_b
    return ((p > 0.5) & (diff > 0) | (p < 0.5) & (diff < 0)).float()


def _member_losses(
    ret_a: torch.Tensor, ret_b: torch.Tensor, p: torch.Tensor, w: torch.Tensor, random_answer: float
) -> torch.Tensor:
    """Weighted mean loss of each member over its own labels: all inputs (M, B); returns (M,)."""
    one = torch.ones(1, device=ret_a.device)
    per = preference_loss(ret_a[..., None], ret_b[..., None], p[..., None], one, random_answer)
    return (per * w).sum(-1) / w.sum(-1).clamp_min(1e-12)


def preference_loss_elementwise(
    ret_a: torch.Tensor, ret_b: torch.Tensor, p: torch.Tensor, random_answer: float
) -> torch.Tensor:
    """Per-label cross-entropy of :func:`preference_loss`: (members, L)."""
    one = torch.ones(1, device=ret_a.device)
    return preference_loss(ret_a[..., None], ret_b[..., None], p[:, None], one, random_answer)
