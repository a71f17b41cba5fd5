"""QPA's data augmentation: τ snippet pairs per labelled pair, equal lengths H − U{5..15} on both
sides, each side at its own uniform start inside its valid steps."""

from __future__ import annotations

import numpy as np
import pytest
import torch

from preflab.errors import ConfigError
from preflab.reward import FitConfig, LabelBatch, RewardConfig, RewardEnsemble, SegmentBatch
from preflab.reward.qpa_crops import QPA_COPIES, QPA_SHORTEN, SnippetConfig, snippet_pairs
from preflab.reward.trainer import RewardTrainer


def _starts(ret: torch.Tensor, length: torch.Tensor) -> torch.Tensor:
    """Where windows of ``length`` steps over r_t = t + 1 start: their sum over [a, a + L) is
    L·a + L(L + 1)/2 (and over r_t = 1 it is L)."""
    return (ret - length * (length + 1) / 2) / length


def test_snippets_are_equal_length_windows_inside_each_segment() -> None:
    m, k, t = 2, 3, 50
    ones = torch.ones(m, 2 * k, t)
    ramp = torch.arange(1, t + 1, dtype=torch.float32).expand(m, 2 * k, t).clone()
    lengths = torch.full((m, 2 * k), t)
    lengths[:, 1] = 20  # one first side is 20 valid steps, padded with zeros
    ones[:, 1, 20:] = 0
    ramp[:, 1, 20:] = 0
    p = torch.tensor([[1.0, 0.0, 0.5]] * m)
    w = torch.ones(m, k)
    cfg = SnippetConfig(copies=QPA_COPIES)
    la, lb, pp, ww = snippet_pairs(ones, lengths, k, p, w, cfg, torch.Generator().manual_seed(0))
    ra, rb, _, _ = snippet_pairs(ramp, lengths, k, p, w, cfg, torch.Generator().manual_seed(0))
    assert la.shape == lb.shape == pp.shape == ww.shape == (m, QPA_COPIES * k)
    assert torch.equal(la, lb)  # both sides of a copy equally long
    pair = torch.arange(QPA_COPIES * k) % k  # copy-major: column c·k + j is pair j
    full = pair != 1
    assert la[:, full].min() >= 35 and la[:, full].max() <= 45  # H − 15 … H − 5 with H = 50
    assert la[:, ~full].min() >= 5 and la[:, ~full].max() <= 15  # H = 20, the shorter side
    assert set(la[:, full].unique().tolist()) == set(range(35, 46))  # every length drawn
    for ret, side_len in ((ra, torch.where(full, 50, 20)), (rb, torch.full_like(pair, 50))):
        start = _starts(ret, la)
        assert torch.allclose(start, start.round(), atol=1e-4)  # a contiguous window
        assert start.min() >= 0 and (start + la <= side_len).all()  # inside the segment
    assert torch.equal(pp, p.repeat(1, QPA_COPIES)) and torch.equal(ww, w.repeat(1, QPA_COPIES))


def test_the_papers_values_and_bad_ones() -> None:
    assert (QPA_COPIES, QPA_SHORTEN) == (20, (5, 15))
    assert SnippetConfig().copies == 0  # off by default
    with pytest.raises(ConfigError, match="copies"):
        SnippetConfig(copies=-1)
    with pytest.raises(ConfigError, match="shorten"):
        SnippetConfig(shorten=(10, 5))


def test_a_fit_on_snippets_learns_the_reward() -> None:
    """Segments whose true reward is the first observation coordinate: a fit on QPA's snippets
    (τ = 8 copies of 14 to 17 steps of 20) ranks held-out pairs by the true return."""
    rng = np.random.default_rng(0)
    obs = rng.normal(size=(120, 20, 3)).astype(np.float32)
    seg = SegmentBatch.from_arrays(obs)
    ret = obs[:, :, 0].sum(1)
    a, b = np.arange(0, 80, 2), np.arange(1, 80, 2)  # 40 labels
    labels = LabelBatch.from_arrays(a, b, (ret[a] > ret[b]).astype(np.float32))
    ens = RewardEnsemble(3, 0, RewardConfig(use_actions=False, members=2, hidden=(16,)), seed=0)
    cfg = FitConfig(epochs=30, batch_size=8, snippets=SnippetConfig(copies=8, shorten=(3, 6)))
    RewardTrainer(ens, cfg).fit(seg, labels, rng)
    with torch.no_grad():
        r = ens.segment_returns_t(seg).mean(0).numpy()
    i, j = np.triu_indices(40, 1)
    i, j = i + 80, j + 80  # held-out segments 80 … 119
    agree = ((r[i] > r[j]) == (ret[i] > ret[j])).mean()
    assert agree >= 0.85
    with pytest.raises(ConfigError, match="one of them off"):
        FitConfig(crop=3, snippets=SnippetConfig(copies=20))
