"""QPA's data augmentation for the reward fit (Hu et al., ICLR 2024): every labelled pair of a
gradient step counts τ times, each time as a pair of random snippets of its two segments.

In the authors' code (``reward_model.py``: ``get_cropping_mask`` and ``train_reward_iter``,
``data_aug_ratio=20`` in ``run_QPA.sh``) each of the τ copies of a pair draws one snippet
length H' uniformly from H − 15 … H − 5 (H the segment length, 50: 35 … 45 steps), shared by
both sides, and a uniform start of its own in each segment; the label is the pair's. The step's
loss is the mean cross-entropy over all B·τ snippet pairs. SURF's crops (``FitConfig.crop``)
also give both sides of a pair one shared length, but one copy of each pair, lengths
H − U{0..c}; QPA's are τ copies, lengths H − U{lo..hi}.

PrefLab's segments may be shorter than their array (an absorbing tail's padding): H is a
pair's shorter valid length, and H' is at least one step.
"""

from __future__ import annotations

from dataclasses import dataclass

import torch

from preflab.errors import ConfigError

QPA_COPIES = 20
"""QPA's τ (``data_aug_ratio=20`` on DeepMind Control)."""
QPA_SHORTEN = (5, 15)
"""QPA's snippets are H − 15 … H − 5 steps long (the authors draw ``randint(S - 15, S - 5 + 1)`` from NumPy's global generator)."""


@dataclass(frozen=True, kw_only=True)
class SnippetConfig:
    """QPA's data augmentation of the reward fit (off by default)."""

    copies: int = 0
    """τ: snippet pairs each labelled pair of a step counts as (QPA: 20). 0 = off."""
    shorten: tuple[int, int] = QPA_SHORTEN
    """(lo, hi): a snippet is H − U{lo..hi} steps long, H the pair's segment length, both
    sides the same length (QPA: 5 to 15)."""

    def __post_init__(self) -> None:
        if self.copies < 0:
            raise ConfigError(
                f"fit.snippets.copies must be ≥ 0 (0 = off; QPA uses 20), got {self.copies}"
            )
        lo, hi = self.shorten
        if not 0 <= lo <= hi:
            raise ConfigError(
                f"fit.snippets.shorten must be (lo, hi) with 0 ≤ lo ≤ hi (QPA: (5, 15)), got "
                f"{self.shorten}"
            )


def snippet_pairs(
    steps: torch.Tensor,
    lengths: torch.Tensor,
    k: int,
    p: torch.Tensor,
    weight: torch.Tensor,
    config: SnippetConfig,
    gen: torch.Generator,
) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor, torch.Tensor]:
    """(ret_a, ret_b, p, weight) of the τ snippet pairs of every labelled pair, each (M, τ·k).

    ``steps``: per-step rewards (M, 2k, T), the k first sides then the k second ones, zero on
    padding; ``lengths``: their valid lengths (M, 2k); ``p``, ``weight``: the pairs' targets
    and weights (M, k), repeated for every copy."""
    m, _, t = steps.shape
    tau = config.copies
    la, lb = lengths[:, :k], lengths[:, k:]
    lo, hi = config.shorten
    shape = (tau, m, k)
    cut = torch.randint(lo, hi + 1, shape, generator=gen).to(steps.device)
    keep = (torch.minimum(la, lb)[None] - cut).clamp_min(1)  # (τ, M, k), shared by both sides
    ret = []
    for side, length in ((steps[:, :k], la), (steps[:, k:], lb)):
        room = (length[None] - keep + 1).clamp_min(1)
        u = torch.rand(shape, generator=gen).to(steps.device)
        start = (u * room).floor().long()
        pos = torch.arange(t, device=steps.device)
        mask = (pos >= start[..., None]) & (pos < (start + keep)[..., None])  # (τ, M, k, T)
        ret.append((side[None] * mask).sum(-1))  # (τ, M, k)

    def flat(x: torch.Tensor) -> torch.Tensor:
        return x.permute(1, 0, 2).reshape(m, tau * k)  # copy-major within each member

    rep = (tau, 1, 1)
    return flat(ret[0]), flat(ret[1]), flat(p.repeat(rep)), flat(weight.repeat(rep))
