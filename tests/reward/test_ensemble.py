import math

import numpy as np
import pytest
import torch

from preflab.errors import ConfigError, DataError
from preflab.reward import (
    FitConfig,
    LabelBatch,
    RewardConfig,
    RewardEnsemble,
    RewardTrainer,
    SegmentBatch,
)
from preflab.reward.ensemble import _MEMBER_CHAIN_ROWS
from preflab.reward.models import load_reward_model
from preflab.reward.numpy_forward import SMALL_BATCH_ROWS
from preflab.reward.protocol import pair_variance, preference_probs
from preflab.reward.trainer import preference_loss


def linear_task(seed: int, n: int = 300, t: int = 10, d: int = 4, m: int = 500):
    rng = np.random.default_rng(seed)
    w = np.array([1.0, -2.0, 0.5, 0.0])[:d]
    obs = rng.normal(size=(n, t, d)).astype(np.float32)
    ret = (obs @ w).sum(1)
    a = rng.integers(0, n, m)
    b = (a + rng.integers(1, n, m)) % n
    p = (ret[a] > ret[b]).astype(np.float32)
    return rng, w, obs, ret, a, b, p


def test_loss_matches_hand_formula_with_random_answer_term() -> None:
    ra = torch.tensor([[2.0, -1.0, 0.3]])
    rb = torch.tensor([[0.5, 1.0, 0.3]])
    p = torch.tensor([1.0, 0.25, 0.5])
    w = torch.ones(3)
    got = preference_loss(ra, rb, p, w, 0.1)[0].item()
    expected = 0.0
    for x_a, x_b, q in zip([2.0, -1.0, 0.3], [0.5, 1.0, 0.3], [1.0, 0.25, 0.5], strict=True):
        pa = 0.9 * math.exp(x_a) / (math.exp(x_a) + math.exp(x_b)) + 0.05
        expected += -(q * math.log(pa) + (1 - q) * math.log(1 - pa))
    assert got == pytest.approx(expected / 3, rel=1e-5)
    # without the term it is plain Bradley–Terry cross-entropy
    got0 = preference_loss(ra[:, :1], rb[:, :1], p[:1], w[:1], 0.0)[0].item()
    assert got0 == pytest.approx(-math.log(1 / (1 + math.exp(-1.5))), rel=1e-6)


def test_loss_weights_each_label_and_weight_zero_leaves_it_out() -> None:
    """Σ w·CE / Σ w. By hand: label 1 (x = R_a − R_b = 1.5, p = 1) costs softplus(−1.5) =
    0.201413; label 2 (x = −2, p = 0.25) costs 0.25·softplus(2) + 0.75·softplus(−2) = 0.626928.
    RIME's labels sitting an epoch out have weight 0 (RimeFilter.epoch_targets), so weights (1, 0)
    leave label 1 alone; (2, 1) give (2·0.201413 + 0.626928) / 3 = 0.343252. With the
    random-answer floor ε the probability is (1 − ε)·σ(x) + ε/2 (derived here with math)."""
    from preflab.reward.trainer import _member_losses

    ra, rb = torch.tensor([[2.0, -1.0]]), torch.tensor([[0.5, 1.0]])
    p = torch.tensor([1.0, 0.25])
    assert preference_loss(ra, rb, p, torch.tensor([1.0, 0.0]), 0.0).item() == pytest.approx(
        0.201413, abs=1e-6
    )
    assert preference_loss(ra, rb, p, torch.tensor([2.0, 1.0]), 0.0).item() == pytest.approx(
        0.343252, abs=1e-6
    )

    def ce(x: float, q: float, eps: float) -> float:
        pa = (1 - eps) / (1 + math.exp(-x)) + eps / 2
        return -(q * math.log(pa) + (1 - q) * math.log(1 - pa))

    got = preference_loss(ra, rb, p, torch.tensor([2.0, 1.0]), 0.1).item()
    assert got == pytest.approx((2 * ce(1.5, 1, 0.1) + ce(-2, 0.25, 0.1)) / 3, rel=1e-6)
    assert preference_loss(ra, rb, p, torch.tensor([0.0, 3.0]), 0.1).item() == pytest.approx(
        ce(-2, 0.25, 0.1), rel=1e-6
    )
    # the trainer's path: each member its own labels and weights, (M, B)
    w = torch.tensor([[1.0, 0.0], [2.0, 1.0]])
    per_member = _member_losses(ra.expand(2, 2), rb.expand(2, 2), p.expand(2, 2), w, 0.0)
    torch.testing.assert_close(per_member, torch.tensor([0.201413, 0.343252]), atol=1e-6, rtol=0)


@pytest.mark.parametrize("seed", [0, 1])
def test_recovers_a_linear_true_reward(seed: int) -> None:
    rng, w, obs, _ret, a, b, p = linear_task(seed)
    ens = RewardEnsemble(4, 0, RewardConfig(use_actions=False, hidden=(32, 32)), seed=seed)
    RewardTrainer(ens, FitConfig(epochs=25)).fit(
        SegmentBatch.from_arrays(obs), LabelBatch.from_arrays(a, b, p), rng
    )
    test = np.random.default_rng(100 + seed).normal(size=(2000, 4)).astype(np.float32)
    ens.predict(test[:1])  # NumPy copies of the first fit's weights, taken before a second fit
    RewardTrainer(ens, FitConfig(epochs=25)).fit(
        SegmentBatch.from_arrays(obs), LabelBatch.from_arrays(a, b, p), rng
    )
    pred = ens.predict(test)
    assert pred.shape == (3, 2000)
    np.testing.assert_allclose(ens.predict(test[:1]), pred[:, :1], rtol=1e-5, atol=1e-6)
    corr = np.corrcoef(pred.mean(0), test @ w)[0, 1]
    assert corr > 0.95
    # every member learned it on its own bootstrap sample
    for m in range(3):
        assert np.corrcoef(pred[m], test @ w)[0, 1] > 0.9


def test_bootstrap_leaves_one_over_e_out_of_bag() -> None:
    ens = RewardEnsemble(2, 0, RewardConfig(use_actions=False, members=5))
    splits = RewardTrainer(ens)._split(5000, np.random.default_rng(0))
    for train, val in splits:
        assert len(train) == 5000
        assert abs(len(val) / 5000 - math.exp(-1)) < 0.02
        assert not set(val) & set(train)


def test_holdout_without_bootstrap() -> None:
    ens = RewardEnsemble(2, 0, RewardConfig(use_actions=False))
    for train, val in RewardTrainer(ens, FitConfig(bootstrap=False))._split(
        1000, np.random.default_rng(0)
    ):
        assert len(val) == round(1000 / math.e) and len(train) + len(val) == 1000


def test_l2_grows_when_a_big_net_overfits_few_labels() -> None:
    rng, _w, obs, _ret, a, b, p = linear_task(3, n=40, m=16)
    p = np.random.default_rng(9).permutation(p)  # noise labels: validation cannot follow training
    ens = RewardEnsemble(4, 0, RewardConfig(use_actions=False, hidden=(128, 128)), seed=0)
    tr = RewardTrainer(ens, FitConfig(epochs=60, l2_init=1e-4))
    rep = tr.fit(SegmentBatch.from_arrays(obs), LabelBatch.from_arrays(a, b, p), rng)
    assert min(rep.l2) > 1e-4


def test_normalised_members_have_zero_mean_unit_std_on_fit_data() -> None:
    rng, _w, obs, _ret, a, b, p = linear_task(0)
    ens = RewardEnsemble(4, 0, RewardConfig(use_actions=False))
    batch = SegmentBatch.from_arrays(obs)
    RewardTrainer(ens, FitConfig(epochs=2)).fit(batch, LabelBatch.from_arrays(a, b, p), rng)
    out = ens.predict(obs.reshape(-1, 4))
    np.testing.assert_allclose(out.mean(1), 0, atol=1e-4)
    np.testing.assert_allclose(out.std(1, ddof=1), 1, atol=1e-3)
    np.testing.assert_allclose(ens.reward(obs.reshape(-1, 4)), out.mean(0), rtol=1e-6)


def test_save_load_round_trip(tmp_path) -> None:
    ens = RewardEnsemble(3, 2, RewardConfig(dropout=0.1), seed=4)
    x, u = (
        np.random.default_rng(0).normal(size=(7, 3)),
        np.random.default_rng(1).normal(size=(7, 2)),
    )
    ens.save(tmp_path)
    back = load_reward_model(tmp_path)
    np.testing.assert_array_equal(back.predict(x, u), ens.predict(x, u))


def test_pair_variance_matches_preference_probs() -> None:
    rng = np.random.default_rng(0)
    batch = SegmentBatch.from_arrays(rng.normal(size=(6, 5, 3)))
    ens = RewardEnsemble(3, 0, RewardConfig(use_actions=False, members=4))
    v = pair_variance(ens.segment_returns(batch))
    probs = preference_probs(ens.segment_returns(batch), np.array([1, 4]), np.array([2, 0]))
    np.testing.assert_allclose([v[1, 2], v[4, 0]], probs.var(0), rtol=1e-5)
    np.testing.assert_allclose(v, v.T, atol=1e-7)


def test_bad_inputs() -> None:
    ens = RewardEnsemble(3, 1)
    with pytest.raises(DataError, match="observation dimension"):
        ens.predict(np.zeros((2, 4)), np.zeros((2, 1)))
    with pytest.raises(DataError, match=r"\[0, 1\]"):
        LabelBatch.from_arrays(np.array([0]), np.array([1]), np.array([1.2]))
    with pytest.raises(DataError, match="NaN"):
        SegmentBatch.from_arrays(np.full((2, 3, 3), np.nan))
    with pytest.raises(ConfigError):
        RewardConfig(members=0)
    with pytest.raises(DataError, match="no labels"):
        RewardTrainer(ens).fit(
            SegmentBatch.from_arrays(np.zeros((2, 3, 3)), np.zeros((2, 3, 1))),
            LabelBatch.from_arrays(np.zeros(0, int), np.zeros(0, int), np.zeros(0)),
            np.random.default_rng(0),
        )


def test_large_batches_per_member_equal_the_batched_path() -> None:
    """From _MEMBER_CHAIN_ROWS rows on, net runs one chain per member; it gives what the batched
    path gives on the same rows in small chunks."""
    ens = RewardEnsemble(4, 1, RewardConfig(members=3, hidden=(8, 6)), seed=2)
    n = _MEMBER_CHAIN_ROWS + 37
    x = torch.from_numpy(np.random.default_rng(1).normal(size=(n, 5)).astype(np.float32))
    chunks = torch.cat([ens.net(c) for c in torch.split(x, 100)], dim=1)  # each < the threshold
    big = ens.net(x)
    assert big.shape == (3, n)
    torch.testing.assert_close(big, chunks)


def _torch_members(ens: RewardEnsemble, obs: np.ndarray, acts: np.ndarray | None) -> np.ndarray:
    """Normalised member rewards through torch (the path large batches take)."""
    with torch.no_grad():
        out = ens.forward_raw(
            torch.from_numpy(obs), None if acts is None else torch.from_numpy(acts)
        )
        return ((out - ens.out_mean[:, None]) / ens.out_std[:, None]).numpy()


@pytest.mark.parametrize(
    ("activation", "act_dim", "abs_inputs"),
    [("leaky_relu", 2, False), ("relu", 2, True), ("tanh", 0, False)],
)
def test_a_few_rows_in_numpy_equal_the_torch_path(
    activation: str, act_dim: int, abs_inputs: bool
) -> None:
    """predict and reward of up to SMALL_BATCH_ROWS rows run in NumPy (an off-policy step's
    reward), with the statistics folded into the layers: the same numbers as torch, raw and
    standardised, also after the weights and statistics change in place."""
    cfg = RewardConfig(
        members=3,
        hidden=(8, 6),
        activation=activation,
        use_actions=act_dim > 0,
        abs_inputs=abs_inputs,
    )
    ens = RewardEnsemble(4, act_dim, cfg, seed=3)
    rng = np.random.default_rng(4)
    obs = rng.normal(size=(SMALL_BATCH_ROWS, 4)).astype(np.float32)
    acts = rng.normal(size=(SMALL_BATCH_ROWS, act_dim)).astype(np.float32) if act_dim else None
    for _ in range(2):
        np.testing.assert_allclose(
            ens.predict(obs[:1], acts if acts is None else acts[:1]),
            _torch_members(ens, obs[:1], acts if acts is None else acts[:1]),
            rtol=1e-5,
            atol=1e-6,
        )
        np.testing.assert_allclose(
            ens.predict(obs, acts), _torch_members(ens, obs, acts), rtol=1e-5, atol=1e-6
        )
        with torch.no_grad():
            raw = ens.forward_raw(
                torch.from_numpy(obs), None if acts is None else torch.from_numpy(acts)
            ).numpy()
        np.testing.assert_allclose(
            ens.predict(obs, acts, normalise=False), raw, rtol=1e-5, atol=1e-6
        )
        mixed = (_torch_members(ens, obs, acts).mean(0) - float(ens.mix_mean)) / float(ens.mix_std)
        np.testing.assert_allclose(ens.reward(obs, acts), mixed, rtol=1e-5, atol=1e-6)
        with torch.no_grad():  # what a fit does: weights and statistics change in place
            for w in ens.weights:
                w.add_(torch.from_numpy(rng.normal(size=tuple(w.shape)).astype(np.float32)))
            ens.in_mean.add_(0.5)
            ens.in_std.mul_(1.7)
            ens.out_std.mul_(2.0)
            ens.mix_mean.add_(0.3)
            ens.mix_std.mul_(1.5)
    fresh = RewardEnsemble(4, act_dim, cfg, seed=9)
    before = fresh.predict(obs[:1], acts if acts is None else acts[:1])  # copies taken
    fresh.load_state_dict(ens.state_dict())
    np.testing.assert_allclose(
        fresh.predict(obs[:1], acts if acts is None else acts[:1]),
        _torch_members(ens, obs[:1], acts if acts is None else acts[:1]),
        rtol=1e-5,
        atol=1e-6,
    )
    assert not np.allclose(before, fresh.predict(obs[:1], acts if acts is None else acts[:1]))


@pytest.mark.parametrize("seed", [0, 1])
def test_abs_inputs_let_a_linear_score_peak_at_zero(seed: int) -> None:
    """Pairs prefer the smaller |x|. A linear score of [x, |x|] can be −c·|x| exactly; a linear
    score of x alone is monotone, so by symmetry it cannot correlate with −|x|."""
    rng = np.random.default_rng(seed)
    x = rng.uniform(-1, 1, size=(400, 1, 1)).astype(np.float32)
    a = rng.integers(0, 400, 2000)
    b = (a + rng.integers(1, 400, 2000)) % 400
    p = (np.abs(x[a, 0, 0]) < np.abs(x[b, 0, 0])).astype(np.float32)
    grid = np.linspace(-1, 1, 201, dtype=np.float32)[:, None]
    corr = {}
    for abs_inputs in (True, False):
        cfg = RewardConfig(members=1, hidden=(), use_actions=False, abs_inputs=abs_inputs)
        ens = RewardEnsemble(1, 0, cfg, seed=seed)
        fit = FitConfig(epochs=30, bootstrap=False, holdout=0.0, adapt_l2=False)
        RewardTrainer(ens, fit).fit(
            SegmentBatch.from_arrays(x), LabelBatch.from_arrays(a, b, p), rng
        )
        score = ens.predict(grid, normalise=False)[0]
        corr[abs_inputs] = np.corrcoef(score, -np.abs(grid[:, 0]))[0, 1]
        if abs_inputs:
            assert abs(grid[int(np.argmax(score)), 0]) < 0.05
    assert corr[True] > 0.95  # finite samples leave a small x term
    assert abs(corr[False]) < 0.3


def test_abs_inputs_round_trip_and_bad_inputs(tmp_path) -> None:
    ens = RewardEnsemble(3, 2, RewardConfig(abs_inputs=True), seed=2)
    x = np.random.default_rng(0).normal(size=(6, 3))
    u = np.random.default_rng(1).normal(size=(6, 2))
    ens.save(tmp_path)
    back = load_reward_model(tmp_path)
    assert back.config.abs_inputs and back.in_mean.shape == (10,)
    np.testing.assert_array_equal(back.predict(x, u), ens.predict(x, u))
    with pytest.raises(ConfigError, match="abs_inputs applies to MLP reward models"):
        RewardConfig(kind="cnn", abs_inputs=True)
