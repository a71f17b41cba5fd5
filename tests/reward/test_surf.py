"""SURF's options in the one reward trainer: pseudo-labels on unlabelled pairs and temporal
cropping (issue #28, item 2)."""

import math

import numpy as np
import pytest
import torch
from hypothesis import given, settings
from hypothesis import strategies as st

from preflab.errors import ConfigError, DataError
from preflab.reward import (
    FitConfig,
    LabelBatch,
    RewardConfig,
    RewardEnsemble,
    RewardTrainer,
    SegmentBatch,
)
from preflab.reward.trainer import crop_windows, member_step_rewards


def _padded(lengths: list[int], t_max: int) -> SegmentBatch:
    """Segments of the given valid lengths, zero-padded to ``t_max``."""
    obs = np.zeros((len(lengths), t_max, 2), np.float32)
    batch = SegmentBatch.from_arrays(obs)
    mask = torch.zeros(len(lengths), t_max)
    for i, n in enumerate(lengths):
        mask[i, :n] = 1
    return SegmentBatch(ids=batch.ids, obs=batch.obs, acts=batch.acts, mask=mask)


def _pair_rows(n: int, members: int, times: int = 1) -> torch.Tensor:
    """(members, 2·n·times) rows as the trainer builds them: n·times pairs, first sides then
    second sides; member m pairs segment i with segment (i + m + 1) mod n."""
    a = torch.arange(n).repeat(times)
    return torch.stack([torch.cat([a, (a + m + 1) % n]) for m in range(members)])


def _windows(w: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
    """Each window's length and start: ``w`` (..., T) of contiguous runs."""
    t = torch.arange(w.shape[-1])
    return w.sum(-1).long(), torch.where(w > 0, t, w.shape[-1]).min(-1).values


@settings(max_examples=100, deadline=None)
@given(
    st.lists(st.integers(1, 30), min_size=1, max_size=6),
    st.integers(0, 40),
    st.integers(0, 2**31 - 1),
)
def test_crop_windows_are_one_run_inside_the_valid_steps(
    lengths: list[int], crop: int, seed: int
) -> None:
    """Each window is one contiguous run that lies inside its segment's valid steps, never on
    its padding; both sides of a pair are L − U{0..crop} steps long (at least 1), L the pair's
    shorter valid length."""
    t_max = max(lengths) + 3
    seg = _padded(lengths, t_max)
    rows = _pair_rows(len(lengths), 2)  # (M=2, 2K)
    k = len(lengths)
    w = crop_windows(seg, rows, crop, torch.Generator().manual_seed(seed))
    assert w.shape == (2, rows.shape[1], t_max)
    for m in range(2):
        for j in range(k):
            shorter = min(lengths[int(rows[m, j])], lengths[int(rows[m, k + j])])
            sizes = set()
            for side in (j, k + j):
                on = torch.nonzero(w[m, side]).flatten()
                assert len(on) >= 1
                assert int(on[-1] - on[0]) + 1 == len(on)  # contiguous
                assert int(on[-1]) < lengths[int(rows[m, side])]  # inside the valid steps
                sizes.add(len(on))
            assert len(sizes) == 1  # one length per pair
            assert max(1, shorter - crop) <= sizes.pop() <= shorter


def test_crop_windows_share_one_length_per_pair_and_start_apart() -> None:
    """SURF's get_cropping_mask: one length per pair for both sides, each side its own start.
    Every pair's two windows are equally long, the lengths cover L − 0 … L − crop, and the two
    starts are drawn apart (all 6 × 6 start combinations of the shortest windows occur)."""
    seg = _padded([20] * 8, 20)
    rows = _pair_rows(8, 3, times=60)  # 480 pairs per member
    k = rows.shape[1] // 2
    length, start = _windows(crop_windows(seg, rows, 5, torch.Generator().manual_seed(0)))
    assert torch.equal(length[:, :k], length[:, k:])
    assert set(length.flatten().tolist()) == {15, 16, 17, 18, 19, 20}
    short = length[:, :k] == 15
    combos = set(zip(start[:, :k][short].tolist(), start[:, k:][short].tolist(), strict=True))
    assert combos == {(i, j) for i in range(6) for j in range(6)}


def test_crop_windows_of_unequal_segments_fit_the_shorter() -> None:
    """A pair of a 20-step and a 12-step segment (padding after 12) gets two windows of one
    length, 7 to 12 steps with crop 5, each inside its own segment."""
    seg = _padded([20, 12], 20)
    rows = torch.tensor([[0] * 200 + [1] * 200])  # 200 pairs (0, 1)
    length, start = _windows(crop_windows(seg, rows, 5, torch.Generator().manual_seed(1)))
    assert torch.equal(length[:, :200], length[:, 200:])
    assert set(length.flatten().tolist()) == set(range(7, 13))
    assert bool((start[:, 200:] + length[:, 200:] <= 12).all())
    assert int((start[:, :200] + length[:, :200]).max()) > 12  # the long side uses its steps


def test_crop_windows_vary_when_crop_allows() -> None:
    seg = _padded([20] * 4, 20)
    rows = torch.arange(4).repeat(3, 50)
    w = crop_windows(seg, rows, 5, torch.Generator().manual_seed(0))
    sizes = set(w.sum(-1).flatten().tolist())
    assert sizes == {15.0, 16.0, 17.0, 18.0, 19.0, 20.0}
    starts = {int(torch.nonzero(r).flatten()[0]) for r in w.reshape(-1, 20)}
    assert starts == {0, 1, 2, 3, 4, 5}


def _problem(seed: int, n_seg: int = 40, t: int = 10):
    """Segments whose true reward is the first observation coordinate."""
    rng = np.random.default_rng(seed)
    obs = rng.normal(size=(n_seg, t, 3)).astype(np.float32)
    seg = SegmentBatch.from_arrays(obs)
    ret = obs[:, :, 0].sum(1)
    return rng, seg, ret


def _ensemble(seed: int) -> RewardEnsemble:
    return RewardEnsemble(3, 0, RewardConfig(use_actions=False, members=3, hidden=(16,)), seed=seed)


def test_pseudo_label_loss_of_two_segments_is_the_hard_label_cross_entropy() -> None:
    """With two unlabelled segments every drawn pair is (0, 1) or (1, 0), so with τ = 0.5 (every
    pair used) each member's loss is λ · softplus(−|R₀ − R₁|): the cross-entropy of the label
    its own prediction gives. With τ just below 1 none is confident and the loss is 0."""
    _rng, seg, _ret = _problem(0, n_seg=2)
    ens = _ensemble(0)
    ens.fit_input_stats(seg)
    with torch.no_grad():
        r = ens.segment_returns_t(seg)  # (M, 2)
    want = 0.7 * torch.nn.functional.softplus(-(r[:, 0] - r[:, 1]).abs())
    trainer = RewardTrainer(ens, FitConfig(semi_ratio=1, semi_threshold=0.5, semi_weight=0.7))
    loss, used = trainer._pseudo_label_loss(seg, 9, torch.Generator().manual_seed(1))
    torch.testing.assert_close(loss, want.sum(), rtol=1e-5, atol=1e-6)
    assert used == 3 * 9
    confident = bool((torch.sigmoid((r[:, 0] - r[:, 1]).abs()) >= 0.999999).any())
    assert not confident  # a fresh ensemble is far from sure
    strict = RewardTrainer(ens, FitConfig(semi_ratio=1, semi_threshold=0.999999))
    loss, used = strict._pseudo_label_loss(seg, 9, torch.Generator().manual_seed(1))
    assert used == 0 and float(loss.detach()) == 0.0


def test_pseudo_label_loss_counts_confident_pairs_over_all_drawn_pairs(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """Two hand-set linear members (per-step reward k·obs₀, k = 1 and 2) on segments whose
    returns are (0, 1, 5) and (0, 2, 10); segment 2's padding step has obs₀ = 100, masked out.
    τ = 0.9: member 1 is confident on (0, 2) and (1, 2) (σ(5) = 0.9933, σ(4) = 0.9820), not on
    (0, 1) (σ(1) = 0.731); member 2 likewise (σ(10), σ(8); σ(2) = 0.881). Each member's loss is
    λ · Σ softplus(−|ΔR|) over its confident drawn pairs / the number of pairs drawn (the
    trainer's docstring: averaged over all μ·B pairs, SURF's expectation over unlabelled pairs
    with the indicator inside); the pairs drawn are read from the rows the members evaluate."""
    import preflab.reward.trainer as trainer_module

    obs = np.zeros((3, 2, 2), np.float32)
    obs[1, :, 0] = 0.5
    obs[2, :, 0] = (5.0, 100.0)
    plain = SegmentBatch.from_arrays(obs)
    mask = torch.tensor([[1.0, 1.0], [1.0, 1.0], [1.0, 0.0]])
    seg = SegmentBatch(ids=plain.ids, obs=plain.obs, acts=plain.acts, mask=mask)
    ens = RewardEnsemble(2, 0, RewardConfig(use_actions=False, members=2, hidden=()), seed=0)
    with torch.no_grad():
        ens.weights[0].copy_(torch.tensor([[[1.0], [0.0]], [[2.0], [0.0]]]))
        ens.biases[0].zero_()
    returns = [[0.0, 1.0, 5.0], [0.0, 2.0, 10.0]]

    drawn: list[torch.Tensor] = []
    original = trainer_module.member_step_rewards

    def spy(ensemble: RewardEnsemble, segments: SegmentBatch, rows: torch.Tensor) -> torch.Tensor:
        drawn.append(rows.clone())
        return original(ensemble, segments, rows)

    monkeypatch.setattr(trainer_module, "member_step_rewards", spy)
    n_pairs, lam = 40, 0.7
    trainer = RewardTrainer(ens, FitConfig(semi_ratio=1, semi_threshold=0.9, semi_weight=lam))
    loss, used = trainer._pseudo_label_loss(seg, n_pairs, torch.Generator().manual_seed(2))
    (rows,) = drawn
    want, confident = 0.0, 0
    for m, ret in enumerate(returns):
        seen, total = set(), 0.0
        for a, b in zip(rows[m, :n_pairs].tolist(), rows[m, n_pairs:].tolist(), strict=True):
            assert a != b
            seen.add(frozenset((a, b)))
            gap = abs(ret[a] - ret[b])
            if 1 / (1 + math.exp(-gap)) >= 0.9:
                total += math.log1p(math.exp(-gap))  # softplus(−|ΔR|)
                confident += 1
        assert len(seen) == 3  # every kind of pair was drawn
        want += lam * total / n_pairs
    assert used == confident
    assert 0 < confident < 2 * n_pairs
    assert float(loss.detach()) == pytest.approx(want, rel=1e-5)


def test_a_pair_exactly_at_the_threshold_is_pseudo_labelled() -> None:
    """SURF's code keeps a pseudo-label when its confidence is ≥ τ (reward_model_semi_dataaug.py:
    ``mask = (pred_max[0] >= self.threshold_u)``), so a pair exactly at τ counts. Two linear
    members (per-step reward k·obs₀, k = 1 and 2) on two one-step segments with obs₀ = 0 and 1:
    |ΔR| = 1 and 2, confidence σ(1) (both orders give the same float32 value) and σ(2). With τ
    set to float32 σ(1), member 1 is exactly at τ and member 2 above: every drawn pair counts,
    and the loss is λ·(softplus(−1) + softplus(−2)); a strict > would keep member 2's alone."""
    obs = np.array([[[0.0, 0.0]], [[1.0, 0.0]]], np.float32)
    seg = SegmentBatch.from_arrays(obs)
    ens = RewardEnsemble(2, 0, RewardConfig(use_actions=False, members=2, hidden=()), seed=0)
    with torch.no_grad():
        ens.weights[0].copy_(torch.tensor([[[1.0], [0.0]], [[2.0], [0.0]]]))
        ens.biases[0].zero_()
    tau = float(torch.sigmoid(torch.tensor(1.0, dtype=torch.float32)))
    assert tau == pytest.approx(1 / (1 + math.exp(-1)), rel=1e-7) and 0.5 <= tau < 1
    n_pairs, lam = 12, 0.7
    trainer = RewardTrainer(ens, FitConfig(semi_ratio=1, semi_threshold=tau, semi_weight=lam))
    loss, used = trainer._pseudo_label_loss(seg, n_pairs, torch.Generator().manual_seed(0))
    assert used == 2 * n_pairs
    want = lam * (math.log1p(math.exp(-1.0)) + math.log1p(math.exp(-2.0)))
    assert float(loss.detach()) == pytest.approx(want, rel=1e-6)


def test_pseudo_label_loss_needs_unlabelled_segments() -> None:
    rng, seg, _ret = _problem(0)
    labels = LabelBatch.from_arrays(np.array([0]), np.array([1]), np.array([1.0]))
    trainer = RewardTrainer(_ensemble(0), FitConfig(semi_ratio=2))
    with pytest.raises(DataError, match="unlabelled"):
        trainer.fit(seg, labels, rng)


@pytest.mark.parametrize("seed", [0, 1, 2])
def test_pseudo_labels_widen_the_margins_on_unlabelled_pairs(seed: int) -> None:
    """Pseudo-labelling with τ = 0.5 minimises softplus(−|ΔR|) on unlabelled pairs, so after the
    same fit the members separate unlabelled segments further than without it; the labelled
    pairs stay fitted (training accuracy ≥ 0.9 either way)."""
    _rng, seg, ret = _problem(seed)
    lab = np.arange(8)
    a, b = lab[:4], lab[4:]
    labels = LabelBatch.from_arrays(a, b, (ret[a] > ret[b]).astype(np.float32))
    unl = SegmentBatch.from_arrays(seg.obs[8:].numpy())
    spread = {}
    for ratio in (0, 4):
        ens = _ensemble(seed)
        cfg = FitConfig(
            epochs=200,
            batch_size=4,
            bootstrap=False,
            holdout=0.0,
            adapt_l2=False,
            semi_ratio=ratio,
            semi_threshold=0.5,
        )
        rep = RewardTrainer(ens, cfg).fit(seg, labels, np.random.default_rng(seed), unlabelled=unl)
        with torch.no_grad():
            r = ens.segment_returns_t(unl)  # (M, N)
            spread[ratio] = float((r[:, :, None] - r[:, None, :]).abs().mean())
            rl = ens.segment_returns_t(seg)
        acc = ((rl[:, a] > rl[:, b]).float() == labels.p).float().mean()
        assert float(acc) >= 0.9
        assert (rep.pseudo_share is None) == (ratio == 0)
    assert spread[4] > 1.2 * spread[0]  # 1.31–1.43× on these seeds


def test_surf_fit_is_reproducible_from_its_rng() -> None:
    """Pseudo-labels and crops draw from the fit's generator: the same RNG state gives the same
    members; another state gives other members."""
    _rng, seg, ret = _problem(3)
    a, b = np.arange(10), np.arange(10, 20)
    labels = LabelBatch.from_arrays(a, b, (ret[a] > ret[b]).astype(np.float32))
    cfg = FitConfig(epochs=5, semi_ratio=2, crop=3)

    def weights(seed: int) -> list[torch.Tensor]:
        ens = _ensemble(0)
        RewardTrainer(ens, cfg).fit(seg, labels, np.random.default_rng(seed), unlabelled=seg)
        return [p.detach().clone() for p in ens.parameters()]

    first, again, other = weights(5), weights(5), weights(6)
    assert all(torch.equal(x, y) for x, y in zip(first, again, strict=True))
    assert not all(torch.equal(x, y) for x, y in zip(first, other, strict=True))


def test_cropped_fit_still_learns_the_reward() -> None:
    """A reward summed over the whole segment is learnt from cropped windows too: the members'
    returns rank held-out segments like the true returns do (Spearman ρ > 0.8)."""
    from scipy.stats import spearmanr

    rng, seg, ret = _problem(4, n_seg=120)
    a = rng.integers(0, 80, 300)
    b = (a + rng.integers(1, 80, 300)) % 80
    labels = LabelBatch.from_arrays(a, b, (ret[a] > ret[b]).astype(np.float32))
    ens = _ensemble(4)
    RewardTrainer(ens, FitConfig(epochs=30, crop=4)).fit(seg, labels, rng)
    with torch.no_grad():
        pred = ens.segment_returns_t(seg).mean(0).numpy()
    assert spearmanr(pred[80:], ret[80:]).statistic > 0.8


@pytest.mark.parametrize(
    ("kwargs", "match"),
    [
        ({"semi_ratio": -1}, "semi_ratio"),
        ({"crop": -2}, "crop"),
        ({"semi_threshold": 0.4}, "semi_threshold"),
        ({"semi_threshold": 1.0}, "semi_threshold"),
        ({"semi_weight": -1.0}, "semi_weight"),
        ({"semi_weight": math.inf}, "semi_weight"),
    ],
)
def test_bad_surf_settings_are_refused(kwargs: dict, match: str) -> None:
    with pytest.raises(ConfigError, match=match):
        FitConfig(**kwargs)


def test_member_step_rewards_sum_to_member_returns() -> None:
    from preflab.reward.trainer import member_returns

    _rng, seg, _ret = _problem(5, n_seg=6)
    seg = _padded([10, 7, 3, 10, 1, 5], 10)
    seg = SegmentBatch(
        ids=seg.ids,
        obs=torch.from_numpy(np.random.default_rng(0).normal(size=(6, 10, 2)).astype(np.float32)),
        acts=seg.acts,
        mask=seg.mask,
    )
    ens = RewardEnsemble(2, 0, RewardConfig(use_actions=False, members=3, hidden=(8,)), seed=0)
    rows = torch.from_numpy(np.random.default_rng(1).integers(0, 6, size=(3, 9)))
    steps = member_step_rewards(ens, seg, rows)
    torch.testing.assert_close(steps.sum(-1), member_returns(ens, seg, rows))
    assert float(steps.detach()[:, :, 9][seg.mask[rows][:, :, 9] == 0].abs().sum()) == 0.0


def test_crop_windows_need_whole_pairs() -> None:
    with pytest.raises(ValueError, match=r"K pairs \(M, 2K\)"):
        crop_windows(_padded([5] * 3, 5), torch.zeros(1, 3, dtype=torch.long), 2, torch.Generator())
