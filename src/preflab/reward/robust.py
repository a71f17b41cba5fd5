"""RIME's denoising discriminator (Cheng et al., ICML 2024, "RIME: Robust Preference-based
Reinforcement Learning with Noisy Preferences", §4.1): which labels a reward fit trusts, which
it flips, epoch by epoch.

Before every epoch of a fit the ensemble predicts each labelled pair, P = the members' mean of
σ(R̂_a − R̂_b) (the Bradley–Terry probability, without the fit's random-answer floor ε), and the
label's KL divergence from it is taken, D = y·ln(y/P) + (1 − y)·ln((1 − y)/(1 − P)) with y the
label's p (for a hard label, D is the cross-entropy −ln P of the side chosen). Then

* a label is **flipped** (trained on as 1 − p) when D > τ_upper = −ln(``flip_below``): the
  model gives the labelled side a probability below ``flip_below`` (RIME: 0.001, τ_upper =
  3·ln 10);
* otherwise it is **trusted** (trained on as given) when D < τ_lower, with
  τ_lower = −ln ρ + α·ρ + β_t·s_KL. RIME's Theorem 4.1 bounds the KL divergence of a
  corrupted label from below by −ln ρ + ρ/2 + O(ρ²) when the trusted labels' KL divergences are
  at most ρ; α ≤ 1/2 (``alpha``) loosens the bound. ρ is the largest KL divergence among the
  trusted labels, kept as an exponential moving average over epochs (rate ``ema``, from 0: the
  authors' code), s_KL the standard deviation of the trusted labels' KL divergences over all
  epochs so far, and β_t = max(β_min, β_max − (β_max − β_min)·t/k) falls linearly over the first
  k = ``decay_epochs`` epochs (t counts epochs over all fits of the run) so that early, when the
  model knows little, more labels are kept;
* every other label sits the epoch out (weight 0).

Before any trusted label has been seen (ρ = 0) τ_lower is infinite: the first epoch trusts every
label that is not flipped (the authors' code: −ln(0 + 10⁻⁸) ≈ 18.4 ≥ any KL divergence of
practical size). Where PrefLab differs from the authors' code: s_KL is the standard deviation
(the code takes the variance and caps β_t·var at 3), pooled exactly over the epochs (the code's
pooling uses its moving mean); a label both above τ_upper and below τ_lower is flipped, not
trained on twice; a soft label's divergence is the KL divergence, not the cross-entropy.

The moving maximum, the pooled moments and t are the state that carries from fit to fit; it is
in every checkpoint (:meth:`RimeFilter.state`).

RIME's other half, the warm start of the reward model on the pre-training's intrinsic reward, is
:mod:`preflab.reward.warmstart` (``warm_start_steps``).
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Any

import torch

from preflab.errors import ConfigError

_TINY = 1e-12
"""Floor of probabilities inside logarithms."""


@dataclass(frozen=True, kw_only=True)
class RimeConfig:
    """RIME's robust fit: train only on labels the reward model finds plausible, flip the ones it
    confidently contradicts (off by default). Defaults are the authors' DMC settings."""

    on: bool = False
    """Select and flip labels before every epoch of every reward fit (RIME). Off: every label
    is trained on as given."""
    alpha: float = 0.5
    """α in τ_lower = −ln ρ + α·ρ + β_t·s_KL: RIME's Theorem 4.1 gives α = 1/2; smaller is
    stricter (the authors run 0.5 on DMC and Meta-World)."""
    beta_max: float = 3.0
    """β at the start: weight of the trusted labels' KL spread s_KL in τ_lower."""
    beta_min: float = 1.0
    """β after ``decay_epochs`` epochs (β_t falls linearly from ``beta_max`` to this)."""
    decay_epochs: int = 60
    """k: epochs (over all fits of the run) over which β falls to ``beta_min`` (the authors'
    code: 60 on DMC, 600 on Meta-World)."""
    flip_below: float = 0.001
    """A label is flipped when the model gives its side a probability below this:
    τ_upper = −ln(flip_below) (RIME: 0.001, τ_upper = 3·ln 10 ≈ 6.91)."""
    ema: float = 0.1
    """Rate of the moving average that keeps ρ, the trusted labels' largest KL divergence, from
    epoch to epoch (the authors' code: 0.1; 1 = the last epoch's maximum)."""
    warm_start_steps: int = 0
    """RIME's warm start: before the first preference fit, this many minibatch steps fit the
    reward members to the state-entropy reward of PEBBLE's pre-training (needs unsup_steps > 0;
    it works with ``on`` or without). The authors fit 5 minibatches per pre-training step
    (45,000 on DMC) while the agent explores; PrefLab fits once, when pre-training ends. 0 = off."""
    warm_start_batch: int = 1024
    """Transitions per warm-start minibatch (the authors: the agent's batch, 1,024 on DMC)."""

    def __post_init__(self) -> None:
        if not 0.0 < self.alpha <= 1.0:
            raise ConfigError(f"fit.rime.alpha must be in (0, 1] (RIME: 0.5), got {self.alpha}")
        if not 0.0 <= self.beta_min <= self.beta_max or not math.isfinite(self.beta_max):
            raise ConfigError(
                f"fit.rime needs 0 ≤ beta_min ≤ beta_max < inf (RIME: 1 and 3), got "
                f"{self.beta_min}, {self.beta_max}"
            )
        if self.decay_epochs < 1:
            raise ConfigError(f"fit.rime.decay_epochs must be ≥ 1, got {self.decay_epochs}")
        if not 0.0 < self.flip_below < 0.5:
            raise ConfigError(
                f"fit.rime.flip_below must be in (0, 0.5) (RIME: 0.001), got {self.flip_below}"
            )
        if not 0.0 < self.ema <= 1.0:
            raise ConfigError(f"fit.rime.ema must be in (0, 1] (RIME: 0.1), got {self.ema}")
        if self.warm_start_steps < 0 or self.warm_start_batch < 1:
            raise ConfigError(
                f"fit.rime.warm_start_steps must be ≥ 0 (0 = off) and warm_start_batch ≥ 1, got "
                f"{self.warm_start_steps}, {self.warm_start_batch}"
            )


def kl_divergence(p_label: torch.Tensor, p_pred: torch.Tensor) -> torch.Tensor:
    """D_KL(y ‖ P) of each label y = ``p_label`` from the prediction P = ``p_pred`` (two-way
    distributions (y, 1 − y) and (P, 1 − P)), with 0·ln 0 = 0."""
    y = p_label.double()
    p = p_pred.double().clamp(_TINY, 1 - _TINY)
    a = torch.where(y > 0, y * (torch.log(y.clamp_min(_TINY)) - torch.log(p)), 0.0)
    b = torch.where(y < 1, (1 - y) * (torch.log((1 - y).clamp_min(_TINY)) - torch.log1p(-p)), 0.0)
    return a + b


class RimeFilter:
    """RIME's per-epoch selection and flipping, with the statistics that carry across fits."""

    def __init__(self, config: RimeConfig) -> None:
        self.config = config
        self.rho = 0.0
        """Moving average of the trusted labels' largest KL divergence (0: none seen yet)."""
        self.count = 0
        """Trusted KL divergences pooled into ``mean`` and ``m2`` so far."""
        self.mean = 0.0
        self.m2 = 0.0
        """Sum of squared deviations from ``mean`` of the pooled divergences."""
        self.epochs = 0
        """t: epochs filtered so far (over all fits)."""

    def beta(self) -> float:
        """β_t = max(β_min, β_max − (β_max − β_min)·t/k)."""
        c = self.config
        return max(
            c.beta_min, c.beta_max - (c.beta_max - c.beta_min) * self.epochs / c.decay_epochs
        )

    def spread(self) -> float:
        """s_KL: the standard deviation of every trusted KL divergence so far (0 if none)."""
        return math.sqrt(self.m2 / self.count) if self.count else 0.0

    def lower(self) -> float:
        """τ_lower = −ln ρ + α·ρ + β_t·s_KL; infinite before any label was trusted."""
        if self.rho <= 0.0:
            return math.inf
        return -math.log(self.rho) + self.config.alpha * self.rho + self.beta() * self.spread()

    def upper(self) -> float:
        """τ_upper = −ln(flip_below)."""
        return -math.log(self.config.flip_below)

    def select(self, kl: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        """(trusted, flipped) boolean masks of labels with divergences ``kl`` under the current
        bounds; no label is in both (a flipped label is not trusted as given)."""
        flipped = kl > self.upper()
        trusted = (kl < self.lower()) & ~flipped
        return trusted, flipped

    def update(self, kl_trusted: torch.Tensor) -> None:
        """Fold one epoch's trusted divergences into ρ and s_KL, and count the epoch."""
        self.epochs += 1
        n = int(kl_trusted.numel())
        if n == 0:
            return
        x = kl_trusted.double()
        self.rho += self.config.ema * (float(x.max()) - self.rho)
        mean_b = float(x.mean())
        m2_b = float(((x - mean_b) ** 2).sum())
        total = self.count + n
        delta = mean_b - self.mean
        self.m2 += m2_b + delta * delta * self.count * n / total
        self.mean += delta * n / total
        self.count = total

    def epoch_targets(
        self, p_pred: torch.Tensor, p: torch.Tensor, weight: torch.Tensor
    ) -> tuple[torch.Tensor, torch.Tensor, int, int]:
        """One epoch's targets and weights: flipped labels' p becomes 1 − p, labels neither
        trusted nor flipped get weight 0; then the statistics are updated. Also returns how
        many labels were trusted and flipped."""
        kl = kl_divergence(p, p_pred)
        trusted, flipped = self.select(kl)
        self.update(kl[trusted])
        new_p = torch.where(flipped, 1 - p, p)
        new_w = weight * (trusted | flipped).to(weight.dtype)
        return new_p, new_w, int(trusted.sum()), int(flipped.sum())

    def state(self) -> dict[str, Any]:
        """Plain-JSON state (for checkpoints)."""
        return {
            "rho": self.rho,
            "count": self.count,
            "mean": self.mean,
            "m2": self.m2,
            "epochs": self.epochs,
        }

    def load_state(self, state: dict[str, Any]) -> None:
        self.rho = float(state["rho"])
        self.count = int(state["count"])
        self.mean = float(state["mean"])
        self.m2 = float(state["m2"])
        self.epochs = int(state["epochs"])
