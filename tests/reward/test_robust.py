"""RIME's robust fit (Cheng et al., ICML 2024): selection and flipping by KL divergence, the
lower bound τ_lower = −ln ρ + α·ρ + β_t·s_KL, the upper bound τ_upper = −ln 0.001 and the
decay of β_t (issue #59, item 1). Expected values are worked out by hand from those formulas."""

import copy
import math

import numpy as np
import pytest
import torch

from preflab.errors import ConfigError
from preflab.reward import (
    FitConfig,
    LabelBatch,
    RewardConfig,
    RewardEnsemble,
    RewardTrainer,
    SegmentBatch,
)
from preflab.reward.robust import RimeConfig, RimeFilter, kl_divergence


def _filter(**kw: float) -> RimeFilter:
    base = {"on": True, "alpha": 0.5, "beta_max": 3.0, "beta_min": 1.0, "decay_epochs": 4}
    return RimeFilter(RimeConfig(**{**base, **kw}))  # type: ignore[arg-type]


def _t(values: list[float]) -> torch.Tensor:
    return torch.tensor(values, dtype=torch.float64)


def _ids(mask: torch.Tensor) -> set[int]:
    return {int(i) for i in torch.nonzero(mask).flatten()}


def test_kl_divergence_of_hand_worked_pairs() -> None:
    """D(y ‖ P) = y ln(y/P) + (1 − y) ln((1 − y)/(1 − P)): a hard label 1 against P = 1/4 is
    ln 4; against 3/4 it is ln(4/3); a hard 0 against P = 1/4 is ln(4/3); an equal answer against
    P = 1/2 is 0 and against P = 0.8 is ½ ln(0.5/0.8) + ½ ln(0.5/0.2) = ln(5/4)."""
    y = torch.tensor([1.0, 1.0, 0.0, 0.5, 0.5])
    p = torch.tensor([0.25, 0.75, 0.25, 0.5, 0.8])
    want = [math.log(4), math.log(4 / 3), math.log(4 / 3), 0.0, math.log(5 / 4)]
    got = kl_divergence(y, p).tolist()
    assert got == pytest.approx(want, rel=1e-6, abs=1e-7)


def test_upper_bound_is_three_ln_ten() -> None:
    """τ_upper = −ln 0.001 = 3 ln 10 ≈ 6.908 (RIME's flipping threshold)."""
    assert _filter().upper() == pytest.approx(3 * math.log(10), rel=1e-12)


def test_beta_falls_linearly_to_its_floor_in_k_epochs() -> None:
    """β_t = max(β_min, β_max − (β_max − β_min)·t/k) with β 3 → 1 over k = 4 epochs:
    3, 2.5, 2, 1.5, 1, then 1 for good."""
    f = _filter()
    seen = []
    for _ in range(7):
        seen.append(f.beta())
        f.update(_t([0.1]))
    assert seen == pytest.approx([3.0, 2.5, 2.0, 1.5, 1.0, 1.0, 1.0])


def test_two_epochs_of_selection_and_flipping_with_hand_derived_sets() -> None:
    """ema = 1 (ρ = the last epoch's largest trusted divergence).

    Epoch 1: nothing trusted yet, so τ_lower = ∞; divergences (0.1, 0.3, 0.5, 8.0): the last is
    above τ_upper = 6.908 and is flipped, the rest are trusted. Then ρ = 0.5, the pooled trusted
    divergences {0.1, 0.3, 0.5} have mean 0.3 and variance (0.04 + 0 + 0.04)/3, and t = 1, so
    β = 2.5 and τ_lower = −ln 0.5 + 0.5·0.5 + 2.5·√(0.08/3) = 1.351395.

    Epoch 2: divergences (0.2, 1.0, 2.0, 7.0): 0.2 and 1.0 are trusted, 2.0 sits out (between
    the bounds), 7.0 is flipped. Then ρ = 1.0 and s_KL is the standard deviation of
    {0.1, 0.3, 0.5, 0.2, 1.0}: mean 0.42, mean square 1.39/5 = 0.278, variance 0.1016; t = 2,
    β = 2, τ_lower = 0 + 0.5 + 2·√0.1016."""
    f = _filter(ema=1.0)
    assert f.lower() == math.inf
    trusted, flipped = f.select(_t([0.1, 0.3, 0.5, 8.0]))
    assert _ids(trusted) == {0, 1, 2} and _ids(flipped) == {3}
    f.update(_t([0.1, 0.3, 0.5]))
    assert f.rho == pytest.approx(0.5)
    assert f.lower() == pytest.approx(math.log(2) + 0.25 + 2.5 * math.sqrt(0.08 / 3), rel=1e-9)
    assert f.lower() == pytest.approx(1.351395, abs=1e-6)

    trusted, flipped = f.select(_t([0.2, 1.0, 2.0, 7.0]))
    assert _ids(trusted) == {0, 1} and _ids(flipped) == {3}
    f.update(_t([0.2, 1.0]))
    assert f.rho == pytest.approx(1.0)
    assert f.spread() == pytest.approx(math.sqrt(0.1016), rel=1e-9)
    assert f.lower() == pytest.approx(0.5 + 2 * math.sqrt(0.1016), rel=1e-9)


def test_rho_is_a_moving_average_of_the_largest_trusted_divergence() -> None:
    """With RIME's rate 0.1 from 0: maxima 0.5 then 1.0 give ρ = 0.05, then 0.05 + 0.1·0.95 =
    0.145; the bound then uses that ρ: −ln 0.145 + 0.5·0.145 + β_2·s_KL."""
    f = _filter(ema=0.1)
    f.update(_t([0.1, 0.5]))
    assert f.rho == pytest.approx(0.05)
    f.update(_t([1.0]))
    assert f.rho == pytest.approx(0.145)
    s = float(np.std([0.1, 0.5, 1.0]))
    assert f.lower() == pytest.approx(-math.log(0.145) + 0.0725 + 2.0 * s, rel=1e-9)


def test_an_epoch_with_nothing_trusted_keeps_the_bound_and_counts_the_epoch() -> None:
    f = _filter(ema=1.0)
    f.update(_t([0.4]))
    before = (f.rho, f.spread())
    f.update(_t([]))
    assert (f.rho, f.spread()) == before and f.epochs == 2


def test_epoch_targets_flip_confident_contradictions_and_rest_the_doubtful() -> None:
    """Labels p = (1, 0, 1, 1, 0.5) against predictions P = (0.0005, 0.0005, 0.9, 0.2, 0.5):
    label 0 says a while the model gives a 1/2000 (D = ln 2000 = 7.6 > 6.908: flipped to 0);
    label 1 agrees with the model (D = −ln 0.9995, trusted); label 2 has D = −ln 0.9 (trusted);
    label 3 has D = ln 5 = 1.609, above τ_lower = −ln 1 + 0.5·1 + 3·0 = 0.5 once ρ = 1 and
    s_KL = 0: it sits the epoch out (weight 0); the equal answer 4 has D = 0 (trusted)."""
    f = _filter(ema=1.0, beta_max=3.0)
    f.update(_t([1.0]))  # ρ = 1, s_KL = 0 (one value)
    f.epochs = 0  # β = 3, though s_KL = 0 makes it moot
    assert f.lower() == pytest.approx(0.5)
    p = torch.tensor([1.0, 0.0, 1.0, 1.0, 0.5])
    pred = torch.tensor([0.0005, 0.0005, 0.9, 0.2, 0.5])
    w = torch.tensor([1.0, 2.0, 1.0, 1.0, 0.5])
    new_p, new_w, kept, flips = f.epoch_targets(pred, p, w)
    assert new_p.tolist() == [0.0, 0.0, 1.0, 1.0, 0.5]
    assert new_w.tolist() == [1.0, 2.0, 1.0, 0.0, 0.5]
    assert (kept, flips) == (3, 1)


def test_clean_labels_below_the_bound_are_all_kept_as_given() -> None:
    """When every divergence is under τ_lower and none over τ_upper, the epoch's targets and
    weights are the labels' own: the option changes nothing on labels the model fits."""
    f = _filter(ema=1.0)
    f.update(_t([0.3, 0.6]))  # ρ = 0.6: τ_lower ≥ −ln 0.6 + 0.3 = 0.81
    p = torch.tensor([1.0, 0.0, 1.0, 0.0])
    pred = torch.tensor([0.7, 0.4, 0.95, 0.1])  # D ≤ −ln 0.6 = 0.51 for each
    w = torch.ones(4)
    new_p, new_w, kept, flips = f.epoch_targets(pred, p, w)
    assert torch.equal(new_p, p) and torch.equal(new_w, w) and (kept, flips) == (4, 0)


@pytest.mark.parametrize(
    ("kwargs", "match"),
    [
        ({"alpha": 0.0}, "alpha"),
        ({"alpha": 1.5}, "alpha"),
        ({"beta_min": 2.0, "beta_max": 1.0}, "beta_min"),
        ({"decay_epochs": 0}, "decay_epochs"),
        ({"flip_below": 0.0}, "flip_below"),
        ({"flip_below": 0.6}, "flip_below"),
        ({"ema": 0.0}, "ema"),
    ],
)
def test_bad_rime_settings_are_refused(kwargs: dict, match: str) -> None:
    with pytest.raises(ConfigError, match=match):
        RimeConfig(**kwargs)


def _noisy_problem(seed: int, n: int = 200, flip: float = 0.2):
    """Labels of a reward linear in the first coordinate, a share ``flip`` of them reversed."""
    rng = np.random.default_rng(seed)
    obs = rng.normal(size=(60, 8, 3)).astype(np.float32)
    ret = obs[:, :, 0].sum(1)
    a = rng.integers(0, 60, n)
    b = (a + rng.integers(1, 60, n)) % 60
    true = (ret[a] > ret[b]).astype(np.float32)
    wrong = rng.random(n) < flip
    p = np.where(wrong, 1 - true, true)
    return rng, SegmentBatch.from_arrays(obs), LabelBatch.from_arrays(a, b, p), wrong


def _fit(rime: bool, seed: int = 0, flip: float = 0.2, epochs: int = 60):
    rng, seg, labels, wrong = _noisy_problem(seed, flip=flip)
    ens = RewardEnsemble(3, 0, RewardConfig(use_actions=False, members=3, hidden=(16,)), seed=seed)
    cfg = FitConfig(
        epochs=epochs,
        batch_size=64,
        lr=3e-3,
        bootstrap=False,
        holdout=0.0,
        adapt_l2=False,
        random_answer=0.0,
        rime=RimeConfig(on=rime),
    )
    trainer = RewardTrainer(ens, cfg)
    report = trainer.fit(seg, labels, rng)
    return trainer, report, seg, labels, wrong


def test_rime_is_off_by_default_and_keeps_no_state() -> None:
    trainer, report, *_ = _fit(rime=False, epochs=2)
    assert FitConfig().rime.on is False
    assert trainer.rime is None and trainer.robust_state() is None
    assert report.rime_trusted is None and report.rime_flipped is None


def test_rime_leaves_out_mostly_the_corrupted_labels() -> None:
    """On labels of a linear reward with 20% reversed, the labels RIME does not trust as given
    in the last epoch are mostly the reversed ones, and most reversed ones are among them."""
    trainer, report, seg, labels, wrong = _fit(rime=True)
    assert trainer.rime is not None
    with torch.no_grad():
        pred = trainer._predicted(seg, labels)
    kl = kl_divergence(labels.p, pred)
    trusted, _flipped = trainer.rime.select(kl)
    untrusted = ~trusted.numpy()
    precision = wrong[untrusted].mean()
    recall = untrusted[wrong].mean()
    assert precision >= 0.8 and recall >= 0.7, (precision, recall)
    assert report.rime_trusted is not None and report.rime_trusted < 0.9


def test_rime_state_carries_across_fits_and_restores_exactly() -> None:
    """The filter's statistics count every epoch of every fit; a trainer given the ensemble's
    weights, the optimiser's state and :meth:`robust_state` fits the next round bit for bit like
    the one that kept them (what a checkpoint must hold). (The optimiser's state is deep-copied:
    Adam's load_state_dict keeps the very tensors it is given, which a checkpoint never shares.)"""
    trainer, report, seg, labels, _ = _fit(rime=True, epochs=5)
    state = trainer.robust_state()
    assert state is not None and state["epochs"] == report.epochs
    twin_ens = RewardEnsemble(
        3, 0, RewardConfig(use_actions=False, members=3, hidden=(16,)), seed=9
    )
    twin_ens.load_state_dict(trainer.ensemble.state_dict())
    twin = RewardTrainer(twin_ens, trainer.config)
    twin.optimizer.load_state_dict(copy.deepcopy(trainer.optimizer.state_dict()))
    twin.set_l2(trainer.l2)
    twin.load_robust_state(state)
    fresh = RewardTrainer(
        RewardEnsemble(3, 0, RewardConfig(use_actions=False, members=3, hidden=(16,)), seed=9),
        trainer.config,
    )
    fresh.ensemble.load_state_dict(trainer.ensemble.state_dict())
    fresh.optimizer.load_state_dict(copy.deepcopy(trainer.optimizer.state_dict()))
    a = trainer.fit(seg, labels, np.random.default_rng(7), epochs=3, warm=True)
    b = twin.fit(seg, labels, np.random.default_rng(7), epochs=3, warm=True)
    c = fresh.fit(seg, labels, np.random.default_rng(7), epochs=3, warm=True)
    assert trainer.robust_state() == twin.robust_state()
    assert trainer.robust_state()["epochs"] == report.epochs + a.epochs  # type: ignore[index]
    for k, v in trainer.ensemble.state_dict().items():
        assert torch.equal(v, twin.ensemble.state_dict()[k])
    assert a.train_loss == b.train_loss
    assert fresh.robust_state()["epochs"] == c.epochs  # type: ignore[index]  # nothing carried
